// attnkit reference: GroupQueryAttention in plain double precision, the oracle for every GQA test.
// Written straight from spec/ort-semantics.md §6: slow, unfused, no tiling. Only the values ORT stores
// (the rotated query in T, the cache in its dtype) are rounded; everything else is computed in double.
#pragma once
#include <cstdint>
#include <vector>

#include "attnkit/gqa.h"
#include "gqa/problem.h"

namespace attnkit {
namespace reference {

struct GqaReferenceResult {
  std::vector<double> output;     // (B, S, N*H)
  Shape output_shape;
  std::vector<double> output_qk;  // (B, N, S, T) when requested; masked entries and columns >= T_b are 0
  Shape output_qk_shape;
  Tensor present_key, present_value;  // always built, in the cache dtype
};

Status group_query_attention(const GqaInputs& inputs, const GqaAttributes& attrs,
                             const GqaRequest& request, GqaReferenceResult* result);

// Element `index` of a float32/float16/bfloat16 buffer, as float (exact).
float load_float(const void* data, DType dtype, int64_t index);

// MLAS quantization of one value (spec §3): inv = 1/scale in float (scale 0 -> 1), the product
// x * inv in float, rounded half to even and clamped to [-128, 127] (bits 8) or [-8, 7] (bits 4).
// NaN quantizes to the upper bound (127 or 7), as ORT's std::max(lo, std::min(hi, q)) does.
int quantize_value(float x, float scale, int bits);
// Quantizes a row of head_size values; scales[d] is the scale of channel d. bits 8 writes head_size
// int8 bytes; bits 4 writes ceil(head_size/2) bytes, even channel in the low nibble, values + 8.
void quantize_row(const float* x, const float* scales, int64_t head_size, int bits, uint8_t* out);
// Element d of a cache row as a double: float caches as stored, int8 q * scale, int4 (nibble - 8) * scale.
double dequantize_value(const uint8_t* row, DType cache_dtype, int bits, int64_t d, float scale);

}  // namespace reference
}  // namespace attnkit
