// attnkit tests: the double-precision GQA reference against hand-computed results — the oracle has to
// be right on its own before it can judge the op. Expected values are derived in each test's comment.
#include <gtest/gtest.h>

#include <cmath>

#include "gqa_reference.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;
using reference::GqaReferenceResult;

GqaReferenceResult run_ok(GqaCase& c) {
  GqaInputs in = c.inputs();
  GqaReferenceResult r;
  Status st = reference::group_query_attention(in, c.attrs, c.request, &r);
  EXPECT_TRUE(st.ok()) << st.message();
  return r;
}

float f32_at(const OwnedTensor& t, int64_t i) { return reference::load_float(t.bytes.data(), t.dtype, i); }

// Zero query: every visible score is 0, so softmax is uniform over the visible keys.
GqaCase zero_query_prompt(int64_t seq, int64_t head_size = 8) {
  CaseSpec s;
  s.seq = seq, s.heads = 2, s.kv_heads = 1, s.head_size = head_size;
  GqaCase c = make_case(s);
  c.set("query", zero_tensor(DType::kFloat32, {1, seq, 2 * head_size}));
  return c;
}

// Mean of value rows [lo, hi) at channel d (value is (1, S, H) with one kv head).
double mean_v(GqaCase& c, int64_t lo, int64_t hi, int64_t d, int64_t h = 8) {
  double sum = 0;
  for (int64_t j = lo; j < hi; ++j) sum += f32_at(c.at("value"), j * h + d);
  return sum / static_cast<double>(hi - lo);
}

TEST(GqaReference, SingleKeyOutputsItsValue) {
  GqaCase c = make_case(CaseSpec{});  // S = T = 1, N = 2, Nk = 1, H = 8
  GqaReferenceResult r = run_ok(c);
  ASSERT_EQ(r.output_shape, (Shape{1, 1, 16}));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(r.output[h * 8 + d], f32_at(c.at("value"), d));
  // present = the new key/value rows verbatim (fp32 cache, no rotary).
  EXPECT_EQ(r.present_key.shape, (Shape{1, 1, 1, 8}));
  EXPECT_EQ(std::memcmp(r.present_key.storage.data(), c.at("key").bytes.data(), 32), 0);
}

TEST(GqaReference, EqualScoresAverageTheCausalPrefix) {
  GqaCase c = zero_query_prompt(4);
  GqaReferenceResult r = run_ok(c);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t d = 0; d < 8; ++d) EXPECT_NEAR(r.output[i * 16 + 8 + d], mean_v(c, 0, i + 1, d), 1e-15);
}

TEST(GqaReference, LocalWindowSeesWKeysIncludingTheCurrentOne) {
  GqaCase c = zero_query_prompt(4);
  c.attrs.local_window_size = 2;
  GqaReferenceResult r = run_ok(c);
  // Row 3 sees keys {2, 3}; row 0 sees {0}.
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_NEAR(r.output[3 * 16 + d], mean_v(c, 2, 4, d), 1e-15);
    EXPECT_NEAR(r.output[0 * 16 + d], mean_v(c, 0, 1, d), 1e-15);
  }
}

TEST(GqaReference, NonCausalRowsSeeEveryValidKey) {
  GqaCase c = zero_query_prompt(4);
  c.attrs.causal = 0;
  GqaReferenceResult r = run_ok(c);
  for (int64_t d = 0; d < 8; ++d) EXPECT_NEAR(r.output[0 * 16 + d], mean_v(c, 0, 4, d), 1e-15);
}

TEST(GqaReference, SinkTakesItsShareOfTheMass) {
  // One key with score 0 and a sink logit 0: p = e^0 / (e^0 + e^0) = 1/2, so out = v / 2.
  GqaCase c = zero_query_prompt(1);
  c.set("head_sink", float_tensor(DType::kFloat32, {2}, {0.0f, std::log(3.0f)}));
  GqaReferenceResult r = run_ok(c);
  for (int64_t d = 0; d < 8; ++d) {
    const double v = f32_at(c.at("value"), d);
    EXPECT_NEAR(r.output[d], v / 2, 1e-15);
    EXPECT_NEAR(r.output[8 + d], v / (1 + 3.0f), 1e-7);  // sink logit log 3: p = 1 / (1 + 3)
  }
  // smooth_softmax is a sink of 0 for every head.
  c.erase("head_sink");
  c.attrs.smooth_softmax = 1;
  GqaReferenceResult s = run_ok(c);
  for (int64_t d = 0; d < 16; ++d) EXPECT_NEAR(s.output[d], f32_at(c.at("value"), d % 8) / 2, 1e-15);
}

TEST(GqaReference, SoftcapOnScaledScoreThenBias) {
  // q = k = ones(8): dot 8, alpha 1/sqrt(8) -> score sqrt(8); softcap 2 -> 2 tanh(sqrt(8)/2); bias +0.5.
  CaseSpec s;
  GqaCase c = make_case(s);
  c.set("query", float_tensor(DType::kFloat32, {1, 1, 16}, std::vector<float>(16, 1.0f)));
  c.set("key", float_tensor(DType::kFloat32, {1, 1, 8}, std::vector<float>(8, 1.0f)));
  c.set("attention_bias", float_tensor(DType::kFloat32, {1, 1, 1, 1}, {0.5f}));
  c.attrs.softcap = 2.0f;
  c.attrs.qk_output = 1;
  c.request.output_qk = true;
  GqaReferenceResult r = run_ok(c);
  ASSERT_EQ(r.output_qk_shape, (Shape{1, 2, 1, 1}));
  const double alpha = 1.0f / std::sqrt(8.0f);  // ORT's float alpha
  const double expected = 2.0 * std::tanh(alpha * 8.0 / 2.0) + 0.5;
  EXPECT_NEAR(r.output_qk[0], expected, 1e-14);
  EXPECT_NEAR(r.output_qk[1], expected, 1e-14);
}

TEST(GqaReference, QkOutputMasksAndPadsWithZero) {
  // Ragged decode: B = 2, T = 4, entry 1 has T_b = 2. After softmax: uniform 1/T_b over the valid keys.
  CaseSpec s;
  s.batch = 2, s.seq = 1, s.past = 3, s.seqlens = {3, 1};
  GqaCase c = make_case(s);
  c.set("query", zero_tensor(DType::kFloat32, {2, 1, 16}));
  c.attrs.qk_output = 2;
  c.request.output_qk = true;
  GqaReferenceResult r = run_ok(c);
  ASSERT_EQ(r.output_qk_shape, (Shape{2, 2, 1, 4}));
  for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(r.output_qk[j], 0.25, 1e-15);
  const double entry1[4] = {0.5, 0.5, 0.0, 0.0};
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(r.output_qk[1 * 2 * 4 + j], entry1[j]);
}

TEST(GqaReference, RaggedPresentAppendsAtEachEntrysLength) {
  // B = 2, past buffer 3, S = 1, T = 4; entry 1 has T_b = 2: it copies 1 past row, writes its new row
  // at row 1, and rows 2..3 stay zero (past rows beyond P_b are not copied).
  CaseSpec s;
  s.batch = 2, s.seq = 1, s.past = 3, s.seqlens = {3, 1};
  GqaCase c = make_case(s);
  GqaReferenceResult r = run_ok(c);
  ASSERT_EQ(r.present_value.shape, (Shape{2, 1, 4, 8}));
  const float* pv = r.present_value.as<float>();
  for (int64_t d = 0; d < 8; ++d) {
    EXPECT_EQ(pv[0 * 8 + d], f32_at(c.at("past_value"), 0 * 8 + d));
    EXPECT_EQ(pv[3 * 8 + d], f32_at(c.at("value"), d));                 // entry 0: row 3 = new
    EXPECT_EQ(pv[(4 + 0) * 8 + d], f32_at(c.at("past_value"), (3 + 0) * 8 + d));
    EXPECT_EQ(pv[(4 + 1) * 8 + d], f32_at(c.at("value"), 8 + d));       // entry 1: row 1 = new
    EXPECT_EQ(pv[(4 + 2) * 8 + d], 0.0f);
    EXPECT_EQ(pv[(4 + 3) * 8 + d], 0.0f);
  }
}

// cos/sin with position 0 = identity and position 1 = a quarter turn (cos 0, sin 1).
void add_quarter_turn(GqaCase* c, int64_t half) {
  std::vector<float> cs(2 * half, 1.0f), sn(2 * half, 0.0f);
  for (int64_t i = 0; i < half; ++i) cs[half + i] = 0.0f, sn[half + i] = 1.0f;
  c->set("cos_cache", float_tensor(DType::kFloat32, {2, half}, cs));
  c->set("sin_cache", float_tensor(DType::kFloat32, {2, half}, sn));
  c->attrs.do_rotary = 1;
}

TEST(GqaReference, RotaryQuarterTurnSplitInterleavedAndPartial) {
  // Decode at position 1, H = 32, rotary dim 16 (partial): split-half gives y[i] = -x[i+8],
  // y[i+8] = x[i] for i < 8; interleaved y[2i] = -x[2i+1], y[2i+1] = x[2i]; dims 16..31 unchanged.
  for (int interleaved = 0; interleaved < 2; ++interleaved) {
    CaseSpec s;
    s.seq = 1, s.past = 1, s.head_size = 32;
    GqaCase c = make_case(s);
    add_quarter_turn(&c, 8);
    c.attrs.rotary_interleaved = interleaved;
    GqaReferenceResult r = run_ok(c);
    const float* row = r.present_key.as<float>() + 32;  // row 1 = the new key
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + 8;
      EXPECT_EQ(row[a], -f32_at(c.at("key"), b));
      EXPECT_EQ(row[b], f32_at(c.at("key"), a));
    }
    for (int64_t d = 16; d < 32; ++d) EXPECT_EQ(row[d], f32_at(c.at("key"), d));
    // The past row is copied, never rotated.
    for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(r.present_key.as<float>()[d], f32_at(c.at("past_key"), d));
  }
}

TEST(GqaReference, QuantizeRoundsHalfToEvenAndClamps) {
  // scale 0.5 -> inv 2 exactly: x * 2 = {1, -2, 2.5, 3.5, -8, 10, -12, 0}.
  const float x[8] = {0.5f, -1.0f, 1.25f, 1.75f, -4.0f, 5.0f, -6.0f, 0.0f};
  const float scales[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  uint8_t s8[8], s4[4];
  reference::quantize_row(x, scales, 8, 8, s8);
  const int8_t want8[8] = {1, -2, 2, 4, -8, 10, -12, 0};
  for (int d = 0; d < 8; ++d) EXPECT_EQ(static_cast<int8_t>(s8[d]), want8[d]) << d;
  // int4: q = {1, -2, 2, 4, -8, 7, -8, 0} (10 and -12 clamp); bytes (q_even + 8) | (q_odd + 8) << 4.
  reference::quantize_row(x, scales, 8, 4, s4);
  EXPECT_EQ(s4[0], 0x69);
  EXPECT_EQ(s4[1], 0xCA);
  EXPECT_EQ(s4[2], 0xF0);
  EXPECT_EQ(s4[3], 0x80);
  EXPECT_EQ(reference::dequantize_value(s4, DType::kUInt8, 4, 3, 0.5f), 2.0);
  EXPECT_EQ(reference::dequantize_value(s4, DType::kUInt8, 4, 4, 0.5f), -4.0);
  EXPECT_EQ(reference::quantize_value(300.0f, 1.0f, 8), 127);
  EXPECT_EQ(reference::quantize_value(-300.0f, 1.0f, 8), -128);
  EXPECT_EQ(reference::quantize_value(3.0f, 0.0f, 8), 3);  // scale 0 is treated as 1
  // ORT's clamp, std::max(lo, std::min(hi, q)), takes NaN to the upper bound (onnxruntime-node and -web 1.30 agree).
  EXPECT_EQ(reference::quantize_value(NAN, 1.0f, 8), 127);
  EXPECT_EQ(reference::quantize_value(NAN, 1.0f, 4), 7);
}

TEST(GqaReference, QuantizedCacheIsAttendedInStoredForm) {
  // S = T = 1 with an int8 per-tensor cache: the output is the dequantized value row, not the input.
  for (int bits : {8, 4}) {
    GqaCase c = make_case(CaseSpec{});
    c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_TENSOR";
    c.attrs.kv_cache_bit_width = bits;
    const float scale = bits == 8 ? 1.0f / 127 : 1.0f / 7;
    c.set("k_scale", float_tensor(DType::kFloat32, {1}, {scale}));
    c.set("v_scale", float_tensor(DType::kFloat32, {1}, {scale}));
    GqaReferenceResult r = run_ok(c);
    ASSERT_EQ(r.present_value.dtype, bits == 8 ? DType::kInt8 : DType::kUInt8);
    for (int64_t d = 0; d < 8; ++d) {
      const double q = reference::quantize_value(f32_at(c.at("value"), d), scale, bits);
      EXPECT_EQ(r.output[d], q * static_cast<double>(scale)) << "bits " << bits << " d " << d;
      EXPECT_EQ(r.output[8 + d], q * static_cast<double>(scale));
    }
  }
}

TEST(GqaReference, HalfPrecisionCacheRoundsNewRows) {
  CaseSpec s;
  s.dtype = DType::kFloat16;
  s.seq = 1, s.past = 2;
  GqaCase c = make_case(s);
  GqaReferenceResult r = run_ok(c);
  ASSERT_EQ(r.present_key.dtype, DType::kFloat16);
  ASSERT_EQ(r.present_key.shape, (Shape{1, 1, 3, 8}));
  EXPECT_EQ(std::memcmp(r.present_key.storage.data() + 2 * 16, c.at("key").bytes.data(), 16), 0);
}

}  // namespace
}  // namespace attnkit
