// attnkit tests: output structs reused across calls, as a C++ decode loop does. The last present fed back as the
// past into the same outputs (whose reset would free it before it is read) gives the bits of fresh outputs; outputs
// not asked for come back empty; in-place caches that overlap, and one tensor read as both caches, are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "attnkit/kv_cache.h"
#include "attnkit/qattention.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

// One decode step after a 5-token prompt, its past the prompt's present (a view of `past_of`).
GqaCase decode_after(const GqaOutputs& past_of, const CaseSpec& prompt) {
  CaseSpec step = prompt;
  step.seq = 1, step.past = prompt.seq, step.seed = prompt.seed + 7;
  GqaCase c = make_case(step);
  c.erase("past_key"), c.erase("past_value");
  c.raw_views["past_key"] = past_of.present_key.view();
  c.raw_views["past_value"] = past_of.present_value.view();
  return c;
}

TEST(OutputReuse, GqaPresentFedBackAsPastIntoTheSameOutputs) {
  CaseSpec prompt;
  prompt.seq = 5, prompt.heads = 4, prompt.kv_heads = 2, prompt.head_size = 16;
  GqaCase first = make_case(prompt);
  GqaOutputs fresh_prompt, fresh_step, reused;
  ASSERT_TRUE(group_query_attention(first.inputs(), first.attrs, first.request, &fresh_prompt).ok());
  GqaCase fresh_case = decode_after(fresh_prompt, prompt);
  ASSERT_TRUE(group_query_attention(fresh_case.inputs(), fresh_case.attrs, fresh_case.request, &fresh_step).ok());

  ASSERT_TRUE(group_query_attention(first.inputs(), first.attrs, first.request, &reused).ok());
  GqaCase reused_case = decode_after(reused, prompt);
  const Status st = group_query_attention(reused_case.inputs(), reused_case.attrs, reused_case.request, &reused);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(same_bytes(reused.output, fresh_step.output));
  EXPECT_TRUE(same_bytes(reused.present_key, fresh_step.present_key));
  EXPECT_TRUE(same_bytes(reused.present_value, fresh_step.present_value));

  // Outputs not asked for are empty, not the previous call's.
  GqaRequest output_only;
  output_only.present_key = output_only.present_value = false;
  ASSERT_TRUE(group_query_attention(first.inputs(), first.attrs, output_only, &reused).ok());
  EXPECT_TRUE(reused.present_key.empty() && reused.present_value.empty() && reused.output_qk.empty());
}

TEST(OutputReuse, InPlaceCachesMustNotOverlap) {
  CaseSpec spec;
  spec.seq = 1, spec.past = 4, spec.past_capacity = 8, spec.heads = 2, spec.kv_heads = 1, spec.head_size = 16;
  GqaCase c = make_case(spec);
  const OwnedTensor& key = c.at("past_key");
  c.raw_views["past_value"] = TensorView{key.dtype, key.shape, key.bytes.data()};
  GqaOutputs out;
  EXPECT_EQ(group_query_attention_in_place(c.inputs(), c.attrs, c.request, &out).message(),
            "past_value: overlaps past_key, and the in-place form writes both");
  GqaKvCache cache;
  ASSERT_TRUE(cache.init({1, 1, 16, 8, DType::kFloat32}).ok());
  Tensor both;
  EXPECT_EQ(cache.read(&both, &both).message(), "kv cache: read() needs two different output tensors");
}

TEST(OutputReuse, QAttentionPresentFedBackAsPastIntoTheSameOutputs) {
  const int64_t N = 2, H = 16, D = N * H, P = 3;
  std::vector<uint8_t> x(D), w(D * 3 * D);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>(i * 37 + 11);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(static_cast<int8_t>(i * 13 % 31 - 15));
  std::vector<float> bias(3 * D), past(2 * N * P * H);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.01f * static_cast<float>(i % 17);
  for (size_t i = 0; i < past.size(); ++i) past[i] = 0.05f * static_cast<float>(i % 23) - 0.5f;
  const float input_scale = 0.02f, weight_scale = 0.01f;
  const TensorView vx{DType::kUInt8, {1, 1, D}, x.data()}, vw{DType::kInt8, {D, 3 * D}, w.data()},
      vb{DType::kFloat32, {3 * D}, bias.data()}, vis{DType::kFloat32, {1}, &input_scale},
      vws{DType::kFloat32, {1}, &weight_scale}, vpast{DType::kFloat32, {2, 1, N, P, H}, past.data()};
  QAttentionAttributes attrs;
  attrs.num_heads = N;
  QAttentionRequest request;
  request.present = true;
  const auto step = [&](const TensorView* p, QAttentionOutputs* out) {
    QAttentionInputs in;
    in.input = &vx, in.weight = &vw, in.bias = &vb, in.input_scale = &vis, in.weight_scale = &vws, in.past = p;
    return q_attention(in, attrs, request, out);
  };
  QAttentionOutputs first, fresh, reused;
  ASSERT_TRUE(step(&vpast, &first).ok());
  const TensorView first_present = first.present.view();
  ASSERT_TRUE(step(&first_present, &fresh).ok());
  ASSERT_TRUE(step(&vpast, &reused).ok());
  const TensorView own_present = reused.present.view();
  const Status st = step(&own_present, &reused);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(reused.output.storage == fresh.output.storage);
  EXPECT_TRUE(reused.present.storage == fresh.present.storage);
}

}  // namespace
}  // namespace attnkit
