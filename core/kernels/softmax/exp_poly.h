// attnkit: the exp / tanh algorithms every ISA implements (scalar here; SIMD files mirror them step
// by step). Every step is a plain IEEE mul, add or sub (no FMA), or an exact scaling by 2^n, and n is
// rounded to nearest even, so scalar, AVX2, AVX512, NEON and wasm give the same bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace attnkit {
namespace exp_poly {

// Below kLow the result would be subnormal: exp returns 0 (so exp(-inf) = 0 and masked scores vanish).
constexpr float kLow = -87.3365447505531f;  // ln(FLT_MIN)
// Above kHigh 2^n would overflow the exponent field; inputs are clamped there (softmax never gets there).
constexpr float kHigh = 88.3762626647949f;
constexpr float kLog2e = 1.44269504088896341f;
// ln 2 split so n * kLn2Hi is exact for |n| <= 128 (kLn2Hi has 9 significant bits).
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f;
constexpr float kP1 = 1.3981999507e-3f;
constexpr float kP2 = 8.3334519073e-3f;
constexpr float kP3 = 4.1665795894e-2f;
constexpr float kP4 = 1.6666665459e-1f;
constexpr float kP5 = 5.0000001201e-1f;

// exp_at_most_zero: 2^f = 1 + f * (kE0 f^5 + ... + kE5) on |f| <= 1/2 (Cephes exp2f's minimax polynomial).
constexpr float kE0 = 1.535336188319500e-4f;
constexpr float kE1 = 1.339887440266574e-3f;
constexpr float kE2 = 9.618437357674640e-3f;
constexpr float kE3 = 5.550332471162809e-2f;
constexpr float kE4 = 2.402264791363012e-1f;
constexpr float kE5 = 6.931472028550421e-1f;

// tanh: for |x| < kTanhSmall an odd polynomial (no cancellation near 0), else 1 - 2 / (exp(2|x|) + 1).
constexpr float kTanhSmall = 0.625f;
constexpr float kT0 = -5.70498872745e-3f;
constexpr float kT1 = 2.06390887954e-2f;
constexpr float kT2 = -5.37397155531e-2f;
constexpr float kT3 = 1.33314422036e-1f;
constexpr float kT4 = -3.33332819422e-1f;

// Max error about 1 ulp (0.82 over every 97th float in [-87.3, 0]); tanh's exp.
inline float exp(float x) {
  if (!(x >= kLow)) return std::isnan(x) ? x : 0.0f;
  float xc = x < kHigh ? x : kHigh;
  float n = std::nearbyint(xc * kLog2e);
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float r2 = r * r;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * r2 + r;
  p = p + 1.0f;
  uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float pow2;
  std::memcpy(&pow2, &bits, 4);
  return p * pow2;
}

// Softmax's exp, of d = x - max <= 0 (or NaN): t = d log2(e), n = round(t), and 2^(t - n) (t - n is exact) by a
// polynomial, times 2^n. Without exp's split-ln2 reduction (and on AVX512 with the scaling by 2^n in one
// vscalefps) exp_sum takes 19 vector operations instead of 26: 0.212 -> 0.174 ns per element on AVX512 (L1 rows),
// where it was 7% of a 2048-token prompt. The rounding of t adds a relative error of |d| u (u = 2^-24): within
// 1.34 (|d| + 1) u over every 97th float in [-87.3, 0], so each probability e^d <= 1 is within 1.34 u absolute
// (exp: 0.82 u).
// d > 0 happens only when the row held a NaN score, which max() skipped: that row's sum, and so its output, is NaN
// whatever this returns; NaN here spares the conversion of a huge t to int below (undefined behaviour in C++; the
// SIMD lanes convert by instruction, and their value is lost in the same NaN).
inline float exp_at_most_zero(float d) {
  if (!(d >= kLow)) return std::isnan(d) ? d : 0.0f;
  if (d > 0.0f) return std::numeric_limits<float>::quiet_NaN();
  const float t = d * kLog2e;
  const float n = std::nearbyint(t);
  const float f = t - n;
  float p = kE0;
  p = p * f + kE1;
  p = p * f + kE2;
  p = p * f + kE3;
  p = p * f + kE4;
  p = p * f + kE5;
  p = p * f + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float pow2;
  std::memcpy(&pow2, &bits, 4);
  return p * pow2;
}

inline float tanh(float x) {
  float a = std::fabs(x);
  float y;
  if (a < kTanhSmall) {
    float z = a * a;
    float p = kT0;
    p = p * z + kT1;
    p = p * z + kT2;
    p = p * z + kT3;
    p = p * z + kT4;
    y = p * z * a + a;
  } else {
    float e = exp(a + a);  // clamps at kHigh, where 2/(e+1) is already 0 in fp32
    y = 1.0f - 2.0f / (e + 1.0f);
  }
  return std::signbit(x) ? -y : y;
}

}  // namespace exp_poly
}  // namespace attnkit
