// attnkit: the integer limb QK tile of limb_query.h for x86 over a traits type I with a fused int16
// multiply-accumulate (AVX512-VNNI's vpdpwssd; without one, pmaddwd + paddd costs twice the fp32
// kernel's work at two query rows, so AVX2/AVX512 keep the fp32 conversion kernels). Each K row is
// widened to int16 once for both limbs of a pass's query rows (I::kLimbRows); sums are reduced 4-8 keys
// at a time.
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
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      // combine_limbs' formula lane-wise: the same roundings, so the same bits as the scalar kernel.
      const __m256i off_hi = _mm256_set1_epi32(S4 ? 8 * q[i].sum_hi : 0);
      const __m256i off_lo = _mm256_set1_epi32(S4 ? 8 * q[i].sum_lo : 0);
      if constexpr (R <= 4) {
        // One reduction: hi sums land in lanes 0-3, lo sums in lanes 4-7.
        Vi p[8];
        ATTNKIT_UNROLL for (int r = 0; r < 4; ++r) {
          p[r] = r < R ? ah[i][r] : I::zeroi();
          p[4 + r] = r < R ? al[i][r] : I::zeroi();
        }
        const __m256i sums = _mm256_sub_epi32(I::reduce8i(p), _mm256_permute2x128_si256(off_hi, off_lo, 0x20));
        const __m128 h = _mm_cvtepi32_ps(_mm256_castsi256_si128(sums));
        const __m128 l = _mm_cvtepi32_ps(_mm256_extracti128_si256(sums, 1));
        const __m128 out = _mm_mul_ps(_mm_add_ps(_mm_mul_ps(h, _mm_set1_ps(kLimbBase)), l), _mm_set1_ps(q[i].factor));
        if (R == 4) {
          _mm_storeu_ps(c[i], out);
        } else {
          alignas(16) float o[4];
          _mm_store_ps(o, out);
          for (int r = 0; r < R; ++r) c[i][r] = o[r];
        }
      } else {
        Vi ph[8], pl[8];
        ATTNKIT_UNROLL for (int r = 0; r < 8; ++r) {
          ph[r] = r < R ? ah[i][r] : I::zeroi();
          pl[r] = r < R ? al[i][r] : I::zeroi();
        }
        const __m256i h = _mm256_sub_epi32(I::reduce8i(ph), off_hi), l = _mm256_sub_epi32(I::reduce8i(pl), off_lo);
        const __m256 out = _mm256_mul_ps(
            _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_set1_ps(kLimbBase)), _mm256_cvtepi32_ps(l)),
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
