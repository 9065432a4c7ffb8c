// attnkit: kv_quant kernels for NEON / wasm128 over Vec128. quantize_s8/s4 (multiply, NaN -> upper bound, clamp in
// float, round half to even, exact integer conversion) and the fp16/bf16 row conversions (common/half.h's rules in
// integer lanes) are vectorized; tails and dequantize_s4 run the shared scalar rules (common/half.h, quant_scalar.h).
#pragma once
#include "common/half.h"
#include "kv_quant/kv_quant.h"
#include "kv_quant/quant_scalar.h"

namespace attnkit {
namespace {

// quant_scalar.h's kv_quantize_one for 4 lanes, as floats holding the integers.
template <class T>
typename T::V quantize4(const float* x, const float* inv, float lo, float hi) {
  auto v = T::mul(T::load(x), T::load(inv));
  v = T::select(T::is_nan(v), T::set1(hi), v);
  return T::round_even(T::min(T::max(v, T::set1(lo)), T::set1(hi)));
}

// 16 at a time, narrowed in registers: through a float array and scalar stores it took 1.5% of a wasm int8 prompt
// (S=T=512, N=16, Nk=8, H=128), the new K and V rows' quantization.
template <class T>
void quantize_s8_128(const float* x, const float* inv, size_t n, int8_t* out) {
  const auto q = [x, inv](size_t i) { return quantize4<T>(x + i, inv + i, -128.0f, 127.0f); };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) T::store16_s8(out + i, q(i), q(i + 4), q(i + 8), q(i + 12));
  for (; i + 4 <= n; i += 4) {
    alignas(16) float r[4];
    T::store(r, q(i));
    for (int k = 0; k < 4; ++k) out[i + k] = static_cast<int8_t>(static_cast<int32_t>(r[k]));
  }
  for (; i < n; ++i) out[i] = static_cast<int8_t>(kv_quantize_one(x[i], inv[i], -128.0f, 127.0f));
}

template <class T>
void quantize_s4_128(const float* x, const float* inv, size_t n, uint8_t* out) {
  const auto q = [x, inv](size_t i) { return quantize4<T>(x + i, inv + i, -8.0f, 7.0f); };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) T::store16_s4(out + i / 2, q(i), q(i + 4), q(i + 8), q(i + 12));
  for (; i + 1 < n; i += 2) {
    const int32_t lo = kv_quantize_one(x[i], inv[i], -8.0f, 7.0f) + 8;
    const int32_t hi = kv_quantize_one(x[i + 1], inv[i + 1], -8.0f, 7.0f) + 8;
    out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Storage conversions of whole query, key, value and output rows: scalar, they took a quarter of a wasm fp16
// prefill (S=T=512, N=16, Nk=8, H=128: 50 against 38 ms for fp32).
template <class T, class E>
void from_16bit_128(const uint16_t* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    typename T::V lo, hi;
    if constexpr (std::is_same_v<E, F16>) T::f16_row8(reinterpret_cast<const uint8_t*>(x), i, lo, hi);
    else T::load8(E{}, reinterpret_cast<const uint8_t*>(x), i, lo, hi);
    T::store(out + i, lo);
    T::store(out + i + 4, hi);
  }
  if constexpr (std::is_same_v<E, F16>) from_f16_rows(x + i, n - i, out + i);
  else from_bf16_rows(x + i, n - i, out + i);
}

template <class T>
void to_f16_128(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) T::store8_f16(out + i, T::load(x + i), T::load(x + i + 4));
  to_f16_rows(x + i, n - i, out + i);
}

template <class T>
void to_bf16_128(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) T::store8_bf16(out + i, T::load(x + i), T::load(x + i + 4));
  to_bf16_rows(x + i, n - i, out + i);
}

template <class T>
void dequantize_s8_128(const int8_t* q, const float* scale, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    typename T::V lo, hi;
    T::load8(S8{}, reinterpret_cast<const uint8_t*>(q), i, lo, hi);
    T::store(out + i, T::mul(lo, T::load(scale + i)));
    T::store(out + i + 4, T::mul(hi, T::load(scale + i + 4)));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale[i];
}

void dequantize_s4_128(const uint8_t* q, const float* scale, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const int32_t nib = (i & 1) ? (q[i / 2] >> 4) : (q[i / 2] & 0xf);
    out[i] = static_cast<float>(nib - 8) * scale[i];
  }
}

}  // namespace
}  // namespace attnkit
