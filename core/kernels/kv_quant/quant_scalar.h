// attnkit: the scalar quantize step of the kv_quant contract, shared by every ISA file's tail loop so
// tails and vector bodies can never disagree: clamp in float (NaN -> 0), then round half to even.
#pragma once
#include <cmath>
#include <cstdint>

namespace attnkit {

inline int32_t kv_quantize_one(float x, float inv_scale, float lo, float hi) {
  float v = x * inv_scale;
  if (std::isnan(v)) return 0;
  v = v < lo ? lo : (v > hi ? hi : v);
  return static_cast<int32_t>(std::nearbyint(v));
}

}  // namespace attnkit
