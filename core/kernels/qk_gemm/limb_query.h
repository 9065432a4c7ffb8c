// attnkit qk_gemm: exact integer QK for int8/int4 caches. Each fp32 query row is rounded to 2^-23 of its largest
// element and split as 2^-e (256 hi + lo), hi int16 and lo a signed byte: q.k becomes two integer dot products and
// one shared rounding step, the same bits on every ISA that uses it, within |alpha| (4u sum|q||k| + 2^-21 amax
// sum|k|) of the exact score (derived in tests/native/kernels_qk_sv_test.cc).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "qk_gemm/qk_gemm.h"

namespace attnkit {
namespace {

// q = 2^-e (kLimbBase hi + lo).
constexpr float kLimbBase = 256.0f;
// Limb sums stay below 2^31 while H * 2^14 * 2^7 does: the integer path takes H < 1024 and falls back
// to the fp32 kernel beyond (no model uses such heads).
constexpr size_t kLimbMaxH = 1016;
// Rows whose largest |q| lies outside [2^-40, 2^40] (or is not finite) take the fp32 kernel: their
// scale would leave fp32's normal range, and NaN/Inf must propagate as in the fp32 contract.
constexpr float kLimbMinAbs = 0x1p-40f, kLimbMaxAbs = 0x1p40f;

struct LimbRow {
  const int16_t* hi;  // s8: H values (padded with zeros); s4: even elements, then odd ones at +odd
  const int16_t* lo;
  size_t odd;         // s4: where the odd elements start (a multiple of the ISA's step); s8: 0
  float factor;       // alpha * 2^-e
  int32_t sum_hi, sum_lo;  // for s4: sums of the limbs, to remove the nibble offset 8
};

// Splits q[0, H) into hi/lo. s4 stores the even elements at [0, H/2) and the odd ones at
// [half, half + H/2), half >= H/2; padding up to `padded` (s8) or to half in each part is zero.
// Returns false when the row must take the fp32 kernel. Written so that compilers vectorize it (integer
// max over the magnitude bits, float scaling by a power of two): split once per block call, it took 10%
// of a 2-row x 512-key decode block as scalar double arithmetic.
inline bool split_limbs(const float* q, size_t H, bool s4, size_t half, size_t padded, float alpha,
                        int16_t* hi, int16_t* lo, LimbRow* row) {
  // Non-negative floats order as their bit patterns, and NaN's lie above infinity's.
  uint32_t amax_bits = 0;
  for (size_t d = 0; d < H; ++d) {
    uint32_t b;
    std::memcpy(&b, q + d, 4);
    b &= 0x7fffffffu;
    amax_bits = b > amax_bits ? b : amax_bits;
  }
  const auto bits_of = [](float x) {
    uint32_t b;
    std::memcpy(&b, &x, 4);
    return b;
  };
  if (amax_bits > bits_of(kLimbMaxAbs) || H > kLimbMaxH || (amax_bits != 0 && amax_bits < bits_of(kLimbMinAbs)))
    return false;
  std::fill(hi, hi + padded, int16_t{0});
  std::fill(lo, lo + padded, int16_t{0});
  *row = {hi, lo, s4 ? half : 0, 0.0f, 0, 0};
  if (amax_bits == 0) return true;  // all-zero row: every score is 0
  float amax;
  std::memcpy(&amax, &amax_bits, 4);
  int x;
  std::frexp(amax, &x);  // amax = m 2^x, m in [0.5, 1)
  // amax 2^e < 2^22, so |Q| <= 2^22: hi in [-2^14, 2^14] and lo in [-128, 127]. Q keeps 23 bits where fp32 keeps
  // 24: the two limbs are then three signed bytes for VNNI's vpdpbusd (x86_key_lanes.h), where 29 bits took four.
  const int e = 22 - x;
  // A power of two in [2^-19, 2^62]: q * scale is exact, except products below 2^-126, which round to
  // 0 exactly as the exact value would.
  const float scale = std::ldexp(1.0f, e);
  int32_t sum_hi = 0, sum_lo = 0;
  const auto split = [scale, &sum_hi, &sum_lo](const float* src, size_t stride, size_t n, int16_t* h, int16_t* l) {
    int32_t sh = 0, sl = 0;
    for (size_t k = 0; k < n; ++k) {
      const int32_t v = static_cast<int32_t>(std::nearbyint(src[k * stride] * scale));
      const int32_t hv = (v + 128) >> 8;
      const int32_t lv = v - hv * 256;
      h[k] = static_cast<int16_t>(hv);
      l[k] = static_cast<int16_t>(lv);
      sh += hv;
      sl += lv;
    }
    sum_hi += sh;
    sum_lo += sl;
  };
  if (s4) {
    split(q, 2, H / 2, hi, lo);
    split(q + 1, 2, H / 2, hi + half, lo + half);
  } else {
    split(q, 1, H, hi, lo);
  }
  *row = {hi, lo, s4 ? half : 0, std::ldexp(alpha, -e), sum_hi, sum_lo};
  return true;
}

// The one rounding step, identical on every ISA: the integer dot products to the score. s4 sums were
// taken over raw nibbles (0..15), so the offset 8 is removed here, exactly.
inline float combine_limbs(int32_t dot_hi, int32_t dot_lo, const LimbRow& r, bool s4) {
  if (s4) {
    dot_hi -= 8 * r.sum_hi;
    dot_lo -= 8 * r.sum_lo;
  }
  return (static_cast<float>(dot_hi) * kLimbBase + static_cast<float>(dot_lo)) * r.factor;
}

// The driver every ISA shares. T supplies kMaxRows, kStep (int16 lanes per vector: limb rows are
// padded to it), keys_for_rows(MB), prefetch_rows(N, ldk) and prefetch(p, bytes) (how far ahead to ask
// for K rows, 0 for never, and how), and
//   template <int MB, int R, bool S4> static void tile(size_t H, const LimbRow* q, const uint8_t* K,
//                                                     size_t ldk, float* const* c)
// which writes the scores of MB rows x R keys to c[i][r], each through combine_limbs' exact formula.
template <class T, int MB, bool kS4>
void limb_rows(size_t N, size_t H, const LimbRow* q, const uint8_t* K, size_t ldk, float* const* c_rows) {
  constexpr int R = T::keys_for_rows(MB);
  float* c[MB];
  size_t j = 0;
  const size_t ahead = T::prefetch_rows(N, ldk);
  for (; j + R <= N; j += R) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    if (ahead && j + ahead + R <= N) T::prefetch(K + (j + ahead) * ldk, R * ldk);
    T::template tile<MB, R, kS4>(H, q, K + j * ldk, ldk, c);
  }
  for (; j < N; ++j) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    T::template tile<MB, 1, kS4>(H, q, K + j * ldk, ldk, c);
  }
}

template <class T, bool kS4, int MB = T::kMaxRows>
void limb_rows_dispatch(int mb, size_t N, size_t H, const LimbRow* q, const uint8_t* K, size_t ldk,
                        float* const* c) {
  if constexpr (MB >= 1) {
    if (mb == MB) return limb_rows<T, MB, kS4>(N, H, q, K, ldk, c);
    limb_rows_dispatch<T, kS4, MB - 1>(mb, N, H, q, K, ldk, c);
  }
}

// Rows the integer path cannot take go to kFallback (the same ISA's fp32 kernel) one by one.
template <class T, bool kS4, QkGemmFn kFallback>
void qk_limbs(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
              float alpha, float* C, size_t ldc) {
  if (H > kLimbMaxH) return kFallback(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  constexpr size_t kStep = T::kStep;
  const size_t half = kS4 ? (H / 2 + kStep - 1) / kStep * kStep : 0;
  const size_t padded = kS4 ? 2 * half : (H + kStep - 1) / kStep * kStep;
  alignas(64) int16_t limbs[T::kMaxRows][2][kLimbMaxH + 2 * kStep];
  const uint8_t* base = static_cast<const uint8_t*>(K);
  size_t i = 0;
  while (i < M) {
    LimbRow rows[T::kMaxRows];
    float* out[T::kMaxRows];
    int mb = 0;
    for (; i < M && mb < T::kMaxRows; ++i) {
      const float* q = Q + i * ldq;
      if (split_limbs(q, H, kS4, half, padded, alpha, limbs[mb][0], limbs[mb][1], &rows[mb]))
        out[mb++] = C + i * ldc;
      else
        kFallback(1, N, H, q, ldq, K, ldk, alpha, C + i * ldc, ldc);
    }
    if (mb > 0) limb_rows_dispatch<T, kS4>(mb, N, H, rows, base, ldk, out);
  }
}

// The limbs as three signed bytes, for kernels that multiply bytes (ARM's sdot, AVX-VNNI's vpdpbusd): hi = 256 d0 +
// d1 with d1 hi's low byte read as signed, so |d0| <= 64, and d2 = lo, already a byte.
struct DigitRow {
  const int8_t* d[3];  // d0, d1, d2 per element (s4: even elements, then odd ones at +limb.odd); zero padded
  LimbRow limb;        // odd, factor and the limb sums for combine_limbs
};

inline void limb_digits(const int16_t* hi, const int16_t* lo, size_t n, int8_t* const d[3]) {
  for (size_t e = 0; e < n; ++e) {
    const int8_t low = static_cast<int8_t>(hi[e] & 0xff);
    d[0][e] = static_cast<int8_t>((hi[e] - low) >> 8);
    d[1][e] = low;
    d[2][e] = static_cast<int8_t>(lo[e]);
  }
}

// As qk_limbs, for the byte-digit kernels: each row's limbs become digits once per call. T supplies kStep (cache
// bytes per step: digit rows are padded to it), kMaxRows, and
//   template <int MB, bool kS4> static void rows(size_t N, size_t H, const DigitRow* q, const uint8_t* K,
//                                                size_t ldk, float* const* c)
// which writes the scores of MB rows over all N keys to c[i][0, N) through combine_limbs' exact formula. Rows the
// limbs cannot take go to `fallback` (the same ISA's fp32 kernel) one by one.
template <class T, bool kS4, int MB = T::kMaxRows>
void digit_rows_dispatch(int mb, size_t N, size_t H, const DigitRow* q, const uint8_t* K, size_t ldk,
                         float* const* c) {
  if constexpr (MB >= 1) {
    if (mb == MB) return T::template rows<MB, kS4>(N, H, q, K, ldk, c);
    digit_rows_dispatch<T, kS4, MB - 1>(mb, N, H, q, K, ldk, c);
  }
}

template <class T, bool kS4>
void qk_digits(QkGemmFn fallback, size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
               size_t ldk, float alpha, float* C, size_t ldc) {
  if (H > kLimbMaxH) return fallback(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  constexpr size_t kStep = T::kStep, kRowBytes = kLimbMaxH + 2 * kStep;
  const size_t half = kS4 ? (H / 2 + kStep - 1) / kStep * kStep : 0;
  const size_t padded = kS4 ? 2 * half : (H + kStep - 1) / kStep * kStep;
  alignas(64) int16_t limbs[T::kMaxRows][2][kRowBytes];
  alignas(64) int8_t digits[T::kMaxRows][3][kRowBytes];
  size_t i = 0;
  while (i < M) {
    DigitRow rows[T::kMaxRows];
    float* out[T::kMaxRows];
    int mb = 0;
    for (; i < M && mb < T::kMaxRows; ++i) {
      const float* q = Q + i * ldq;
      LimbRow limb;
      if (!split_limbs(q, H, kS4, half, padded, alpha, limbs[mb][0], limbs[mb][1], &limb)) {
        fallback(1, N, H, q, ldq, K, ldk, alpha, C + i * ldc, ldc);
        continue;
      }
      int8_t* const d[3] = {digits[mb][0], digits[mb][1], digits[mb][2]};
      limb_digits(limbs[mb][0], limbs[mb][1], padded, d);
      rows[mb] = {{d[0], d[1], d[2]}, limb};
      out[mb++] = C + i * ldc;
    }
    if (mb > 0) digit_rows_dispatch<T, kS4>(mb, N, H, rows, static_cast<const uint8_t*>(K), ldk, out);
  }
}

}  // namespace
}  // namespace attnkit
