// attnkit tests: the in-place KV cache gives exactly the stateless op's numbers, step after step.
// Both read the same cache rows with the same tiling, so outputs must match bit for bit.
#include <gtest/gtest.h>

#include <cstring>
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
    std::vector<int32_t> seqlens{static_cast<int32_t>(total - 1)};
    int32_t total32 = static_cast<int32_t>(total);
    TensorView seq_view{DType::kInt32, {1}, seqlens.data()}, total_view{DType::kInt32, {1}, &total32};
    in.seqlens_k = &seq_view;
    in.total_sequence_length = &total_view;
    TensorView pk, pv;
    if (step > 0 || attrs.kv_cache_bit_width) {
      // A quantized prompt needs a typed past of length 0, as in ORT.
      if (step == 0) {
        past_key.reset(cache_dtype, {1, Nk, 0, cache_dtype == DType::kUInt8 ? H / 2 : H});
        past_value.reset(cache_dtype, past_key.shape);
      }
      pk = past_key.view();
      pv = past_value.view();
      in.past_key = &pk;
      in.past_value = &pv;
    }
    GqaOutputs stateless;
    st = group_query_attention(in, attrs, GqaRequest(), &stateless);
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
}

}  // namespace
}  // namespace attnkit
