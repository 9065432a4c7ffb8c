// attnkit softmax kernels, scalar: the portable fallback and the definition the SIMD files mirror.
// exp and tanh come from exp_poly.h so every ISA produces the same element values.
#include "softmax/exp_poly.h"
#include "softmax/softmax.h"

namespace attnkit {
namespace {

float reduce_max_scalar(const float* x, size_t n) {
  float m = x[0];
  for (size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float exp_sum_scalar(float* x, size_t n, float max) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = exp_poly::exp_at_most_zero(x[i] - max);
    sum += x[i];
  }
  return sum;
}

void scale_scalar(float* x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) x[i] *= s;
}

void add_scalar(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

void softcap_scalar(float* x, size_t n, float cap) {
  const float inv_cap = 1.0f / cap;
  for (size_t i = 0; i < n; ++i) x[i] = cap * exp_poly::tanh(x[i] * inv_cap);
}

}  // namespace

extern const SoftmaxKernels kSoftmax_scalar;
const SoftmaxKernels kSoftmax_scalar = {reduce_max_scalar, exp_sum_scalar, scale_scalar, add_scalar,
                                        softcap_scalar};

}  // namespace attnkit
