// attnkit kv_quant kernels, scalar: the bit-exact definition of quantize-on-write (spec §3) and of the
// fp16/bf16 storage conversion (common/half.h). SIMD files must reproduce these integers exactly.
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kv_quant/kv_quant.h"
#include "kv_quant/quant_scalar.h"

namespace attnkit {
namespace {

void quantize_s8_scalar(const float* x, const float* inv_scale, size_t n, int8_t* out) {
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<int8_t>(kv_quantize_one(x[i], inv_scale[i], -128.0f, 127.0f));
}

void quantize_s4_scalar(const float* x, const float* inv_scale, size_t n, uint8_t* out) {
  for (size_t i = 0; i + 1 < n; i += 2) {
    const int32_t lo = kv_quantize_one(x[i], inv_scale[i], -8.0f, 7.0f) + 8;
    const int32_t hi = kv_quantize_one(x[i + 1], inv_scale[i + 1], -8.0f, 7.0f) + 8;
    out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_s8_scalar(const int8_t* q, const float* scale, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale[i];
}

void dequantize_s4_scalar(const uint8_t* q, const float* scale, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const int32_t nib = (i & 1) ? (q[i / 2] >> 4) : (q[i / 2] & 0xf);
    out[i] = static_cast<float>(nib - 8) * scale[i];
  }
}

}  // namespace

void copy_streaming_memcpy(uint8_t* dst, const uint8_t* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

extern const KvQuantKernels kKvQuant_scalar;
const KvQuantKernels kKvQuant_scalar = {to_f16_rows,       to_bf16_rows,      from_f16_rows,
                                        from_bf16_rows,    quantize_s8_scalar,  quantize_s4_scalar,
                                        dequantize_s8_scalar, dequantize_s4_scalar, copy_streaming_memcpy};

}  // namespace attnkit
