// attnkit: a QAttention past/present cache that lives in attnkit memory and grows in place.
// Each step appends the new tokens' key and value rows to one buffer of the model's context and attends
// over it without copying it (q_attention_in_place with a past length): a decode step of a stateless call
// copies the whole past in and the whole present out. Numbers are those of q_attention on the same inputs.
#pragma once
#include "attnkit/qattention.h"

namespace attnkit {

struct QAttentionCacheConfig {
  int64_t batch = 1;
  int64_t heads = 0;      // num_heads
  int64_t head_size = 0;  // hidden size / num_heads
  int64_t capacity = 0;   // most tokens the cache can hold
};

class QAttentionKvCache {
 public:
  // Allocates the buffer, (2, batch, heads, capacity, head_size) float32, not zeroed (memory is taken as tokens
  // arrive); fails on bad or absurd sizes.
  Status init(const QAttentionCacheConfig& config);
  // One step: QAttention's inputs without past (the first step is the prompt, later ones single tokens or chunks);
  // the new tokens' rows are appended and `output` is (B, S, D).
  Status step(const QAttentionInputs& inputs, const QAttentionAttributes& attrs, Tensor* output,
              const RunOptions& options = RunOptions());
  int64_t length() const { return length_; }
  int64_t capacity() const { return config_.capacity; }
  void clear() { length_ = 0; }
  // Forgets the tokens after the first `length`; the next step continues from there.
  Status truncate(int64_t length);
  // Replaces the cached tokens with a past (2, batch, heads, P, head_size): ORT's present, or read()'s.
  Status load(const TensorView& past);
  // Copies the held tokens out as ORT's present, (2, batch, heads, length(), head_size).
  Status read(Tensor* present) const;

 private:
  QAttentionCacheConfig config_;
  Tensor buffer_;
  int64_t length_ = 0;
};

}  // namespace attnkit
