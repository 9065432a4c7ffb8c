// attnkit: the integer limb QK tile of limb_query.h for x86 over a traits type I with a fused int16
// multiply-accumulate (AVX512-VNNI's vpdpwssd; without one, pmaddwd + paddd costs twice the fp32
// kernel's work at two query rows, so AVX2/AVX512 keep the fp32 conversion kernels). Each K row is
// widened to int16 once for both limbs of every query row; sums are reduced 8 keys at a time.
#pragma once
#include "qk_gemm/limb_query.h"
#include "qk_gemm/x86_common.h"

namespace attnkit {
namespace {

template <class I>
struct X86Limbs {
  using Vi = typename I::Vi;
  static constexpr int kMaxRows = I::kLimbRows;
  static constexpr size_t kStep = 2 * I::W;
  static constexpr int keys_for_rows(int mb) { return I::limb_keys_for_rows(mb); }
  // Decode blocks come from DRAM: ask for the rows the x86 direct QK would (x86_common.h).
  static size_t prefetch_rows(size_t N, size_t ldk) { return block_prefetch_rows(N, ldk); }
  static void prefetch(const uint8_t* p, size_t bytes) { prefetch_lines(p, bytes); }

  template <int MB, int R, class Load>
  static void s8_step(const LimbRow* q, const uint8_t* K, size_t ldk, size_t d, Load load, Vi (&ah)[MB][R],
                      Vi (&al)[MB][R]) {
    Vi qh[MB], ql[MB];
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      qh[i] = I::loadi(q[i].hi + d);
      ql[i] = I::loadi(q[i].lo + d);
    }
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) {
      const Vi k = load(K + r * ldk + d);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
        ah[i][r] = I::dot(ah[i][r], k, qh[i]);
        al[i][r] = I::dot(al[i][r], k, ql[i]);
      }
    }
  }

  // Nibble bytes: even elements in the low nibbles, odd ones in the high; the query limbs hold the even
  // elements at [0, odd) and the odd ones from odd on. Loading the four limb vectors once per step, outside
  // the key loop, keeps every accumulator in a register (with them inside, 2 rows spilled to the stack).
  template <int MB, int R, class Load>
  static void s4_step(const LimbRow* q, const uint8_t* K, size_t ldk, size_t b, Load load, Vi (&ah)[MB][R],
                      Vi (&al)[MB][R]) {
    Vi qhe[MB], qho[MB], qle[MB], qlo[MB];
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      qhe[i] = I::loadi(q[i].hi + b);
      qho[i] = I::loadi(q[i].hi + q[i].odd + b);
      qle[i] = I::loadi(q[i].lo + b);
      qlo[i] = I::loadi(q[i].lo + q[i].odd + b);
    }
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) {
      const Vi x = load(K + r * ldk + b);
      const Vi even = I::low_nibbles(x), odd = I::high_nibbles(x);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
        ah[i][r] = I::dot(I::dot(ah[i][r], even, qhe[i]), odd, qho[i]);
        al[i][r] = I::dot(I::dot(al[i][r], even, qle[i]), odd, qlo[i]);
      }
    }
  }

  template <int MB, int R, bool S4>
  static void tile(size_t H, const LimbRow* q, const uint8_t* K, size_t ldk, float* const* c) {
    Vi ah[MB][R], al[MB][R];
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
      ATTNKIT_UNROLL for (int r = 0; r < R; ++r) ah[i][r] = al[i][r] = I::zeroi();
    // Whole vectors, then one zero-filled partial step (the query limbs are zero there too).
    if constexpr (S4) {
      const size_t bytes = H / 2;
      size_t b = 0;
      for (; b + kStep <= bytes; b += kStep) s4_step(q, K, ldk, b, [](const uint8_t* p) { return I::widen_u8(p); }, ah, al);
      if (b < bytes) s4_step(q, K, ldk, b, [n = bytes - b](const uint8_t* p) { return I::widen_u8(p, n); }, ah, al);
    } else {
      size_t d = 0;
      for (; d + kStep <= H; d += kStep) s8_step(q, K, ldk, d, [](const uint8_t* p) { return I::widen_s8(p); }, ah, al);
      if (d < H) s8_step(q, K, ldk, d, [n = H - d](const uint8_t* p) { return I::widen_s8(p, n); }, ah, al);
    }
    // combine_limbs' formula lane-wise: the same roundings, so the same bits as the scalar kernel.
    if constexpr (R <= 4) {
      // One reduction for 4 / R rows: hi sums land in lanes 0-3, lo sums in lanes 4-7, row by row. With one
      // row per reduction, 4 query rows x 2 keys (a decode step of 4 query heads per KV head) left half of
      // every reduction empty.
      constexpr int kRowsPer = R == 3 ? 1 : 4 / R;
      ATTNKIT_UNROLL for (int i0 = 0; i0 < MB; i0 += kRowsPer) {
        Vi p[8];
        // Per-slot offsets and factors as register values: built through a stack array, the vector load
        // after scalar stores missed store forwarding (int4 decode 16 x 8 heads: 286 -> 365 us).
        int32_t off_hi[4] = {0, 0, 0, 0}, off_lo[4] = {0, 0, 0, 0};
        float factor[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        ATTNKIT_UNROLL for (int slot = 0; slot < 4; ++slot) {
          const int i = i0 + slot / R, r = slot % R;
          const bool live = slot < kRowsPer * R && i < MB;
          const int ic = live ? i : 0;
          p[slot] = live ? ah[ic][r] : I::zeroi();
          p[4 + slot] = live ? al[ic][r] : I::zeroi();
          if (live) {
            off_hi[slot] = S4 ? 8 * q[i].sum_hi : 0;
            off_lo[slot] = S4 ? 8 * q[i].sum_lo : 0;
            factor[slot] = q[i].factor;
          }
        }
        __m256i sums = I::reduce8i(p);
        if constexpr (S4)
          sums = _mm256_sub_epi32(sums, _mm256_setr_epi32(off_hi[0], off_hi[1], off_hi[2], off_hi[3], off_lo[0],
                                                          off_lo[1], off_lo[2], off_lo[3]));
        const __m128 h = _mm_cvtepi32_ps(_mm256_castsi256_si128(sums));
        const __m128 l = _mm_cvtepi32_ps(_mm256_extracti128_si256(sums, 1));
        const __m128 scale = kRowsPer == 1 ? _mm_set1_ps(factor[0]) : _mm_setr_ps(factor[0], factor[1], factor[2], factor[3]);
        const __m128 out = _mm_mul_ps(_mm_add_ps(_mm_mul_ps(h, _mm_set1_ps(32768.0f)), l), scale);
        if (R == 4) {
          _mm_storeu_ps(c[i0], out);
        } else {
          alignas(16) float o[4];
          _mm_store_ps(o, out);
          ATTNKIT_UNROLL for (int slot = 0; slot < kRowsPer * R; ++slot)
            if (i0 + slot / R < MB) c[i0 + slot / R][slot % R] = o[slot];
        }
      }
    } else {
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
        const __m256i off_hi = _mm256_set1_epi32(S4 ? 8 * q[i].sum_hi : 0);
        const __m256i off_lo = _mm256_set1_epi32(S4 ? 8 * q[i].sum_lo : 0);
        Vi ph[8], pl[8];
        ATTNKIT_UNROLL for (int r = 0; r < 8; ++r) {
          ph[r] = r < R ? ah[i][r] : I::zeroi();
          pl[r] = r < R ? al[i][r] : I::zeroi();
        }
        const __m256i h = _mm256_sub_epi32(I::reduce8i(ph), off_hi), l = _mm256_sub_epi32(I::reduce8i(pl), off_lo);
        const __m256 out = _mm256_mul_ps(
            _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_set1_ps(32768.0f)), _mm256_cvtepi32_ps(l)),
            _mm256_set1_ps(q[i].factor));
        if (R == 8) {
          _mm256_storeu_ps(c[i], out);
        } else {
          alignas(32) float o[8];
          _mm256_store_ps(o, out);
          for (int r = 0; r < R; ++r) c[i][r] = o[r];
        }
      }
    }
  }
};

}  // namespace
}  // namespace attnkit
