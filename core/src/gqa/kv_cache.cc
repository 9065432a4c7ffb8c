// attnkit: GqaKvCache — the stateful decode form over group_query_attention_in_place.
// The cache supplies past/seqlens/total itself, so a caller only passes the new tokens.
#include "attnkit/kv_cache.h"

#include <new>
#include <string>

namespace attnkit {

Status GqaKvCache::init(const KvCacheConfig& config) {
  const DType d = config.cache_dtype;
  if (config.batch <= 0 || config.kv_heads <= 0 || config.head_size <= 0 || config.capacity <= 0)
    return Status::Error("kv cache: batch, kv_heads, head_size and capacity must be positive");
  if (d != DType::kFloat32 && d != DType::kFloat16 && d != DType::kBFloat16 && d != DType::kInt8 &&
      d != DType::kUInt8)
    return Status::Error(std::string("kv cache: cache_dtype ") + dtype_name(d) +
                         " is not float32, float16, bfloat16, int8 or uint8 (int4)");
  const int64_t row = d == DType::kUInt8 ? (config.head_size + 1) / 2 : config.head_size;
  const Shape shape{config.batch, config.kv_heads, config.capacity, row};
  const int64_t elements = shape_elements(shape);
  constexpr int64_t kMaxBytes = int64_t{1} << 34;
  if (elements < 0 || elements > kMaxBytes / static_cast<int64_t>(dtype_size(d)))
    return Status::Error("kv cache: " + shape_to_string(shape) + " is larger than 16 GiB");
  try {
    key_.reset(d, shape);
    value_.reset(d, shape);
  } catch (const std::bad_alloc&) {
    return Status::Error("kv cache: out of memory allocating " + shape_to_string(shape));
  }
  config_ = config;
  length_ = 0;
  return Status::Ok();
}

Status GqaKvCache::step(const GqaInputs& inputs, const GqaAttributes& attrs, Tensor* output,
                        const RunOptions& options) {
  if (key_.empty()) return Status::Error("kv cache: init() was not called");
  if (inputs.past_key || inputs.past_value || inputs.seqlens_k || inputs.total_sequence_length)
    return Status::Error("kv cache: past_key, past_value, seqlens_k and total_sequence_length come from the cache");
  if (!inputs.query || inputs.query->shape.size() != 3)
    return Status::Error("query: must be rank 3 (batch, sequence, hidden)");
  const int64_t new_tokens = inputs.query->shape[1];
  const int64_t total = length_ + new_tokens;
  if (total > config_.capacity)
    return Status::Error("kv cache: " + std::to_string(total) + " tokens exceed the capacity " +
                         std::to_string(config_.capacity));
  std::vector<int32_t> seqlens(static_cast<size_t>(config_.batch), static_cast<int32_t>(total - 1));
  const int32_t total32 = static_cast<int32_t>(total);
  const TensorView seqlens_view{DType::kInt32, {config_.batch}, seqlens.data()};
  const TensorView total_view{DType::kInt32, {1}, &total32};
  const TensorView past_key = key_.view(), past_value = value_.view();
  GqaInputs full = inputs;
  full.past_key = &past_key;
  full.past_value = &past_value;
  full.seqlens_k = &seqlens_view;
  full.total_sequence_length = &total_view;
  GqaOutputs outputs;
  ATTNKIT_RETURN_IF_ERROR(group_query_attention_in_place(full, attrs, GqaRequest(), &outputs, options));
  *output = std::move(outputs.output);
  length_ = total;
  return Status::Ok();
}

}  // namespace attnkit
