// attnkit: rotary kernel over a vector traits type (x86_vec.h or simd128_vec.h, included first).
// mul, mul, sub/add in the scalar order, so every lane equals the scalar kernel's bits; tails run the scalar formula.
#pragma once
#include "rotary/rotary.h"

namespace attnkit {
namespace {

template <class T>
void rotary_simd(const float* x, const float* c, const float* s, size_t rotary_dim, bool interleaved,
                float* y) {
  const size_t half = rotary_dim / 2;
  size_t i = 0;
  if (!interleaved) {
    for (; i + T::W <= half; i += T::W) {
      const auto a = T::load(x + i), b = T::load(x + i + half);
      const auto cv = T::load(c + i), sv = T::load(s + i);
      const auto ya = T::sub(T::mul(a, cv), T::mul(b, sv));
      const auto yb = T::add(T::mul(b, cv), T::mul(a, sv));
      T::store(y + i, ya);
      T::store(y + i + half, yb);
    }
    for (; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      y[i] = a * c[i] - b * s[i];
      y[i + half] = b * c[i] + a * s[i];
    }
    return;
  }
  // Interleaved, T::W/2 pairs per step: y_even = a*c - b*s and y_odd = b*c + a*s as two products
  // and one sub/add per lane, with the partner element fetched by an in-lane swap.
  for (; i + T::W / 2 <= half; i += T::W / 2) {
    float cd[T::W], sd[T::W];
    for (size_t k = 0; k < T::W / 2; ++k) {
      cd[2 * k] = cd[2 * k + 1] = c[i + k];
      sd[2 * k] = sd[2 * k + 1] = s[i + k];
    }
    const auto v = T::load(x + 2 * i);
    float sw[T::W];
    T::store(sw, v);
    for (size_t k = 0; k < T::W; k += 2) {
      const float t = sw[k];
      sw[k] = sw[k + 1];
      sw[k + 1] = t;
    }
    const auto prod_c = T::mul(v, T::load(cd));
    const auto prod_s = T::mul(T::load(sw), T::load(sd));
    const auto ysub = T::sub(prod_c, prod_s), yadd = T::add(prod_c, prod_s);
    float a[T::W], b[T::W];
    T::store(a, ysub);
    T::store(b, yadd);
    for (size_t k = 0; k < T::W; k += 2) {
      y[2 * i + k] = a[k];
      y[2 * i + k + 1] = b[k + 1];
    }
  }
  for (; i < half; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    y[2 * i] = a * c[i] - b * s[i];
    y[2 * i + 1] = b * c[i] + a * s[i];
  }
}

}  // namespace
}  // namespace attnkit
