// attnkit tests: a window KvCache (KvCacheConfig::window) against the stateless op with sliding_window_cache = 1,
// step by step: a prompt longer than the capacity, decoding across evictions, a chunk, truncation back into the
// held rows, and loading a stateless present. Same rows, same tiling: the outputs must match bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <map>

#include "attnkit/kv_cache.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

constexpr int64_t kHeads = 4, kKvHeads = 2, kHead = 32, kCapacity = 10, kWindow = 6;

struct Window {
  DType cache;
  int bits;
};

// One step's new tokens (and the quantization scales), as the cache takes them.
GqaCase new_tokens(const Window& w, int64_t tokens, uint64_t seed) {
  GqaCase c;
  c.attrs.num_heads = kHeads;
  c.attrs.kv_num_heads = kKvHeads;
  c.set("query", random_tensor(DType::kFloat32, {1, tokens, kHeads * kHead}, seed));
  c.set("key", random_tensor(DType::kFloat32, {1, tokens, kKvHeads * kHead}, seed + 1));
  c.set("value", random_tensor(DType::kFloat32, {1, tokens, kKvHeads * kHead}, seed + 2));
  if (w.bits) {
    c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_TENSOR";
    c.attrs.kv_cache_bit_width = w.bits;
    c.set("k_scale", float_tensor(DType::kFloat32, {1}, {w.bits == 8 ? 0.01f : 0.15f}));
    c.set("v_scale", float_tensor(DType::kFloat32, {1}, {w.bits == 8 ? 0.008f : 0.12f}));
  }
  return c;
}

OwnedTensor owned(const Tensor& t) {
  OwnedTensor o{t.dtype, t.shape, {}};
  o.bytes.assign(t.storage.begin(), t.storage.end());
  return o;
}

// The stateless window op's step after `length` tokens whose window-sized present is `past`.
GqaOutputs stateless_step(GqaCase c, const OwnedTensor& past_key, const OwnedTensor& past_value, int64_t length) {
  const int64_t tokens = c.at("query").shape[1];
  c.attrs.sliding_window_cache = 1;
  c.attrs.local_window_size = kWindow;
  c.set("past_key", past_key);
  c.set("past_value", past_value);
  c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {1}, {static_cast<int32_t>(length + tokens - 1)}));
  c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(length + tokens)}));
  GqaRequest request;
  request.present_key = request.present_value = true;
  GqaInputs in = c.inputs();
  GqaOutputs out;
  const Status st = group_query_attention(in, c.attrs, request, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

void check_window_cache(const Window& w) {
  const int64_t row = w.bits == 4 ? kHead / 2 : kHead;
  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, kKvHeads, kHead, kCapacity, w.cache, kWindow}).ok());
  OwnedTensor past_key = zero_tensor(w.cache, {1, kKvHeads, kCapacity, row}), past_value = past_key;
  std::map<int64_t, std::pair<OwnedTensor, OwnedTensor>> presents;  // the stateless present after n tokens
  presents[0] = {past_key, past_value};
  int64_t length = 0;
  uint64_t seed = 100;
  const auto step = [&](int64_t tokens) {
    SCOPED_TRACE("step of " + std::to_string(tokens) + " after " + std::to_string(length) + " tokens");
    GqaCase c = new_tokens(w, tokens, seed += 10);
    if (w.cache == DType::kFloat16 && tokens == 3) {
      // An inf stored by the staging chunk: the steps after it must read it exactly (fp16 caches on wasm128).
      const float inf = std::numeric_limits<float>::infinity();
      std::memcpy(c.at("value").bytes.data() + 5 * sizeof(float), &inf, sizeof(float));
    }
    GqaOutputs want = stateless_step(c, presents[length].first, presents[length].second, length);
    GqaInputs in = c.inputs();
    Tensor got;
    const Status st = cache.step(in, c.attrs, &got);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(same_bytes(got, want.output)) << "the cache's output differs from the stateless op's";
    length += tokens;
    presents[length] = {owned(want.present_key), owned(want.present_value)};
    // read() gives the held rows: the stateless present's first rows().
    Tensor k, v;
    ASSERT_TRUE(cache.read(&k, &v).ok());
    EXPECT_EQ(cache.length(), length);
    ASSERT_EQ(k.shape, (Shape{1, kKvHeads, cache.rows(), row}));
    const size_t rb = static_cast<size_t>(row * dtype_size(w.cache)), held = cache.rows() * rb;
    for (int64_t g = 0; g < kKvHeads; ++g)
      EXPECT_TRUE(std::equal(k.storage.begin() + g * held, k.storage.begin() + (g + 1) * held,
                             want.present_key.storage.begin() + g * kCapacity * rb))
          << "read() of kv head " << g;
  };
  step(13);                            // a prompt longer than the capacity: 8 rows held, tokens 5-12
  for (int i = 0; i < 9; ++i) step(1);  // across two evictions
  step(3);                             // a chunk
  EXPECT_EQ(cache.rows(), 10);
  EXPECT_EQ(length, 25);

  // Back one token within the held rows, then on again.
  ASSERT_TRUE(cache.truncate(24).ok());
  length = 24;
  presents[24] = presents[25];  // the stateless op reads only the rows 24 tokens hold
  step(1);
  // Tokens before the first held one are gone.
  const Status gone = cache.truncate(12);
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("no longer holds token"), std::string::npos) << gone.message();
  // A window present from the stateless op, loaded with the tokens it stands for, continues the same way.
  GqaKvCache loaded;
  ASSERT_TRUE(loaded.init({1, kKvHeads, kHead, kCapacity, w.cache, kWindow}).ok());
  GqaCase c = new_tokens(w, 1, 999);
  const OwnedTensor& pk = presents[21].first;
  const OwnedTensor& pv = presents[21].second;
  ASSERT_TRUE(loaded.load({pk.dtype, pk.shape, pk.bytes.data()}, {pv.dtype, pv.shape, pv.bytes.data()}, 21).ok());
  EXPECT_EQ(loaded.length(), 21);
  GqaInputs in = c.inputs();
  Tensor got;
  ASSERT_TRUE(loaded.step(in, c.attrs, &got).ok());
  EXPECT_TRUE(same_bytes(got, stateless_step(c, pk, pv, 21).output)) << "a loaded window cache";
}

TEST(KvCacheWindow, Float32FollowsTheStatelessWindowOp) { check_window_cache({DType::kFloat32, 0}); }
// An fp16 cache under fp32 queries: on wasm128 its checked rows take the finite loaders across evictions, until the
// chunk stores an inf.
TEST(KvCacheWindow, Float16FollowsTheStatelessWindowOp) { check_window_cache({DType::kFloat16, 0}); }
TEST(KvCacheWindow, Int8FollowsTheStatelessWindowOp) { check_window_cache({DType::kInt8, 8}); }
TEST(KvCacheWindow, Int4FollowsTheStatelessWindowOp) { check_window_cache({DType::kUInt8, 4}); }

TEST(KvCacheWindow, RefusesWhatAWindowCacheCannotDo) {
  GqaKvCache cache;
  EXPECT_NE(cache.init({1, kKvHeads, kHead, 4, DType::kFloat32, 5}).message().find("window 5 must be 0"),
            std::string::npos);
  ASSERT_TRUE(cache.init({1, kKvHeads, kHead, kCapacity, DType::kFloat32, kWindow}).ok());
  EXPECT_NE(cache.reserve(20).message().find("keeps its capacity"), std::string::npos);
  GqaCase c = new_tokens({DType::kFloat32, 0}, 1, 5);
  c.attrs.local_window_size = 3;
  GqaInputs in = c.inputs();
  Tensor out;
  EXPECT_NE(cache.step(in, c.attrs, &out).message().find("differs from the window cache's window 6"), std::string::npos);
  GqaKvCache plain;
  ASSERT_TRUE(plain.init({1, kKvHeads, kHead, kCapacity, DType::kFloat32}).ok());
  c.attrs.local_window_size = kWindow;
  c.attrs.sliding_window_cache = 1;
  EXPECT_NE(plain.step(in, c.attrs, &out).message().find("create the kv cache with a window"), std::string::npos);
}

}  // namespace
}  // namespace attnkit
