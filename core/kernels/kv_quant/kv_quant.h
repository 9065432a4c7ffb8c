// attnkit kernel family kv_quant: writing new K/V rows into the cache and reading them back.
// Quantization follows ORT's MLAS contract exactly (spec §3): q = clamp(rint(x * inv_scale)),
// round half to even, int4 as (q + 8) nibbles with the even channel in the low nibble.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnkit {

struct KvQuantKernels {
  // fp32 -> fp16 / bf16, round to nearest even (NaN stays NaN). n is any size.
  void (*to_f16)(const float* x, size_t n, uint16_t* out);
  void (*to_bf16)(const float* x, size_t n, uint16_t* out);
  void (*from_f16)(const uint16_t* x, size_t n, float* out);
  void (*from_bf16)(const uint16_t* x, size_t n, float* out);
  // q[d] = clamp(rint(x[d] * inv_scale[d]), -128, 127); inv_scale has n entries (a per-tensor
  // scale is passed repeated). The clamp happens in float before the integer conversion, so huge
  // values saturate instead of wrapping; NaN quantizes to hi (ORT's std::max(lo, std::min(hi, q))).
  // n is any size.
  void (*quantize_s8)(const float* x, const float* inv_scale, size_t n, int8_t* out);
  // Same with clamp to [-8, 7]; out gets n/2 bytes, byte k = (q[2k]+8) | (q[2k+1]+8) << 4; n is even.
  void (*quantize_s4)(const float* x, const float* inv_scale, size_t n, uint8_t* out);
  // x[d] = q[d] * scale[d] (scale has n entries).
  void (*dequantize_s8)(const int8_t* q, const float* scale, size_t n, float* out);
  void (*dequantize_s4)(const uint8_t* q, const float* scale, size_t n, float* out);
  // dst[0, bytes) = src[0, bytes) for cache rows no one reads back soon: where the ISA has non-temporal stores,
  // dst's lines go to memory without first being read into the cache (2 bytes of memory traffic per byte copied,
  // not 3), and the stores are fenced, so once it returns they are ordered like ordinary ones. Else a memcpy.
  void (*copy_streaming)(uint8_t* dst, const uint8_t* src, size_t bytes);
};

// The copy_streaming of ISAs without non-temporal stores (scalar, NEON through SIMDe, wasm).
void copy_streaming_memcpy(uint8_t* dst, const uint8_t* src, size_t bytes);

}  // namespace attnkit
