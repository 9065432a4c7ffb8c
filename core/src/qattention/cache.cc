// attnkit: QAttentionKvCache (attnkit/qattention_cache.h), a thin owner of one past buffer of the model's
// context: every step is q_attention_in_place over it with the held length, so the op's checks, numbers and
// messages are the stateless op's; this file adds only the cache's own (sizes, capacity, the inputs it owns).
#include "attnkit/qattention_cache.h"

#include <new>
#include <string>

#include "common/head_rows.h"
#include "common/tensor_storage.h"

namespace attnkit {
namespace {

const char* kWho = "qattention cache: ";
constexpr int64_t kFloatBytes = sizeof(float);

}  // namespace

Status QAttentionKvCache::init(const QAttentionCacheConfig& config) {
  if (config.batch <= 0 || config.heads <= 0 || config.head_size <= 0 || config.capacity <= 0)
    return Status::Error(std::string(kWho) + "batch, heads, head_size and capacity must be positive");
  const Shape shape{2, config.batch, config.heads, config.capacity, config.head_size};
  const int64_t elements = shape_elements(shape);
  constexpr int64_t kMaxBytes = int64_t{1} << 34;
  if (elements < 0 || elements > kMaxBytes / static_cast<int64_t>(sizeof(float)))
    return Status::Error(std::string(kWho) + shape_to_string(shape) + " is larger than 16 GiB");
  Tensor buffer;  // a refused init leaves the cache as it was
  try {
    buffer.reset_uninitialized(DType::kFloat32, shape);  // not zeroed: as GqaKvCache's (kv_cache.cc)
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(std::string(kWho) + "out of memory allocating " + shape_to_string(shape));
  }
  buffer_ = std::move(buffer);
  config_ = config;
  length_ = 0;
  return Status::Ok();
}

Status QAttentionKvCache::step(const QAttentionInputs& inputs, const QAttentionAttributes& attrs, Tensor* output,
                               const RunOptions& options) {
  if (buffer_.empty()) return Status::Error(std::string(kWho) + "init() was not called");
  if (!output) return Status::Error(std::string(kWho) + "step() needs an output tensor");
  if (inputs.past) return Status::Error("past: supplied by the cache (pass only the new tokens)");
  if (inputs.input && inputs.input->shape.size() == 3) {
    const int64_t B = inputs.input->shape[0], S = inputs.input->shape[1];
    if (B != config_.batch)
      return Status::Error("input: dim 0 = " + std::to_string(B) + ", the cache holds batch " +
                           std::to_string(config_.batch));
    if (S > config_.capacity - length_)
      return Status::Error(std::string(kWho) + std::to_string(S) + " new tokens after " + std::to_string(length_) +
                           " exceed its capacity " + std::to_string(config_.capacity));
  }
  if (attrs.num_heads != config_.heads)
    return Status::Error("num_heads: " + std::to_string(attrs.num_heads) + ", the cache holds " +
                         std::to_string(config_.heads) + " heads");
  const int64_t columns = 3 * config_.heads * config_.head_size;
  if (inputs.weight && inputs.weight->shape.size() == 2 && inputs.weight->shape[1] != columns)
    return Status::Error("weight: dim 1 = " + std::to_string(inputs.weight->shape[1]) + ", the cache's heads need " +
                         std::to_string(columns) + " (3 x heads x head_size)");
  QAttentionInputs in = inputs;
  const TensorView past = buffer_.view();
  in.past = &past;
  QAttentionOutputs out;
  ATTNKIT_RETURN_IF_ERROR(q_attention_in_place(in, attrs, &out, options, length_));
  length_ += inputs.input->shape[1];
  *output = std::move(out.output);
  return Status::Ok();
}

Status QAttentionKvCache::truncate(int64_t length) {
  if (length < 0 || length > length_)
    return Status::Error(std::string(kWho) + "truncate length " + std::to_string(length) + " must be in [0, " +
                         std::to_string(length_) + "]");
  length_ = length;
  return Status::Ok();
}

Status QAttentionKvCache::load(const TensorView& past) {
  if (buffer_.empty()) return Status::Error(std::string(kWho) + "init() was not called");
  const Shape& s = past.shape;
  if (past.dtype != DType::kFloat32 || s.size() != 5 || s[0] != 2 || s[1] != config_.batch ||
      s[2] != config_.heads || s[4] != config_.head_size || s[3] < 0)
    return Status::Error("past: must be float32 (2, batch=" + std::to_string(config_.batch) + ", heads=" +
                         std::to_string(config_.heads) + ", rows, head_size=" + std::to_string(config_.head_size) +
                         "), got " + dtype_name(past.dtype) + " " + shape_to_string(s));
  ATTNKIT_RETURN_IF_ERROR(check_tensor_storage(&past, "past"));
  if (s[3] > config_.capacity)
    return Status::Error("past: " + std::to_string(s[3]) + " rows exceed the cache's capacity " +
                         std::to_string(config_.capacity));
  copy_head_rows(past.data, s[3], buffer_.as<float>(), config_.capacity, 2 * config_.batch * config_.heads, s[3],
                 config_.head_size * kFloatBytes);
  length_ = s[3];
  return Status::Ok();
}

Status QAttentionKvCache::read(Tensor* present) const {
  if (buffer_.empty()) return Status::Error(std::string(kWho) + "init() was not called");
  if (!present) return Status::Error(std::string(kWho) + "read() needs an output tensor");
  Tensor out;
  try {
    out.reset_uninitialized(DType::kFloat32, {2, config_.batch, config_.heads, length_, config_.head_size});
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(std::string(kWho) + "out of memory reading " + std::to_string(length_) + " tokens");
  }
  copy_head_rows(buffer_.as<float>(), config_.capacity, out.as<float>(), length_, 2 * config_.batch * config_.heads,
                 length_, config_.head_size * kFloatBytes);
  *present = std::move(out);
  return Status::Ok();
}

}  // namespace attnkit
