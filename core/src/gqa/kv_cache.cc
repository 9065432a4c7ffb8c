// attnkit: GqaKvCache — the stateful decode form over group_query_attention_in_place.
// The cache supplies past/seqlens/total itself, so a caller only passes the new tokens; a window cache also the
// sliding_window_cache attributes, and its rows follow ORT's window layout (problem.h) through load and truncate.
#include "attnkit/kv_cache.h"

#include <algorithm>
#include <limits>
#include <new>
#include <string>

#include "common/head_rows.h"
#include "gqa/problem.h"

namespace attnkit {

namespace {

// (batch, kv_heads, capacity, row) tensors for a cache, or an error naming the shape. Not zeroed: nothing reads a
// row before a step or load writes it, so a cache sized for a model's whole context takes memory as its tokens
// arrive (fresh pages), where zeroing took all of it at init().
Status allocate_cache(const KvCacheConfig& config, Tensor* key, Tensor* value) {
  const DType d = config.cache_dtype;
  const int64_t row = d == DType::kUInt8 ? (config.head_size + 1) / 2 : config.head_size;
  const Shape shape{config.batch, config.kv_heads, config.capacity, row};
  const int64_t elements = shape_elements(shape);
  constexpr int64_t kMaxBytes = int64_t{1} << 34;
  if (elements < 0 || elements > kMaxBytes / static_cast<int64_t>(dtype_size(d)))
    return Status::Error("kv cache: " + shape_to_string(shape) + " is larger than 16 GiB");
  try {
    key->reset_uninitialized(d, shape);
    value->reset_uninitialized(d, shape);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("kv cache: out of memory allocating " + shape_to_string(shape));
  }
  return Status::Ok();
}

// Whether rows [r0, r1) of some (batch, kv head) of an fp16 cache hold an inf or NaN (exponent 31). A running max
// of the magnitudes, which compilers vectorize: a 512-token chunk of N_k = 8, H = 128 is 0.5 M elements.
bool f16_rows_have_specials(const Tensor& cache, int64_t r0, int64_t r1) {
  const int64_t heads = cache.shape[0] * cache.shape[1], capacity = cache.shape[2], row = cache.shape[3];
  const int64_t n = (r1 - r0) * row;
  uint16_t largest = 0;
  for (int64_t h = 0; h < heads; ++h) {
    const uint16_t* x = cache.as<uint16_t>() + (h * capacity + r0) * row;
    for (int64_t i = 0; i < n; ++i) largest = std::max<uint16_t>(largest, x[i] & 0x7fff);
  }
  return largest >= 0x7c00;
}

// The op checks the cache as its past_key and past_value, inputs a caller of step() never passes: a call that does
// not fit the cache (its heads, head size, batch or dtype) is told so with what the cache was created with.
Status as_cache_mismatch(Status st, const KvCacheConfig& c) {
  const std::string& m = st.message();
  for (const char* name : {"past_key: ", "past_value: "}) {
    if (m.rfind(name, 0) != 0) continue;
    return Status::Error("kv cache: the call does not fit the cache (batch " + std::to_string(c.batch) + ", kv_heads " +
                         std::to_string(c.kv_heads) + ", head_size " + std::to_string(c.head_size) + ", " +
                         dtype_name(c.cache_dtype) + "): as its " + m);
  }
  return st;
}

}  // namespace

Status GqaKvCache::init(const KvCacheConfig& config) {
  const DType d = config.cache_dtype;
  if (config.batch <= 0 || config.kv_heads <= 0 || config.head_size <= 0 || config.capacity <= 0)
    return Status::Error("kv cache: batch, kv_heads, head_size and capacity must be positive");
  if (d != DType::kFloat32 && d != DType::kFloat16 && d != DType::kBFloat16 && d != DType::kInt8 &&
      d != DType::kUInt8)
    return Status::Error(std::string("kv cache: cache_dtype ") + dtype_name(d) +
                         " is not float32, float16, bfloat16, int8 or uint8 (int4)");
  if (config.window < 0 || config.window > config.capacity)
    return Status::Error("kv cache: window " + std::to_string(config.window) + " must be 0 (none) or in [1, capacity " +
                         std::to_string(config.capacity) + "]");
  Tensor key, value;  // a refused init leaves the cache as it was
  ATTNKIT_RETURN_IF_ERROR(allocate_cache(config, &key, &value));
  key_ = std::move(key);
  value_ = std::move(value);
  config_ = config;
  length_ = 0;
  f16_specials_ = false;
  return Status::Ok();
}

int64_t GqaKvCache::rows() const {
  return config_.window > 0 ? window_cache_rows(length_, config_.capacity, config_.window) : length_;
}

Status GqaKvCache::reserve(int64_t capacity) {
  if (key_.empty()) return Status::Error("kv cache: init() was not called");
  if (capacity <= config_.capacity) return Status::Ok();
  if (config_.window > 0)
    return Status::Error("kv cache: a window cache keeps its capacity " + std::to_string(config_.capacity) +
                         " (a larger one would hold tokens this one has evicted)");
  KvCacheConfig grown = config_;
  grown.capacity = capacity;
  Tensor key, value;
  ATTNKIT_RETURN_IF_ERROR(allocate_cache(grown, &key, &value));
  const int64_t heads = config_.batch * config_.kv_heads;
  copy_head_rows(key_.as<uint8_t>(), config_.capacity, key.as<uint8_t>(), capacity, heads, length_, row_bytes());
  copy_head_rows(value_.as<uint8_t>(), config_.capacity, value.as<uint8_t>(), capacity, heads, length_, row_bytes());
  key_ = std::move(key);
  value_ = std::move(value);
  config_ = grown;
  return Status::Ok();
}

Status GqaKvCache::step(const GqaInputs& inputs, const GqaAttributes& attrs, Tensor* output,
                        const RunOptions& options) {
  if (key_.empty()) return Status::Error("kv cache: init() was not called");
  if (!output) return Status::Error("kv cache: step() needs an output tensor");
  if (inputs.past_key || inputs.past_value || inputs.seqlens_k || inputs.total_sequence_length)
    return Status::Error("kv cache: past_key, past_value, seqlens_k and total_sequence_length come from the cache");
  if (!inputs.query || inputs.query->shape.size() != 3)
    return Status::Error("query: must be rank 3 (batch, sequence, hidden)");
  const int64_t new_tokens = inputs.query->shape[1];
  // Checked before the sum, which could overflow (the query's shape is validated later, with the op's inputs).
  if (new_tokens > std::numeric_limits<int32_t>::max() - length_)
    return Status::Error("kv cache: " + std::to_string(length_) + " + " + std::to_string(new_tokens) +
                         " tokens exceed int32 seqlens_k");
  const int64_t total = length_ + new_tokens;
  GqaAttributes step_attrs = attrs;
  if (config_.window > 0) {
    if (attrs.local_window_size != -1 && attrs.local_window_size != config_.window)
      return Status::Error("local_window_size = " + std::to_string(attrs.local_window_size) +
                           " differs from the window cache's window " + std::to_string(config_.window));
    step_attrs.local_window_size = config_.window;
    step_attrs.sliding_window_cache = 1;
  } else if (attrs.sliding_window_cache != 0) {
    return Status::Error("sliding_window_cache = " + std::to_string(attrs.sliding_window_cache) +
                         ": create the kv cache with a window to run a window cache");
  } else if (total > config_.capacity) {
    return Status::Error("kv cache: " + std::to_string(total) + " tokens exceed the capacity " +
                         std::to_string(config_.capacity));
  }
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
  const bool f16 = config_.cache_dtype == DType::kFloat16;
  Status st = gqa_kv_cache_step(full, step_attrs, &outputs, options, f16 && !f16_specials_);
  if (!st.ok()) return as_cache_mismatch(std::move(st), config_);
  *output = std::move(outputs.output);
  length_ = total;
  if (f16 && !f16_specials_) {
    // The step's tokens are the last rows held (a window cache's too, however its rows moved).
    const int64_t held = rows(), fresh = std::min(new_tokens, held);
    f16_specials_ =
        f16_rows_have_specials(key_, held - fresh, held) || f16_rows_have_specials(value_, held - fresh, held);
  }
  return Status::Ok();
}

Status GqaKvCache::truncate(int64_t length) {
  if (length < 0 || length > length_)
    return Status::Error("kv cache: cannot truncate to " + std::to_string(length) + " tokens: it holds " +
                         std::to_string(length_));
  if (config_.window > 0) {
    // Row r holds token length_ - rows() + r. A window of `length` tokens starts at token
    // length - window_rows(length), which is never later (evictions only add up): the rows stay where they are
    // if it starts at the same token, and the tokens it needs are gone if earlier.
    const int64_t first = length - window_cache_rows(length, config_.capacity, config_.window);
    if (first != length_ - rows())
      return Status::Error("kv cache: cannot truncate to " + std::to_string(length) + " tokens: the window cache " +
                           "no longer holds token " + std::to_string(first) + " (it holds tokens from " +
                           std::to_string(length_ - rows()) + " on)");
  }
  length_ = length;
  return Status::Ok();
}

Status GqaKvCache::load(const TensorView& key, const TensorView& value, int64_t length) {
  if (key_.empty()) return Status::Error("kv cache: init() was not called");
  const Shape& cache = key_.shape;
  for (const TensorView* t : {&key, &value}) {
    const char* name = t == &key ? "past_key" : "past_value";
    if (t->dtype != config_.cache_dtype)
      return Status::Error(std::string(name) + ": dtype " + dtype_name(t->dtype) + " is not the cache's " +
                           dtype_name(config_.cache_dtype));
    if (t->shape.size() != 4 || t->shape[0] != cache[0] || t->shape[1] != cache[1] || t->shape[3] != cache[3])
      return Status::Error(std::string(name) + ": shape " + shape_to_string(t->shape) + " is not (" +
                           std::to_string(cache[0]) + ", " + std::to_string(cache[1]) + ", tokens, " +
                           std::to_string(cache[3]) + ")");
    if (t->shape[2] < 0)
      return Status::Error(std::string(name) + ": shape " + shape_to_string(t->shape) + " has a negative row count");
    if (!t->data && t->elements() > 0) return Status::Error(std::string(name) + ": data is null");
  }
  if (length < -1)
    return Status::Error("kv cache: cannot load " + std::to_string(length) + " tokens (-1 loads every row)");
  if (key.shape[2] != value.shape[2])
    return Status::Error("past_value: " + std::to_string(value.shape[2]) + " tokens where past_key holds " +
                         std::to_string(key.shape[2]));
  const int64_t tokens = length < 0 ? key.shape[2] : length;
  const int64_t rows =
      config_.window > 0 ? window_cache_rows(tokens, config_.capacity, config_.window) : tokens;
  if (rows > key.shape[2])
    return Status::Error("kv cache: cannot load " + std::to_string(tokens) + " tokens from a past of " +
                         std::to_string(key.shape[2]) + " rows" +
                         (config_.window > 0 ? " (the window cache holds " + std::to_string(rows) + " rows after them)"
                                             : std::string()));
  if (rows > config_.capacity)
    return Status::Error("kv cache: " + std::to_string(rows) + " tokens exceed the capacity " +
                         std::to_string(config_.capacity));
  const int64_t heads = cache[0] * cache[1];
  copy_head_rows(static_cast<const uint8_t*>(key.data), key.shape[2], key_.as<uint8_t>(), cache[2], heads, rows,
                 row_bytes());
  copy_head_rows(static_cast<const uint8_t*>(value.data), value.shape[2], value_.as<uint8_t>(), cache[2], heads,
                 rows, row_bytes());
  length_ = tokens;
  f16_specials_ = config_.cache_dtype == DType::kFloat16 &&
                  (f16_rows_have_specials(key_, 0, rows) || f16_rows_have_specials(value_, 0, rows));
  return Status::Ok();
}

Status GqaKvCache::read(Tensor* key, Tensor* value) const {
  if (key_.empty()) return Status::Error("kv cache: init() was not called");
  if (!key || !value) return Status::Error("kv cache: read() needs two output tensors");
  if (key == value) return Status::Error("kv cache: read() needs two different output tensors");
  const Shape& cache = key_.shape;
  const int64_t held = rows();
  const Shape shape{cache[0], cache[1], held, cache[3]};
  try {
    key->reset_uninitialized(config_.cache_dtype, shape);
    value->reset_uninitialized(config_.cache_dtype, shape);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("kv cache: out of memory copying " + shape_to_string(shape));
  }
  const int64_t heads = cache[0] * cache[1];
  copy_head_rows(key_.as<uint8_t>(), cache[2], key->as<uint8_t>(), held, heads, held, row_bytes());
  copy_head_rows(value_.as<uint8_t>(), cache[2], value->as<uint8_t>(), held, heads, held, row_bytes());
  return Status::Ok();
}

}  // namespace attnkit
