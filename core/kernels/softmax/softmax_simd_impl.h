// attnkit: softmax row kernels over a vector traits type (Vec256/Vec512 in x86_vec.h, Vec128 in
// simd128_vec.h); the including file includes its traits first. exp, softmax's exp and tanh repeat
// exp_poly.h step by step (no FMA, n rounded to nearest even), so the elements equal the scalar bits;
// tails use the scalar functions themselves.
#pragma once
#include <type_traits>
#include <utility>

#include "softmax/exp_poly.h"
#include "softmax/softmax.h"

namespace attnkit {
namespace {

// Calls f(0), ..., f(N-1) in order, unrolled.
template <size_t... I, class F>
inline void for_each_index(std::index_sequence<I...>, F&& f) {
  (f(I), ...);
}

// exp of N vectors in lockstep: each step is issued for all N before the next, so N independent
// chains of ~25 dependent ops overlap (one chain at a time leaves the FP pipes waiting on latency).
// The steps are exp_poly::exp's, in its order, per vector.
template <class T, size_t N>
inline void exp_vecs(typename T::V (&x)[N]) {
  using V = typename T::V;
  namespace ep = exp_poly;
  const auto each = [](auto&& f) { for_each_index(std::make_index_sequence<N>{}, f); };
  V xc[N], n[N], r[N], r2[N], p[N];
  each([&](size_t i) { xc[i] = T::min(x[i], T::set1(ep::kHigh)); });
  each([&](size_t i) { n[i] = T::round_even(T::mul(xc[i], T::set1(ep::kLog2e))); });
  each([&](size_t i) { r[i] = T::sub(xc[i], T::mul(n[i], T::set1(ep::kLn2Hi))); });
  each([&](size_t i) { r[i] = T::sub(r[i], T::mul(n[i], T::set1(ep::kLn2Lo))); });
  each([&](size_t i) { r2[i] = T::mul(r[i], r[i]); });
  each([&](size_t i) { p[i] = T::add(T::mul(T::set1(ep::kP0), r[i]), T::set1(ep::kP1)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], r[i]), T::set1(ep::kP2)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], r[i]), T::set1(ep::kP3)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], r[i]), T::set1(ep::kP4)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], r[i]), T::set1(ep::kP5)); });
  each([&](size_t i) { p[i] = T::add(T::add(T::mul(p[i], r2[i]), r[i]), T::set1(1.0f)); });
  // Out of range: 0 below kLow (and for -inf), NaN stays NaN.
  each([&](size_t i) {
    const V y = T::mul(p[i], T::pow2_of_int_valued(n[i]));
    x[i] = T::select(T::is_nan(x[i]), x[i], T::zero_unless(T::ge(x[i], T::set1(ep::kLow)), y));
  });
}

// exp_poly::exp_at_most_zero of N vectors in lockstep (as exp_vecs), its steps in its order. Every input is <= 0
// or NaN, so NaN rides through the arithmetic and one unordered compare zeroes what lies below kLow (and -inf).
template <class T, size_t N>
inline void exp_at_most_zero_vecs(typename T::V (&x)[N]) {
  using V = typename T::V;
  namespace ep = exp_poly;
  const auto each = [](auto&& f) { for_each_index(std::make_index_sequence<N>{}, f); };
  V n[N], f[N], p[N];
  each([&](size_t i) { f[i] = T::mul(x[i], T::set1(ep::kLog2e)); });
  each([&](size_t i) { n[i] = T::round_even(f[i]); });
  each([&](size_t i) { f[i] = T::sub(f[i], n[i]); });
  each([&](size_t i) { p[i] = T::add(T::mul(T::set1(ep::kE0), f[i]), T::set1(ep::kE1)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], f[i]), T::set1(ep::kE2)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], f[i]), T::set1(ep::kE3)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], f[i]), T::set1(ep::kE4)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], f[i]), T::set1(ep::kE5)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], f[i]), T::set1(1.0f)); });
  each([&](size_t i) {
    x[i] = T::zero_unless(T::not_lt(x[i], T::set1(ep::kLow)), T::scale_by_pow2(p[i], n[i]));  // NaN: stays NaN
  });
}

// tanh of N vectors in lockstep, as exp_vecs and for the same reason: one vector alone is a chain of ~45 dependent
// ops. Each lane takes exp_poly::tanh's steps in its order, so the bits are the same; the exp branch (|x| >= 0.625,
// or NaN) is skipped when no lane takes it, as for most attention scores under a softcap of 30 or 50.
template <class T, size_t N>
inline void tanh_vecs(typename T::V (&x)[N]) {
  using V = typename T::V;
  namespace ep = exp_poly;
  const auto each = [](auto&& f) { for_each_index(std::make_index_sequence<N>{}, f); };
  V a[N], z[N], p[N], small[N], e[N];
  bool any_big = false;
  each([&](size_t i) { a[i] = T::abs(x[i]); });
  each([&](size_t i) { any_big |= T::any(T::not_lt(a[i], T::set1(ep::kTanhSmall))); });
  each([&](size_t i) { z[i] = T::mul(a[i], a[i]); });
  each([&](size_t i) { p[i] = T::add(T::mul(T::set1(ep::kT0), z[i]), T::set1(ep::kT1)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], z[i]), T::set1(ep::kT2)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], z[i]), T::set1(ep::kT3)); });
  each([&](size_t i) { p[i] = T::add(T::mul(p[i], z[i]), T::set1(ep::kT4)); });
  each([&](size_t i) { small[i] = T::add(T::mul(T::mul(p[i], z[i]), a[i]), a[i]); });
  if (!any_big) {
    each([&](size_t i) { x[i] = T::copy_sign_of(small[i], x[i]); });
    return;
  }
  each([&](size_t i) { e[i] = T::add(a[i], a[i]); });
  exp_vecs<T>(e);
  each([&](size_t i) {
    const V big = T::sub(T::set1(1.0f), T::div(T::set1(2.0f), T::add(e[i], T::set1(1.0f))));
    x[i] = T::copy_sign_of(T::select(T::lt(a[i], T::set1(ep::kTanhSmall)), small[i], big), x[i]);
  });
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
  constexpr size_t kGroup = 4;  // vectors in flight (see exp_vecs)
  const V mv = T::set1(max);
  V s[kGroup] = {T::zero(), T::zero(), T::zero(), T::zero()};
  size_t i = 0;
  for (; i + kGroup * T::W <= n; i += kGroup * T::W) {
    V e[kGroup];
    for (size_t g = 0; g < kGroup; ++g) e[g] = T::sub(T::load(x + i + g * T::W), mv);
    exp_at_most_zero_vecs<T>(e);
    for (size_t g = 0; g < kGroup; ++g) {
      T::store(x + i + g * T::W, e[g]);
      s[g] = T::add(s[g], e[g]);
    }
  }
  for (; i + T::W <= n; i += T::W) {
    V e[1] = {T::sub(T::load(x + i), mv)};
    exp_at_most_zero_vecs<T>(e);
    T::store(x + i, e[0]);
    s[0] = T::add(s[0], e[0]);
  }
  float sum = T::hsum(T::add(T::add(s[0], s[1]), T::add(s[2], s[3])));
  for (; i < n; ++i) {
    x[i] = exp_poly::exp_at_most_zero(x[i] - max);
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
void add_simd(float* x, const float* y, size_t n) {
  size_t i = 0;
  for (; i + T::W <= n; i += T::W) T::store(x + i, T::add(T::load(x + i), T::load(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

// Four vectors at a time (tanh_vecs): a wasm prefill S=T=512 (one thread) spent about 6 ms of 39 here, now 2.
template <class T>
void softcap_simd(float* x, size_t n, float cap) {
  using V = typename T::V;
  const V inv_cap = T::set1(1.0f / cap), capv = T::set1(cap);
  size_t i = 0;
  const auto run = [&](auto group) {
    constexpr size_t kGroup = decltype(group)::value;
    for (; i + kGroup * T::W <= n; i += kGroup * T::W) {
      V t[kGroup];
      for (size_t g = 0; g < kGroup; ++g) t[g] = T::mul(T::load(x + i + g * T::W), inv_cap);
      tanh_vecs<T>(t);
      for (size_t g = 0; g < kGroup; ++g) T::store(x + i + g * T::W, T::mul(capv, t[g]));
    }
  };
  run(std::integral_constant<size_t, 4>());
  run(std::integral_constant<size_t, 1>());
  for (; i < n; ++i) x[i] = cap * exp_poly::tanh(x[i] * (1.0f / cap));
}

}  // namespace
}  // namespace attnkit
