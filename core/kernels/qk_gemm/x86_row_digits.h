// attnkit qk_gemm: the exact int8/int4 limb QK of limb_query.h for a single query row on AVX512-VNNI. The limbs are
// three signed bytes (hi = 256 d0 + d1, lo = d2) that vpdpbusd multiplies with the cache bytes + 128 (int4: the
// nibbles), with each key's sums reduced 8 keys at a time, one or two keys to a vector: 6 multiply-adds a key at
// H=128 where int16 limbs on vpdpwssd took 8 and four widenings. The same integer sums as every other ISA, so the
// same bits.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "qk_gemm/limb_query.h"
#include "qk_gemm/x86_common.h"
#include "qk_gemm/x86_key_lanes.h"
#include "qk_gemm/x86_traits_avx512.h"
#include "x86_vnni.h"

namespace attnkit {
namespace {

constexpr size_t kRowDigitStep = 64;  // K bytes per vpdpbusd
constexpr int kRowDigitKeys = 8;      // keys per tile: one reduce8i per limb

struct RowDigits {
  const int8_t* d[3];  // d0, d1, d2 of every element, zero past H up to a multiple of kRowDigitStep (int4: the even
                       // elements, then the odd ones from odd on)
  float factor;
  uint32_t off_hi, off_lo;  // int8 bytes + 128, int4 nibbles (elements + 8): 128 or 8 times the limb sums, mod 2^32
  size_t odd = 0;
};

// R keys' scores (R <= 8) at c[0, R).
template <int R>
__attribute__((always_inline)) inline void row_digit_tile(size_t H, const RowDigits& q, const uint8_t* K, size_t ldk,
                                                          float* c) {
  __m512i a0[R], a1[R], a2[R];
  ATTNKIT_UNROLL for (int r = 0; r < R; ++r) a0[r] = a1[r] = a2[r] = _mm512_setzero_si512();
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t b = 0; b < H; b += kRowDigitStep) {
    // Bytes past the row load as zero (128 once offset) and meet zero digits.
    const size_t n = std::min(kRowDigitStep, H - b);
    const __mmask64 m = n == kRowDigitStep ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
    const __m512i q0 = _mm512_loadu_si512(q.d[0] + b), q1 = _mm512_loadu_si512(q.d[1] + b);
    const __m512i q2 = _mm512_loadu_si512(q.d[2] + b);
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) {
      const __m512i u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, K + r * ldk + b), offset);
      dpbusd_into(a0[r], u, q0);
      dpbusd_into(a1[r], u, q1);
      dpbusd_into(a2[r], u, q2);
    }
  }
  __m512i hi[8], lo[8];
  ATTNKIT_UNROLL for (int r = 0; r < 8; ++r) {
    hi[r] = r < R ? _mm512_add_epi32(_mm512_slli_epi32(a0[r], 8), a1[r]) : _mm512_setzero_si512();
    lo[r] = r < R ? a2[r] : _mm512_setzero_si512();
  }
  // combine_limbs' formula lane-wise: the same roundings, so the same bits as the scalar kernel.
  const __m256i h = _mm256_sub_epi32(Avx512::reduce8i(hi), _mm256_set1_epi32(static_cast<int32_t>(q.off_hi)));
  const __m256i l = _mm256_sub_epi32(Avx512::reduce8i(lo), _mm256_set1_epi32(static_cast<int32_t>(q.off_lo)));
  const __m256 out = _mm256_mul_ps(
      _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(h), _mm256_set1_ps(kLimbBase)), _mm256_cvtepi32_ps(l)),
      _mm256_set1_ps(q.factor));
  if (R == 8) {
    _mm256_storeu_ps(c, out);
  } else {
    _mm256_mask_storeu_ps(c, static_cast<__mmask8>((1u << R) - 1), out);
  }
}

// Rows whose last 64-byte chunk is at most half full (H = 96, 80, 72, 160, and 32 or less: Phi-2 and Phi-3 have 80 and
// 96 with one query head per KV head) take 8-key tiles of pairs: pair p's vectors hold 32 bytes of key p in their
// low half and the same 32 bytes of key p + 4 in the high half, against each digit's 32 bytes in both, so no
// vpdpbusd meets a half-empty chunk, and 8 keys reduce 12 sums instead of 24. 2048 keys, one vCPU, 3 alternating
// rounds: H = 96 2.89-2.95 against 3.70-3.81 us, 72 3.01-3.08 against 3.64-3.72, 32 1.66-1.69 against 2.74-2.85,
// 160 4.11-4.39 against 4.82-4.94; a Phi-3 int8 decode step (N = Nk = 32, T = 2048, one thread, in place) 391-408
// against 450-460 us. Whole chunks keep a vector per key: at H = 128 pairs were level, at 256 5% slower.
struct RowPairSums {
  __m512i s0[4], s1[4], s2[4];  // one array per digit: GCC keeps arrays of up to 256 bytes in registers
};

// The sums += the 8 keys' bytes [b, b + n) (n <= 32; kMasked: loads masked by n and by key[], else whole).
template <bool kS4, bool kMasked>
__attribute__((always_inline)) inline void row_pair_step(const RowDigits& q, const uint8_t* K, size_t ldk, size_t b,
                                                         size_t n, const __mmask32* key, RowPairSums& s) {
  const __mmask32 m = n == 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1;
  // Each digit's 32 bytes in both halves (int4: qo for the odd elements).
  __m512i qd[3], qo[3];
  ATTNKIT_UNROLL for (int k = 0; k < 3; ++k) {
    qd[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.d[k] + b)));
    if constexpr (kS4)
      qo[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.d[k] + q.odd + b)));
  }
  ATTNKIT_UNROLL for (int p = 0; p < 4; ++p) {
    // 32-byte loads: one 64-byte load per pair would start half a line in and split across two lines. Bytes past
    // the row load as zero (128 once offset) and meet zero digits; keys past the tile's are never read.
    __m256i lo, hi;
    if constexpr (kMasked) {
      lo = _mm256_maskz_loadu_epi8(m & key[p], K + p * ldk + b);
      hi = _mm256_maskz_loadu_epi8(m & key[p + 4], K + (p + 4) * ldk + b);
    } else {
      lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(K + p * ldk + b));
      hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(K + (p + 4) * ldk + b));
    }
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    if constexpr (kS4) {
      // Even elements in the low nibbles, odd ones in the high; zero bytes past the row meet zero digits.
      const __m512i nibble = _mm512_set1_epi8(0x0f);
      const __m512i even = _mm512_and_si512(x, nibble), odd = _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble);
      dpbusd_into(s.s0[p], even, qd[0]);
      dpbusd_into(s.s1[p], even, qd[1]);
      dpbusd_into(s.s2[p], even, qd[2]);
      dpbusd_into(s.s0[p], odd, qo[0]);
      dpbusd_into(s.s1[p], odd, qo[1]);
      dpbusd_into(s.s2[p], odd, qo[2]);
    } else {
      const __m512i u = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));
      dpbusd_into(s.s0[p], u, qd[0]);
      dpbusd_into(s.s1[p], u, qd[1]);
      dpbusd_into(s.s2[p], u, qd[2]);
    }
  }
}

// Up to 8 keys' scores at c[0, kn) (kFull: kn = 8) over rows of `bytes` bytes.
template <bool kS4, bool kFull>
__attribute__((always_inline)) inline void row_pair_tile(size_t bytes, const RowDigits& q, const uint8_t* K,
                                                         size_t ldk, size_t kn, float* c) {
  RowPairSums s;
  ATTNKIT_UNROLL for (int p = 0; p < 4; ++p) s.s0[p] = s.s1[p] = s.s2[p] = _mm512_setzero_si512();
  __mmask32 key[8];
  ATTNKIT_UNROLL for (int r = 0; r < 8; ++r) key[r] = kFull || r < static_cast<int>(kn) ? ~__mmask32{0} : 0;
  size_t b = 0;
  for (; b + 32 <= bytes; b += 32) row_pair_step<kS4, !kFull>(q, K, ldk, b, 32, key, s);
  if (b < bytes) row_pair_step<kS4, true>(q, K, ldk, b, bytes - b, key, s);
  // x[p], p < 4: hi sums, 128-bit lanes 0-1 key p's, 2-3 key p + 4's; x[4 + p] the lo sums alike.
  __m512i x[8];
  ATTNKIT_UNROLL for (int p = 0; p < 4; ++p) {
    x[p] = _mm512_add_epi32(_mm512_slli_epi32(s.s0[p], 8), s.s1[p]);
    x[4 + p] = s.s2[p];
  }
  // 128-bit lane L of h (l): half of the hi (lo) sums of keys 0-3 (L = 0, 1) or 4-7 (L = 2, 3).
  const __m512i h = Avx512::chunk_sums4(x), l = Avx512::chunk_sums4(x + 4);
  const __m512i sums = _mm512_add_epi32(_mm512_shuffle_i32x4(h, l, _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(h, l, _MM_SHUFFLE(3, 1, 3, 1)));  // hi 0-7, lo 0-7
  const __m512i off = _mm512_inserti64x4(_mm512_set1_epi32(static_cast<int32_t>(q.off_hi)),
                                         _mm256_set1_epi32(static_cast<int32_t>(q.off_lo)), 1);
  const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, off));
  // combine_limbs' formula lane-wise: the same roundings, so the same bits as the scalar kernel.
  const __m256 out = _mm256_mul_ps(
      _mm256_add_ps(_mm256_mul_ps(_mm512_castps512_ps256(f), _mm256_set1_ps(kLimbBase)), _mm512_extractf32x8_ps(f, 1)),
      _mm256_set1_ps(q.factor));
  _mm256_mask_storeu_ps(c, static_cast<__mmask8>((1u << kn) - 1), out);
}

__attribute__((noinline)) inline void row_digit_keys(size_t N, size_t H, const RowDigits& q, const uint8_t* K,
                                                     size_t ldk, float* c) {
  const size_t ahead = block_prefetch_rows(N, ldk);
  size_t j = 0;
  for (; j + kRowDigitKeys <= N; j += kRowDigitKeys) {
    if (ahead && j + ahead + kRowDigitKeys <= N) prefetch_lines(K + (j + ahead) * ldk, kRowDigitKeys * ldk);
    row_digit_tile<kRowDigitKeys>(H, q, K + j * ldk, ldk, c + j);
  }
  for (; j < N; ++j) row_digit_tile<1>(H, q, K + j * ldk, ldk, c + j);
}

// A function of its own, as row_digit_keys: with both tiles in one, GCC kept the sums on the stack.
template <bool kS4>
__attribute__((noinline)) void row_pair_keys(size_t N, size_t bytes, const RowDigits& q, const uint8_t* K, size_t ldk,
                                             float* c) {
  const size_t ahead = block_prefetch_rows(N, ldk);
  size_t j = 0;
  for (; j + kRowDigitKeys <= N; j += kRowDigitKeys) {
    if (ahead && j + ahead + kRowDigitKeys <= N) prefetch_lines(K + (j + ahead) * ldk, kRowDigitKeys * ldk);
    row_pair_tile<kS4, true>(bytes, q, K + j * ldk, ldk, kRowDigitKeys, c + j);
  }
  if (j < N) row_pair_tile<kS4, false>(bytes, q, K + j * ldk, ldk, N - j, c + j);
}

// Every row on its own; rows the integer path cannot take go to kFallback (the fp32 kernel). int8 rows take pairs of
// keys where they end in half a chunk; int4 rows always (qk_gemm_s4_avx512vnni keeps its lane tiles at H=128): against
// the int16 limbs on vpdpwssd that they replace, 2048 keys, 3 alternating rounds, H=64 3.36-3.39 against 4.07-4.16
// us, 96 4.75-5.19 against 5.96-6.30, 192 5.99-6.33 against 7.15-7.52, 256 7.05-8.06 against 8.98-9.44; a Phi-3
// int4 decode step (as above) 238-260 against 271-439 us.
template <bool kS4, QkGemmFn kFallback>
void qk_row_digits(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk, float alpha,
                   float* C, size_t ldc) {
  if (H > kLimbMaxH) return kFallback(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  const size_t half = kS4 ? (H / 2 + kRowDigitStep - 1) / kRowDigitStep * kRowDigitStep : 0;
  const size_t padded = kS4 ? 2 * half : (H + kRowDigitStep - 1) / kRowDigitStep * kRowDigitStep;
  constexpr size_t kRowBytes = (kLimbMaxH + 2 * kRowDigitStep - 1) / kRowDigitStep * kRowDigitStep;
  alignas(64) int16_t limbs[2][kRowBytes];
  alignas(64) int8_t digits[3][kRowBytes];
  const bool pairs = kS4 || (H % kRowDigitStep != 0 && H % kRowDigitStep <= kRowDigitStep / 2);
  const uint32_t offset = kS4 ? 8u : 128u;
  for (size_t i = 0; i < M; ++i) {
    const float* row = Q + i * ldq;
    LimbRow limb;
    if (!split_limbs(row, H, kS4, half, padded, alpha, limbs[0], limbs[1], &limb)) {
      kFallback(1, N, H, row, ldq, K, ldk, alpha, C + i * ldc, ldc);
      continue;
    }
    int8_t* const rows[3] = {digits[0], digits[1], digits[2]};
    limb_bytes(limbs[0], limbs[1], padded, rows);
    const RowDigits q{{digits[0], digits[1], digits[2]}, limb.factor, offset * static_cast<uint32_t>(limb.sum_hi),
                      offset * static_cast<uint32_t>(limb.sum_lo), half};
    const uint8_t* k = static_cast<const uint8_t*>(K);
    if (pairs)
      row_pair_keys<kS4>(N, kS4 ? H / 2 : H, q, k, ldk, C + i * ldc);
    else
      row_digit_keys(N, H, q, k, ldk, C + i * ldc);
  }
}

}  // namespace
}  // namespace attnkit
