// attnkit tests: QAttentionKvCache against the stateless op. A prompt and decode steps (single tokens and a
// chunk) through one buffer of the context give, step by step, the output bits of q_attention fed the previous
// present, and read() gives that present; truncate, load (from ORT's present) and clear continue with the same
// bits; the cache's own errors name the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "attnkit/qattention.h"
#include "attnkit/qattention_cache.h"

namespace attnkit {
namespace {

// One step's inputs: S new tokens of a model with N heads of H (int8 weights, per-tensor scales).
struct StepInputs {
  std::vector<uint8_t> x, w;
  std::vector<float> bias, past;
  std::vector<int32_t> mask;
  float x_scale = 0.02f, w_scale = 0.003f;
  TensorView vx, vw, vbias, vxs, vws, vpast, vmask;
  QAttentionInputs in;

  StepInputs(int64_t B, int64_t S, int64_t N, int64_t H, int seed) {
    const int64_t D = N * H;
    x.resize(B * S * D);
    w.resize(D * 3 * D);
    bias.resize(3 * D);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint8_t>((i * 37 + 11 * seed) % 256);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 53 + 7) % 256);  // the model's, every step
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.1f * std::sin(0.3f * i);
    vx = {DType::kUInt8, {B, S, D}, x.data()};
    vw = {DType::kInt8, {D, 3 * D}, w.data()};
    vbias = {DType::kFloat32, {3 * D}, bias.data()};
    vxs = {DType::kFloat32, {}, &x_scale};
    vws = {DType::kFloat32, {}, &w_scale};
    in.input = &vx;
    in.weight = &vw;
    in.bias = &vbias;
    in.input_scale = &vxs;
    in.weight_scale = &vws;
  }
  // A (B, T) key mask hiding key 1 of batch entry 0.
  void mask_keys(int64_t B, int64_t T) {
    mask.assign(B * T, 1);
    if (T > 1) mask[1] = 0;
    vmask = {DType::kInt32, {B, T}, mask.data()};
    in.mask_index = &vmask;
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.bytes() == b.bytes() &&
         std::memcmp(a.storage.data(), b.storage.data(), a.bytes()) == 0;
}

// Steps of S tokens each through the cache and through q_attention with the present passed on.
void check_steps(int64_t B, int64_t N, int64_t H, const std::vector<int64_t>& steps, bool masked) {
  SCOPED_TRACE("B=" + std::to_string(B) + " N=" + std::to_string(N) + " H=" + std::to_string(H));
  int64_t capacity = 1;  // one row to spare
  for (int64_t S : steps) capacity += S;
  QAttentionKvCache cache;
  ASSERT_TRUE(cache.init({B, N, H, capacity}).ok());
  QAttentionAttributes attrs;
  attrs.num_heads = N;
  attrs.unidirectional = 1;
  Tensor present;  // the stateless chain's
  int64_t length = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const int64_t S = steps[k];
    StepInputs step(B, S, N, H, static_cast<int>(k) + 1);
    if (masked) step.mask_keys(B, length + S);
    Tensor output;
    Status st = cache.step(step.in, attrs, &output);
    ASSERT_TRUE(st.ok()) << st.message();
    const TensorView past = present.view();
    if (length > 0) step.in.past = &past;
    QAttentionOutputs want;
    st = q_attention(step.in, attrs, QAttentionRequest{true}, &want);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(same_bits(output, want.output));
    present = std::move(want.present);
    length += S;
    ASSERT_EQ(cache.length(), length);
    Tensor held;
    ASSERT_TRUE(cache.read(&held).ok());
    EXPECT_TRUE(same_bits(held, present));
  }
}

TEST(QAttentionCache, StepsGiveTheStatelessBits) {
  check_steps(1, 2, 16, {5, 1, 1, 3, 1}, false);
  check_steps(2, 3, 12, {4, 1, 2, 1}, false);  // head size 12 gathers K and V into padded rows
  check_steps(2, 2, 8, {3, 1, 1}, true);       // a (B, T) key mask at every step
  check_steps(1, 2, 16, {200, 1}, false);      // a prompt of three query blocks, K packed once per head
  check_steps(1, 4, 64, {1100, 1, 2}, false);  // steps after a long past
}

TEST(QAttentionCache, TruncateLoadAndClearContinueWithTheSameBits) {
  const int64_t B = 1, N = 2, H = 16;
  QAttentionAttributes attrs;
  attrs.num_heads = N;
  QAttentionKvCache cache;
  ASSERT_TRUE(cache.init({B, N, H, 8}).ok());
  Tensor out, prefix, again;
  StepInputs prompt(B, 4, N, H, 1), token(B, 1, N, H, 2), draft(B, 2, N, H, 3);
  ASSERT_TRUE(cache.step(prompt.in, attrs, &out).ok());
  ASSERT_TRUE(cache.read(&prefix).ok());
  ASSERT_TRUE(cache.step(token.in, attrs, &out).ok());
  ASSERT_TRUE(cache.step(draft.in, attrs, &out).ok());  // rejected
  ASSERT_TRUE(cache.truncate(5).ok());
  ASSERT_TRUE(cache.step(draft.in, attrs, &again).ok());
  EXPECT_TRUE(same_bits(again, out));

  // Another cache loaded with the prompt's present (as ORT hands it out) continues as the first did.
  QAttentionKvCache loaded;
  ASSERT_TRUE(loaded.init({B, N, H, 8}).ok());
  ASSERT_TRUE(loaded.load(prefix.view()).ok());
  EXPECT_EQ(loaded.length(), 4);
  Tensor from_loaded;
  ASSERT_TRUE(loaded.step(token.in, attrs, &from_loaded).ok());
  cache.clear();
  ASSERT_TRUE(cache.step(prompt.in, attrs, &out).ok());
  ASSERT_TRUE(cache.step(token.in, attrs, &out).ok());
  EXPECT_TRUE(same_bits(from_loaded, out));
}

TEST(QAttentionCache, ErrorsNameTheRule) {
  const int64_t N = 2, H = 16;
  QAttentionAttributes attrs;
  attrs.num_heads = N;
  QAttentionKvCache cache;
  Tensor out;
  StepInputs prompt(1, 3, N, H, 1);
  EXPECT_NE(cache.step(prompt.in, attrs, &out).message().find("init() was not called"), std::string::npos);
  EXPECT_NE(cache.init({1, N, H, 0}).message().find("must be positive"), std::string::npos);
  EXPECT_NE(cache.init({1 << 20, 1 << 10, 1 << 10, 1 << 10}).message().find("larger than 16 GiB"), std::string::npos);
  ASSERT_TRUE(cache.init({1, N, H, 4}).ok());
  ASSERT_TRUE(cache.step(prompt.in, attrs, &out).ok());
  // Nothing refused changes the cache: each message, then its length.
  EXPECT_NE(cache.step(prompt.in, attrs, &out).message().find("3 new tokens after 3 exceed its capacity 4"),
            std::string::npos);
  StepInputs two(2, 1, N, H, 2);
  EXPECT_NE(cache.step(two.in, attrs, &out).message().find("the cache holds batch 1"), std::string::npos);
  QAttentionAttributes three = attrs;
  three.num_heads = 4;
  StepInputs wide(1, 1, 4, H, 2);
  EXPECT_NE(cache.step(wide.in, three, &out).message().find("num_heads: 4, the cache holds 2 heads"),
            std::string::npos);
  StepInputs narrow(1, 1, N, 8, 2);
  EXPECT_NE(cache.step(narrow.in, attrs, &out).message().find("weight: dim 1 = 48"), std::string::npos);
  StepInputs with_past(1, 1, N, H, 2);
  Tensor past;
  ASSERT_TRUE(cache.read(&past).ok());
  const TensorView past_view = past.view();
  with_past.in.past = &past_view;
  EXPECT_NE(cache.step(with_past.in, attrs, &out).message().find("past: supplied by the cache"), std::string::npos);
  EXPECT_NE(cache.truncate(4).message().find("must be in [0, 3]"), std::string::npos);
  const TensorView wrong{DType::kFloat32, {2, 1, N, 2, 8}, past.storage.data()};
  EXPECT_NE(cache.load(wrong).message().find("past: must be float32 (2, batch=1, heads=2, rows, head_size=16)"),
            std::string::npos);
  const TensorView null_data{DType::kFloat32, {2, 1, N, 2, H}, nullptr};
  EXPECT_EQ(cache.load(null_data).message(), "past: data pointer is null for a non-empty tensor");
  // Null output pointers are refused, not written through (and the op's own entry points refuse them too).
  EXPECT_EQ(cache.step(two.in, attrs, nullptr).message(), "qattention cache: step() needs an output tensor");
  EXPECT_EQ(cache.read(nullptr).message(), "qattention cache: read() needs an output tensor");
  EXPECT_EQ(q_attention(prompt.in, attrs, QAttentionRequest(), nullptr).message(), "outputs must not be null");
  EXPECT_EQ(q_attention_in_place(with_past.in, attrs, nullptr).message(), "outputs must not be null");
  EXPECT_EQ(cache.length(), 3);
}

}  // namespace
}  // namespace attnkit
