// attnkit kernel family softmax: the row operations of the (online) softmax.
// exp is a shared polynomial (exp_poly.h) with the same bits on every ISA, so native and wasm results agree.
#pragma once
#include <cstddef>

namespace attnkit {

struct SoftmaxKernels {
  // max over x[0, n); n >= 1.
  float (*reduce_max)(const float* x, size_t n);
  // x[i] = exp(x[i] - max) for i < n; returns the fp32 sum of the new values (n may be 0).
  // max >= every x[i] (the row's max, or more with a head sink); a NaN x[i] gives NaN.
  float (*exp_sum)(float* x, size_t n, float max);
  // x[i] *= s.
  void (*scale)(float* x, size_t n, float s);
  // x[i] += y[i]: adds a block's partial sums into a running output row.
  void (*add)(float* x, const float* y, size_t n);
  // x[i] = cap * tanh(x[i] / cap), cap > 0.
  void (*softcap)(float* x, size_t n, float cap);
};

}  // namespace attnkit
