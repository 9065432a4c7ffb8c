// attnkit: the scalar steps of the kv_quant contract, shared by every ISA file so tails and vector bodies can
// never disagree: quantize (clamp in float, NaN -> the upper bound as in ORT, round half to even) and the
// fp16/bf16 row conversions (common/half.h), which ISAs without a conversion instruction use as they are.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/half.h"

namespace attnkit {

inline int32_t kv_quantize_one(float x, float inv_scale, float lo, float hi) {
  float v = x * inv_scale;
  // ORT clamps with std::max(lo, std::min(hi, q)), which takes a NaN q to hi (on every EP it ships).
  if (std::isnan(v)) return static_cast<int32_t>(hi);
  v = v < lo ? lo : (v > hi ? hi : v);
  return static_cast<int32_t>(std::nearbyint(v));
}

inline void to_f16_rows(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_f16(x[i]);
}
inline void to_bf16_rows(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = float_to_bf16(x[i]);
}
inline void from_f16_rows(const uint16_t* x, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_float(x[i]);
}
inline void from_bf16_rows(const uint16_t* x, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_float(x[i]);
}

}  // namespace attnkit
