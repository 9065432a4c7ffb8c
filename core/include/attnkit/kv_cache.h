// attnkit: a GroupQueryAttention KV cache that lives in attnkit memory and grows in place.
// Each step appends the new tokens' (rotated, converted or quantized) K/V rows and attends over the
// whole cache without copying it, which is what makes long-context decoding bandwidth-bound instead
// of copy-bound. Its outputs are the stateless op's bits on the same inputs.
#pragma once
#include <vector>

#include "attnkit/gqa.h"

namespace attnkit {

struct KvCacheConfig {
  int64_t batch = 1;
  int64_t kv_heads = 0;
  int64_t head_size = 0;
  // Most tokens the cache can hold (rows, with a window). Each of its two tensors is at most 16 GiB; natively its
  // pages are taken as tokens arrive, while under wasm32 (4 GiB of memory in all) init() takes its whole size.
  int64_t capacity = 0;
  DType cache_dtype = DType::kFloat32;   // float32/float16/bfloat16, int8 (8-bit) or uint8 (4-bit packed)
  // > 0: a window cache (ORT's sliding_window_cache = 1, local_window_size = window <= capacity). It holds each
  // step's latest tokens in `capacity` rows however many it has seen, evicting capacity - window + 1 at a time;
  // steps attend over the last `window` tokens, and length() counts every token (rotary positions go on).
  int64_t window = 0;
};

class GqaKvCache {
 public:
  // Allocates the cache (not zeroed: memory is taken as tokens arrive); fails with a clear message on bad or absurd
  // sizes.
  Status init(const KvCacheConfig& config);

  // One step for every batch entry: inputs.query/key/value hold S new tokens (the first step is the
  // prompt; later steps are single tokens, or chunks when batch == 1). past_key, past_value,
  // seqlens_k and total_sequence_length are supplied by the cache and must be left null.
  Status step(const GqaInputs& inputs, const GqaAttributes& attrs, Tensor* output,
              const RunOptions& options = RunOptions());

  // Tokens the cache stands for; rows() of them are held (all of them without a window).
  int64_t length() const { return length_; }
  int64_t rows() const;
  int64_t capacity() const { return config_.capacity; }
  // The cache tensors, (batch, kv_heads, capacity, row), holding the latest rows() tokens in order; later rows are
  // unspecified.
  TensorView key() const { return key_.view(); }
  TensorView value() const { return value_.view(); }
  // Forgets the cached tokens (the memory is kept).
  void clear() {
    length_ = 0;
    f16_specials_ = false;
  }
  // Grows the capacity to `capacity` tokens, keeping the cached ones: a conversation that outgrows the first
  // guess, without allocating the model's whole context up front. A capacity not above the current one leaves
  // the cache as it is. Steps continue with the same bits. A window cache cannot grow: a larger capacity is
  // refused (its evicted tokens are gone, and a larger one would have kept them).
  Status reserve(int64_t capacity);
  // Forgets the tokens after the first `length` (a rejected speculative draft, a regenerated reply); the next
  // step continues from there, with the numbers of a cache that never held them. A window cache can go back as
  // far as the rows it holds allow (a window of `length` tokens it still has).
  Status truncate(int64_t length);
  // Replaces the cached tokens with those of key and value, in the present layout (batch, kv_heads, P, row) of the
  // cache dtype: an ORT present_key/present_value or read()'s tensors, such as a shared prompt prefix computed
  // once, or a saved conversation. `length` is the number of tokens they stand for (< 0: P): the first `length`
  // rows, or with a window the rows a window cache holds after `length` tokens (an ORT window present with its
  // seqlens_k + 1). Quantized rows must be continued with the scales that wrote them.
  Status load(const TensorView& key, const TensorView& value, int64_t length = -1);
  // Copies the held tokens out in that layout, (batch, kv_heads, rows(), row).
  Status read(Tensor* key, Tensor* value) const;

 private:
  int64_t row_bytes() const { return static_cast<int64_t>(dtype_size(config_.cache_dtype)) * key_.shape[3]; }

  KvCacheConfig config_;
  Tensor key_, value_;
  int64_t length_ = 0;
  // An fp16 cache may hold an inf or NaN: set when a step or load stores one (truncate keeps it). While it is
  // clear, steps read the past in the kernels' finite forms, which wasm runs in 8 operations per 8 elements, not 12.
  bool f16_specials_ = false;
};

}  // namespace attnkit
