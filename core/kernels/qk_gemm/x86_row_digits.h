// attnkit qk_gemm: the exact int8 limb QK of limb_query.h for a single query row on AVX512-VNNI. The limbs are
// three signed bytes (hi = 256 d0 + d1, lo = d2) that vpdpbusd multiplies with the cache bytes + 128, 64 a step,
// with each key's sums reduced 8 keys at a time: 6 multiply-adds a key at H=128 where the int16 limbs' vpdpwssd
// took 8 and four widenings. The same integer sums as every other ISA, so the same bits.
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
  const int8_t* d[3];  // d0, d1, d2 of every element, zero past H up to a multiple of kRowDigitStep
  float factor;
  uint32_t off_hi, off_lo;  // the bytes + 128: 128 times the limb sums, mod 2^32 as the sums themselves
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

// Every row on its own; rows the integer path cannot take go to kFallback (the fp32 kernel).
template <QkGemmFn kFallback>
void qk_row_digits_s8(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                      float alpha, float* C, size_t ldc) {
  if (H > kLimbMaxH) return kFallback(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  const size_t padded = (H + kRowDigitStep - 1) / kRowDigitStep * kRowDigitStep;
  constexpr size_t kRowBytes = (kLimbMaxH + 2 * kRowDigitStep - 1) / kRowDigitStep * kRowDigitStep;
  alignas(64) int16_t limbs[2][kRowBytes];
  alignas(64) int8_t digits[3][kRowBytes];
  for (size_t i = 0; i < M; ++i) {
    const float* row = Q + i * ldq;
    LimbRow limb;
    if (!split_limbs(row, H, false, 0, padded, alpha, limbs[0], limbs[1], &limb)) {
      kFallback(1, N, H, row, ldq, K, ldk, alpha, C + i * ldc, ldc);
      continue;
    }
    int8_t* const rows[3] = {digits[0], digits[1], digits[2]};
    limb_bytes(limbs[0], limbs[1], padded, rows);
    const RowDigits q{{digits[0], digits[1], digits[2]}, limb.factor, 128u * static_cast<uint32_t>(limb.sum_hi),
                      128u * static_cast<uint32_t>(limb.sum_lo)};
    row_digit_keys(N, H, q, static_cast<const uint8_t*>(K), ldk, C + i * ldc);
  }
}

}  // namespace
}  // namespace attnkit
