// attnkit kernel family rotary: rotary position embedding of one head row (spec §2.4).
// Only the first rotary_dim elements rotate; the caller copies the rest. fp32 arithmetic as in ORT.
#pragma once
#include <cstddef>

namespace attnkit {

// half = rotary_dim / 2; c = cos row, s = sin row (half entries each, fp32).
// split-half:  y[i] = x[i]*c[i] - x[i+half]*s[i];  y[i+half] = x[i+half]*c[i] + x[i]*s[i]
// interleaved: y[2i] = x[2i]*c[i] - x[2i+1]*s[i]; y[2i+1] = x[2i+1]*c[i] + x[2i]*s[i]
// x and y may alias. Computed as mul, mul, then sub/add with no FMA contraction, so every ISA gives
// the same bits.
struct RotaryKernels {
  void (*apply)(const float* x, const float* cos_row, const float* sin_row, size_t rotary_dim,
                bool interleaved, float* y);
};

}  // namespace attnkit
