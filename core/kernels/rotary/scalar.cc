// attnkit rotary kernel, scalar. mul, mul, then sub/add (the build disables FMA contraction), the
// same rounding every SIMD file reproduces, so rotated K rows are identical across ISAs.
#include "rotary/rotary.h"

namespace attnkit {
namespace {

void apply_scalar(const float* x, const float* c, const float* s, size_t rotary_dim,
                  bool interleaved, float* y) {
  const size_t half = rotary_dim / 2;
  if (interleaved) {
    for (size_t i = 0; i < half; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * c[i] - b * s[i];
      y[2 * i + 1] = b * c[i] + a * s[i];
    }
  } else {
    for (size_t i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      y[i] = a * c[i] - b * s[i];
      y[i + half] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace

extern const RotaryKernels kRotary_scalar;
const RotaryKernels kRotary_scalar = {apply_scalar};

}  // namespace attnkit
