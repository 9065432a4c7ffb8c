// attnkit: kv_quant kernels for x86 (AVX2 / AVX512 via an Isa struct with the few ops that differ).
// Quantize: multiply, clamp in float (NaN -> hi), cvtps_epi32 (MXCSR nearest-even) -- the scalar
// contract's integers exactly. fp16 via F16C (round to nearest even), bf16 with half.h's integer rule.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "kv_quant/kv_quant.h"
#include "kv_quant/quant_scalar.h"

namespace attnkit {
namespace {

// Values are quantized 8 at a time (one ymm) on both ISAs: the kernel is store-bound anyway.
inline __m256i quantize8(const float* x, const float* inv, float lo, float hi) {
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(inv));
  // minps returns its second operand where the first is NaN: NaN -> hi, as ORT's std::min(hi, q).
  v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(hi)), _mm256_set1_ps(lo));
  return _mm256_cvtps_epi32(v);
}

void quantize_s8_x86(const float* x, const float* inv, size_t n, int8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = quantize8(x + i, inv + i, -128.0f, 127.0f);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(w, w));
  }
  for (; i < n; ++i) out[i] = static_cast<int8_t>(kv_quantize_one(x[i], inv[i], -128.0f, 127.0f));
}

void quantize_s4_x86(const float* x, const float* inv, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i t = _mm256_add_epi32(quantize8(x + i, inv + i, -8.0f, 7.0f), _mm256_set1_epi32(8));
    // Each 64-bit lane holds (even, odd): shifting the odd value down next to the even one's nibble.
    const __m256i pair = _mm256_or_si256(t, _mm256_srli_epi64(t, 28));
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), pair);
    for (int k = 0; k < 4; ++k) out[i / 2 + k] = static_cast<uint8_t>(lanes[2 * k]);
  }
  for (; i + 1 < n; i += 2) {
    const int32_t lo = kv_quantize_one(x[i], inv[i], -8.0f, 7.0f) + 8;
    const int32_t hi = kv_quantize_one(x[i + 1], inv[i + 1], -8.0f, 7.0f) + 8;
    out[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_s8_x86(const int8_t* q, const float* scale, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_loadu_ps(scale + i)));
  }
  for (; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale[i];
}

void dequantize_s4_x86(const uint8_t* q, const float* scale, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int32_t four;
    std::memcpy(&four, q + i / 2, 4);
    const __m128i b = _mm_cvtsi32_si128(four);
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i il = _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
    const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(il), _mm256_set1_epi32(8));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(scale + i)));
  }
  for (; i < n; ++i) {
    const int32_t nib = (i & 1) ? (q[i / 2] >> 4) : (q[i / 2] & 0xf);
    out[i] = static_cast<float>(nib - 8) * scale[i];
  }
}

void to_f16_x86(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = float_to_f16(x[i]);
}

void from_f16_x86(const uint16_t* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m256 r = _mm256_cvtph_ps(h);
    // F16C quiets signalling NaNs; half.h keeps the payload bit for bit, so rebuild NaN lanes.
    const __m256i h32 = _mm256_cvtepu16_epi32(h);
    const __m256i nan = _mm256_or_si256(
        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
                        _mm256_set1_epi32(0x7f800000)),
        _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3ff)), 13));
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(r, _mm256_castsi256_ps(nan), _mm256_cmp_ps(r, r, _CMP_UNORD_Q)));
  }
  for (; i < n; ++i) out[i] = f16_to_float(x[i]);
}

void to_bf16_x86(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = float_to_bf16(x[i]);
}

void from_bf16_x86(const uint16_t* x, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(w, 16));
  }
  for (; i < n; ++i) out[i] = bf16_to_float(x[i]);
}

// 32-byte streams on both ISAs: write-combining buffers fill whole lines either way, and the copy is bound by
// memory, not by the stores issued.
void copy_streaming_x86(uint8_t* dst, const uint8_t* src, size_t bytes) {
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  if (head > 0) std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
  }
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  if (i < bytes) std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();  // non-temporal stores are weakly ordered: another thread may read these rows next
}

}  // namespace
}  // namespace attnkit
