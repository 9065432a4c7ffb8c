// attnkit: softmax row kernels over a vector traits type (Vec256/Vec512 in x86_vec.h, Vec128 in
// simd128_vec.h); the including file includes its traits first. exp and tanh repeat
// exp_poly.h step by step (no FMA, n rounded to nearest even), so the elements equal the scalar bits;
// tails use the scalar functions themselves.
#pragma once
#include "softmax/exp_poly.h"
#include "softmax/softmax.h"

namespace attnkit {
namespace {

template <class T>
inline typename T::V exp_vec(typename T::V x) {
  using V = typename T::V;
  namespace ep = exp_poly;
  const V xc = T::min(x, T::set1(ep::kHigh));
  const V n = T::round_even(T::mul(xc, T::set1(ep::kLog2e)));
  V r = T::sub(xc, T::mul(n, T::set1(ep::kLn2Hi)));
  r = T::sub(r, T::mul(n, T::set1(ep::kLn2Lo)));
  const V r2 = T::mul(r, r);
  V p = T::set1(ep::kP0);
  p = T::add(T::mul(p, r), T::set1(ep::kP1));
  p = T::add(T::mul(p, r), T::set1(ep::kP2));
  p = T::add(T::mul(p, r), T::set1(ep::kP3));
  p = T::add(T::mul(p, r), T::set1(ep::kP4));
  p = T::add(T::mul(p, r), T::set1(ep::kP5));
  p = T::add(T::mul(p, r2), r);
  p = T::add(p, T::set1(1.0f));
  // Out of range: 0 below kLow (and for -inf), NaN stays NaN.
  const V y = T::zero_unless(T::ge(x, T::set1(ep::kLow)), T::mul(p, T::pow2_of_int_valued(n)));
  return T::select(T::is_nan(x), x, y);
}

template <class T>
inline typename T::V tanh_vec(typename T::V x) {
  using V = typename T::V;
  namespace ep = exp_poly;
  const V a = T::abs(x);
  const V z = T::mul(a, a);
  V p = T::set1(ep::kT0);
  p = T::add(T::mul(p, z), T::set1(ep::kT1));
  p = T::add(T::mul(p, z), T::set1(ep::kT2));
  p = T::add(T::mul(p, z), T::set1(ep::kT3));
  p = T::add(T::mul(p, z), T::set1(ep::kT4));
  const V small = T::add(T::mul(T::mul(p, z), a), a);
  const V e = exp_vec<T>(T::add(a, a));
  const V big = T::sub(T::set1(1.0f), T::div(T::set1(2.0f), T::add(e, T::set1(1.0f))));
  return T::copy_sign_of(T::select(T::lt(a, T::set1(ep::kTanhSmall)), small, big), x);
}

template <class T>
float reduce_max_simd(const float* x, size_t n) {
  size_t i = 0;
  float m = x[0];
  if (n >= T::W) {
    typename T::V acc = T::load(x);
    for (i = T::W; i + T::W <= n; i += T::W) acc = T::max(acc, T::load(x + i));
    m = T::hmax(acc);
  }
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

template <class T>
float exp_sum_simd(float* x, size_t n, float max) {
  using V = typename T::V;
  const V mv = T::set1(max);
  V s0 = T::zero(), s1 = T::zero();
  size_t i = 0;
  for (; i + 2 * T::W <= n; i += 2 * T::W) {
    const V e0 = exp_vec<T>(T::sub(T::load(x + i), mv));
    const V e1 = exp_vec<T>(T::sub(T::load(x + i + T::W), mv));
    T::store(x + i, e0);
    T::store(x + i + T::W, e1);
    s0 = T::add(s0, e0);
    s1 = T::add(s1, e1);
  }
  for (; i + T::W <= n; i += T::W) {
    const V e0 = exp_vec<T>(T::sub(T::load(x + i), mv));
    T::store(x + i, e0);
    s0 = T::add(s0, e0);
  }
  float sum = T::hsum(T::add(s0, s1));
  for (; i < n; ++i) {
    x[i] = exp_poly::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

template <class T>
void scale_simd(float* x, size_t n, float s) {
  size_t i = 0;
  for (; i + T::W <= n; i += T::W) T::store(x + i, T::mul(T::load(x + i), T::set1(s)));
  for (; i < n; ++i) x[i] *= s;
}

template <class T>
void softcap_simd(float* x, size_t n, float cap) {
  const float inv_cap = 1.0f / cap;
  size_t i = 0;
  for (; i + T::W <= n; i += T::W)
    T::store(x + i, T::mul(T::set1(cap), tanh_vec<T>(T::mul(T::load(x + i), T::set1(inv_cap)))));
  for (; i < n; ++i) x[i] = cap * exp_poly::tanh(x[i] * inv_cap);
}

}  // namespace
}  // namespace attnkit
