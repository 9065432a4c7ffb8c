// attnkit tests: the in-place KV cache gives exactly the stateless op's numbers, step after step.
// Both read the same cache rows with the same tiling, so outputs must match bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "attnkit/gqa.h"
#include "attnkit/kv_cache.h"
#include "common/half.h"

namespace attnkit {
namespace {

struct OwnedView {
  std::vector<float> data;
  TensorView view;
  OwnedView(Shape shape, std::mt19937* rng) {
    data.resize(static_cast<size_t>(shape_elements(shape)));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : data) v = dist(*rng);
    view = TensorView{DType::kFloat32, std::move(shape), data.data()};
  }
};

// The stateless op over `in`'s new tokens continuing past_key/past_value (none when null) to `total` tokens.
Status run_stateless(GqaInputs in, const GqaAttributes& attrs, const Tensor* past_key, const Tensor* past_value,
                     int64_t total, GqaOutputs* out) {
  std::vector<int32_t> seqlens{static_cast<int32_t>(total - 1)};
  int32_t total32 = static_cast<int32_t>(total);
  const TensorView seq_view{DType::kInt32, {1}, seqlens.data()}, total_view{DType::kInt32, {1}, &total32};
  in.seqlens_k = &seq_view;
  in.total_sequence_length = &total_view;
  TensorView pk, pv;
  if (past_key) {
    pk = past_key->view();
    pv = past_value->view();
    in.past_key = &pk;
    in.past_value = &pv;
  }
  return group_query_attention(in, attrs, GqaRequest(), out);
}

void run_steps(DType cache_dtype, bool rotary) {
  const int64_t N = 4, Nk = 2, H = 64, prompt = 5, steps = 4;
  std::mt19937 rng(11);
  std::vector<float> scale_data{0.02f};
  const TensorView scale{DType::kFloat32, {1}, scale_data.data()};
  GqaAttributes attrs;
  attrs.num_heads = N;
  attrs.kv_num_heads = Nk;
  if (cache_dtype == DType::kInt8 || cache_dtype == DType::kUInt8) {
    attrs.k_quant_type = attrs.v_quant_type = "PER_TENSOR";
    attrs.kv_cache_bit_width = cache_dtype == DType::kInt8 ? 8 : 4;
  }
  OwnedView cos_cache({64, H / 2}, &rng), sin_cache({64, H / 2}, &rng);
  if (rotary) attrs.do_rotary = 1;

  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, Nk, H, 32, cache_dtype}).ok());
  Tensor past_key, past_value;  // the stateless op's cache, carried from step to step
  int64_t length = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t S = step == 0 ? prompt : 1;
    OwnedView q({1, S, N * H}, &rng), k({1, S, Nk * H}, &rng), v({1, S, Nk * H}, &rng);
    GqaInputs in;
    in.query = &q.view;
    in.key = &k.view;
    in.value = &v.view;
    if (rotary) {
      in.cos_cache = &cos_cache.view;
      in.sin_cache = &sin_cache.view;
    }
    if (attrs.kv_cache_bit_width) {
      in.k_scale = &scale;
      in.v_scale = &scale;
    }
    Tensor cached_out;
    Status st = cache.step(in, attrs, &cached_out);
    ASSERT_TRUE(st.ok()) << st.message();

    const int64_t total = length + S;
    if (step == 0 && attrs.kv_cache_bit_width) {
      // A quantized prompt needs a typed past of length 0, as in ORT.
      past_key.reset(cache_dtype, {1, Nk, 0, cache_dtype == DType::kUInt8 ? H / 2 : H});
      past_value.reset(cache_dtype, past_key.shape);
    }
    const bool with_past = step > 0 || attrs.kv_cache_bit_width;
    GqaOutputs stateless;
    st = run_stateless(in, attrs, with_past ? &past_key : nullptr, &past_value, total, &stateless);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cached_out.storage, stateless.output.storage) << "step " << step;
    // The cache's first `total` rows equal the stateless present.
    const size_t row = stateless.present_key.storage.size() / static_cast<size_t>(Nk * total);
    for (int64_t g = 0; g < Nk; ++g)
      ASSERT_EQ(0, std::memcmp(cache.key().as<uint8_t>() + g * 32 * row,
                               stateless.present_key.as<uint8_t>() + g * total * row, total * row));
    past_key = std::move(stateless.present_key);
    past_value = std::move(stateless.present_value);
    length = total;
  }
  EXPECT_EQ(cache.length(), prompt + steps - 1);
}

TEST(KvCache, Float32MatchesStatelessOp) { run_steps(DType::kFloat32, false); }
TEST(KvCache, Float32RotaryMatchesStatelessOp) { run_steps(DType::kFloat32, true); }
TEST(KvCache, Int8MatchesStatelessOp) { run_steps(DType::kInt8, true); }
TEST(KvCache, Int4MatchesStatelessOp) { run_steps(DType::kUInt8, false); }

// The tokens [first, first + count) of a fixed random sequence, as one step's query/key/value (so that two caches
// can be fed the same tokens), with int8 per-tensor scales and rotary.
struct TokenStep {
  static constexpr int64_t N = 4, Nk = 2, H = 32;
  std::vector<float> q, k, v, cos, sin, scale{0.02f};
  TensorView qv, kv, vv, cos_view, sin_view, scale_view;
  GqaInputs in;
  GqaAttributes attrs;
  TokenStep(int64_t first, int64_t count, bool quantized) {
    const auto fill = [&](std::vector<float>* x, int64_t width, int salt) {
      x->resize(static_cast<size_t>(count * width));
      for (int64_t t = 0; t < count; ++t)
        for (int64_t i = 0; i < width; ++i)
          (*x)[static_cast<size_t>(t * width + i)] =
              std::sin(0.37f * static_cast<float>((first + t) * width + i) + salt);
    };
    fill(&q, N * H, 1);
    fill(&k, Nk * H, 2);
    fill(&v, Nk * H, 3);
    cos.resize(64 * H / 2);
    sin.resize(64 * H / 2);
    for (size_t i = 0; i < cos.size(); ++i) cos[i] = std::cos(0.01f * i), sin[i] = std::sin(0.01f * i);
    qv = {DType::kFloat32, {1, count, N * H}, q.data()};
    kv = {DType::kFloat32, {1, count, Nk * H}, k.data()};
    vv = {DType::kFloat32, {1, count, Nk * H}, v.data()};
    cos_view = {DType::kFloat32, {64, H / 2}, cos.data()};
    sin_view = {DType::kFloat32, {64, H / 2}, sin.data()};
    scale_view = {DType::kFloat32, {1}, scale.data()};
    in.query = &qv;
    in.key = &kv;
    in.value = &vv;
    in.cos_cache = &cos_view;
    in.sin_cache = &sin_view;
    attrs.num_heads = N;
    attrs.kv_num_heads = Nk;
    attrs.do_rotary = 1;
    if (quantized) {
      in.k_scale = in.v_scale = &scale_view;
      attrs.k_quant_type = attrs.v_quant_type = "PER_TENSOR";
      attrs.kv_cache_bit_width = 8;
    }
  }
};

Tensor step_tokens(GqaKvCache* cache, int64_t first, int64_t count, bool quantized) {
  TokenStep step(first, count, quantized);
  Tensor out;
  Status st = cache->step(step.in, step.attrs, &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// The message of one more token's step ("" when it ran).
std::string step_tokens_status(GqaKvCache* cache, int64_t first) {
  TokenStep step(first, 1, true);
  Tensor out;
  return cache->step(step.in, step.attrs, &out).message();
}

// A prefix read out of one cache and loaded into another (in full, or its first rows), and a cache truncated back
// to that prefix, continue exactly as a cache that saw only the prefix's tokens: same rows, same bits.
void check_prefix_reuse(DType dtype) {
  const bool quantized = dtype == DType::kInt8;
  const int64_t Nk = TokenStep::Nk, H = TokenStep::H;
  GqaKvCache full, fresh;
  ASSERT_TRUE(full.init({1, Nk, H, 16, dtype}).ok());
  ASSERT_TRUE(fresh.init({1, Nk, H, 16, dtype}).ok());
  step_tokens(&full, 0, 6, quantized);
  step_tokens(&fresh, 0, 4, quantized);  // the 4-token prefix alone
  Tensor key, value;
  ASSERT_TRUE(full.read(&key, &value).ok());
  EXPECT_EQ(key.shape, (Shape{1, Nk, 6, H}));

  GqaKvCache loaded, prefix;
  ASSERT_TRUE(loaded.init({1, Nk, H, 32, dtype}).ok());  // another capacity: another row stride
  ASSERT_TRUE(prefix.init({1, Nk, H, 8, dtype}).ok());
  ASSERT_TRUE(loaded.load(key.view(), value.view()).ok());
  ASSERT_TRUE(prefix.load(key.view(), value.view(), 4).ok());
  EXPECT_EQ(loaded.length(), 6);
  EXPECT_EQ(prefix.length(), 4);
  Tensor again_key, again_value;
  ASSERT_TRUE(loaded.read(&again_key, &again_value).ok());
  EXPECT_EQ(again_key.storage, key.storage);
  EXPECT_EQ(again_value.storage, value.storage);

  const Tensor want6 = step_tokens(&full, 6, 1, quantized);
  EXPECT_EQ(step_tokens(&loaded, 6, 1, quantized).storage, want6.storage);
  ASSERT_TRUE(full.truncate(4).ok());
  const Tensor want4 = step_tokens(&fresh, 100, 2, quantized);  // a different continuation of the prefix
  EXPECT_EQ(step_tokens(&prefix, 100, 2, quantized).storage, want4.storage);
  EXPECT_EQ(step_tokens(&full, 100, 2, quantized).storage, want4.storage);
  EXPECT_EQ(full.length(), 6);
}

// One step's S new fp16 tokens (query, key, value) with values in [-1, 1).
struct HalfTokens {
  std::vector<uint16_t> q, k, v;
  TensorView qv, kv, vv;
  GqaInputs in;
  HalfTokens(int64_t S, int64_t N, int64_t Nk, int64_t H, std::mt19937* rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto [x, width] : {std::pair{&q, N * H}, std::pair{&k, Nk * H}, std::pair{&v, Nk * H}}) {
      x->resize(static_cast<size_t>(S * width));
      for (uint16_t& h : *x) h = float_to_f16(dist(*rng));
    }
    qv = {DType::kFloat16, {1, S, N * H}, q.data()};
    kv = {DType::kFloat16, {1, S, Nk * H}, k.data()};
    vv = {DType::kFloat16, {1, S, Nk * H}, v.data()};
    in.query = &qv;
    in.key = &kv;
    in.value = &vv;
  }
};

// An fp16 cache reads the past rows it has checked in the kernels' finite forms (wasm128 skips the exponent-31
// handling); once a row holds an inf or a NaN, every later step must read it exactly. Each step gives the stateless
// op's bits: a 600-token prompt (a streamed decode block), finite decoding, an inf in a value row, a NaN in a key
// row, more decoding; then a cache loaded with those rows continues alike.
TEST(KvCache, Float16MatchesStatelessOpAcrossInfAndNaN) {
  const int64_t N = 4, Nk = 2, H = 64, capacity = 640;
  std::mt19937 rng(5);
  GqaAttributes attrs;
  attrs.num_heads = N;
  attrs.kv_num_heads = Nk;
  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, Nk, H, capacity, DType::kFloat16}).ok());
  Tensor past_key, past_value;  // the stateless op's cache, carried from step to step
  int64_t length = 0;
  const std::vector<int64_t> steps{600, 1, 1, 1, 1, 1, 3, 1};
  for (size_t step = 0; step < steps.size(); ++step) {
    const int64_t S = steps[step], total = length + S;
    HalfTokens fresh(S, N, Nk, H, &rng);
    if (step == 3) fresh.v[5] = 0x7c00;           // +inf: channel 5 of kv head 0's value
    if (step == 5) fresh.k[Nk * H - 1] = 0x7e00;  // NaN: the last channel of kv head 1's key
    Tensor cached_out;
    Status st = cache.step(fresh.in, attrs, &cached_out);
    ASSERT_TRUE(st.ok()) << st.message();
    GqaOutputs stateless;
    st = run_stateless(fresh.in, attrs, step > 0 ? &past_key : nullptr, &past_value, total, &stateless);
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cached_out.storage, stateless.output.storage) << "step " << step;
    past_key = std::move(stateless.present_key);
    past_value = std::move(stateless.present_value);
    length = total;
  }
  EXPECT_TRUE(std::isnan(f16_to_float(cache.key().as<uint16_t>()[(capacity + 604) * H + H - 1])));  // head 1, token 604

  GqaKvCache loaded;
  ASSERT_TRUE(loaded.init({1, Nk, H, capacity, DType::kFloat16}).ok());
  ASSERT_TRUE(loaded.load(past_key.view(), past_value.view()).ok());
  const HalfTokens next(1, N, Nk, H, &rng);
  Tensor from_cache, from_loaded;
  ASSERT_TRUE(cache.step(next.in, attrs, &from_cache).ok());
  ASSERT_TRUE(loaded.step(next.in, attrs, &from_loaded).ok());
  EXPECT_EQ(from_cache.storage, from_loaded.storage);
}

TEST(KvCache, Float32PrefixLoadReadTruncate) { check_prefix_reuse(DType::kFloat32); }
TEST(KvCache, Int8PrefixLoadReadTruncate) { check_prefix_reuse(DType::kInt8); }

// A cache grown by reserve() keeps its tokens and continues with the bits of one allocated large from the start.
TEST(KvCache, ReserveKeepsTokensAndBits) {
  const int64_t Nk = TokenStep::Nk, H = TokenStep::H;
  GqaKvCache small, large;
  ASSERT_TRUE(small.init({1, Nk, H, 6, DType::kInt8}).ok());
  ASSERT_TRUE(large.init({1, Nk, H, 16, DType::kInt8}).ok());
  step_tokens(&small, 0, 6, true);
  step_tokens(&large, 0, 6, true);
  EXPECT_NE(step_tokens_status(&small, 6), "");  // full
  ASSERT_TRUE(small.reserve(4).ok());           // not above the capacity: nothing changes
  EXPECT_EQ(small.capacity(), 6);
  EXPECT_FALSE(small.reserve(int64_t{1} << 40).ok());  // refused, and the cache still works
  ASSERT_TRUE(small.reserve(9).ok());
  EXPECT_EQ(small.capacity(), 9);
  EXPECT_EQ(small.length(), 6);
  for (int64_t t = 6; t < 9; ++t)
    EXPECT_EQ(step_tokens(&small, t, 1, true).storage, step_tokens(&large, t, 1, true).storage);
}

TEST(KvCache, LoadAndTruncateRefuseWhatDoesNotFit) {
  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, 2, 8, 4, DType::kFloat32}).ok());
  std::vector<float> rows(2 * 6 * 8, 0.25f);
  std::vector<int8_t> bytes(2 * 3 * 8, 1);
  const TensorView six{DType::kFloat32, {1, 2, 6, 8}, rows.data()}, three{DType::kFloat32, {1, 2, 3, 8}, rows.data()};
  const TensorView wrong_heads{DType::kFloat32, {1, 1, 3, 8}, rows.data()};
  const TensorView int8_rows{DType::kInt8, {1, 2, 3, 8}, bytes.data()};
  const auto message = [](const Status& st) { return st.message(); };
  EXPECT_NE(message(cache.load(six, six)).find("exceed the capacity 4"), std::string::npos);
  EXPECT_NE(message(cache.load(three, three, 5)).find("cannot load 5 tokens from a past of 3"), std::string::npos);
  EXPECT_NE(message(cache.load(wrong_heads, wrong_heads)).find("is not (1, 2, tokens, 8)"), std::string::npos);
  EXPECT_NE(message(cache.load(int8_rows, int8_rows)).find("int8 is not the cache's float32"), std::string::npos);
  EXPECT_NE(message(cache.load(three, six, 2)).find("past_value: 6 tokens where past_key holds 3"), std::string::npos);
  const TensorView negative{DType::kFloat32, {1, 2, -3, 8}, rows.data()};
  EXPECT_EQ(message(cache.load(negative, negative)), "past_key: shape [1, 2, -3, 8] has a negative row count");
  EXPECT_EQ(message(cache.load(three, three, -5)), "kv cache: cannot load -5 tokens (-1 loads every row)");
  EXPECT_EQ(cache.length(), 0);  // refused loads leave it as it was
  ASSERT_TRUE(cache.load(six, six, 3).ok());
  EXPECT_NE(message(cache.truncate(4)).find("cannot truncate to 4 tokens: it holds 3"), std::string::npos);
  EXPECT_FALSE(cache.truncate(-1).ok());
  ASSERT_TRUE(cache.truncate(0).ok());
  EXPECT_EQ(cache.length(), 0);
}

// Cache rows start on cache lines, as the AVX512 kernels' loads need to stay whole (attnkit/tensor.h): from small
// caches to ones past the pool's and malloc's thresholds, and pooled memory handed out again for a smaller cache.
TEST(KvCache, BuffersStartOnCacheLines) {
  const auto aligned = [](const TensorView& v) { return reinterpret_cast<uintptr_t>(v.data) % kTensorAlignment == 0; };
  for (int64_t capacity : {3, 100, 1000, 9000}) {
    for (int round = 0; round < 2; ++round) {  // the second round reuses the first one's pooled blocks
      GqaKvCache cache;
      ASSERT_TRUE(cache.init({1, 2, 64, capacity - round, DType::kFloat32}).ok());
      EXPECT_TRUE(aligned(cache.key())) << capacity;
      EXPECT_TRUE(aligned(cache.value())) << capacity;
    }
  }
  for (size_t bytes : {size_t{40}, size_t{100} << 10, size_t{3} << 20}) {
    TensorBytes buffer(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % kTensorAlignment, 0u) << bytes;
  }
}

TEST(KvCache, RejectsOverflowAndMisuse) {
  GqaKvCache cache;
  EXPECT_FALSE(cache.init({1, 2, 64, 0, DType::kFloat32}).ok());
  EXPECT_NE(cache.init({1 << 20, 64, 128, 1 << 20, DType::kFloat32}).message().find("16 GiB"), std::string::npos);
  ASSERT_TRUE(cache.init({1, 1, 8, 2, DType::kFloat32}).ok());
  std::vector<float> x(3 * 8, 0.5f);
  TensorView q{DType::kFloat32, {1, 3, 8}, x.data()};
  GqaInputs in;
  in.query = in.key = in.value = &q;
  GqaAttributes attrs;
  attrs.num_heads = attrs.kv_num_heads = 1;
  Tensor out;
  Status st = cache.step(in, attrs, &out);
  EXPECT_NE(st.message().find("exceed the capacity"), std::string::npos) << st.message();
  // A token count whose sum with the cached ones overflows is refused before it is added (window caches have no
  // capacity to stop it).
  TensorView huge{DType::kFloat32, {1, std::numeric_limits<int64_t>::max(), 8}, x.data()};
  in.query = in.key = in.value = &huge;
  EXPECT_EQ(cache.step(in, attrs, &out).message(), "kv cache: 0 + 9223372036854775807 tokens exceed int32 seqlens_k");
  // Null pointers are refused, not written through or read, and the cache stays as it was.
  TensorView one{DType::kFloat32, {1, 1, 8}, x.data()};
  in.query = in.key = in.value = &one;
  EXPECT_EQ(cache.step(in, attrs, nullptr).message(), "kv cache: step() needs an output tensor");
  EXPECT_EQ(cache.read(nullptr, &out).message(), "kv cache: read() needs two output tensors");
  const TensorView null_data{DType::kFloat32, {1, 1, 2, 8}, nullptr};
  EXPECT_FALSE(cache.load(null_data, null_data).ok());
  EXPECT_EQ(cache.length(), 0);
  EXPECT_TRUE(cache.step(in, attrs, &out).ok());
}

// A step whose attributes do not fit the cache is told what the cache holds, not about past_key, an input its
// caller never passed.
TEST(KvCache, AStepThatDoesNotFitNamesTheCache) {
  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, 2, 8, 4, DType::kInt8}).ok());
  std::vector<float> x(4 * 8, 0.5f), scale{0.1f};
  const TensorView q{DType::kFloat32, {1, 1, 32}, x.data()}, kv{DType::kFloat32, {1, 1, 16}, x.data()};
  const TensorView scale_view{DType::kFloat32, {1}, scale.data()};
  GqaInputs in;
  in.query = &q;
  in.key = in.value = &kv;
  in.k_scale = in.v_scale = &scale_view;
  GqaAttributes attrs;
  attrs.num_heads = 4;
  attrs.kv_num_heads = 2;
  Tensor out;
  const std::string cache_is = "kv cache: the call does not fit the cache (batch 1, kv_heads 2, head_size 8, int8): ";
  const std::string unquantized = cache.step(in, attrs, &out).message();
  EXPECT_EQ(unquantized.rfind(cache_is + "as its past_key: dtype must be float32", 0), 0u) << unquantized;
  attrs.k_quant_type = attrs.v_quant_type = "PER_TENSOR";
  attrs.kv_cache_bit_width = 8;
  attrs.kv_num_heads = 4;
  const TensorView kv4{DType::kFloat32, {1, 1, 32}, x.data()};
  in.key = in.value = &kv4;
  EXPECT_EQ(cache.step(in, attrs, &out).message(), cache_is + "as its past_key: dim 1 must equal kv_num_heads 4, got 2");
  EXPECT_EQ(cache.length(), 0);
  attrs.kv_num_heads = 2;
  in.key = in.value = &kv;
  EXPECT_TRUE(cache.step(in, attrs, &out).ok());
}

}  // namespace
}  // namespace attnkit
