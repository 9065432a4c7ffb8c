// attnkit: the one exp / tanh algorithm every ISA implements (scalar here; SIMD files mirror it step
// by step). Every step is a plain IEEE mul, add or sub (no FMA) and n is rounded to nearest even, so
// scalar, AVX2, AVX512, NEON and wasm give the same bits; Cephes-style, max error about 1 ulp.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

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

// tanh: for |x| < kTanhSmall an odd polynomial (no cancellation near 0), else 1 - 2 / (exp(2|x|) + 1).
constexpr float kTanhSmall = 0.625f;
constexpr float kT0 = -5.70498872745e-3f;
constexpr float kT1 = 2.06390887954e-2f;
constexpr float kT2 = -5.37397155531e-2f;
constexpr float kT3 = 1.33314422036e-1f;
constexpr float kT4 = -3.33332819422e-1f;

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
