// attnkit tests: validate_gqa rejects each rule of spec §2.1, §3 and §8 with a message naming the
// input or attribute, and accepts the shapes ORT accepts (legacy seqlens_k shapes, shared KV, ...).
#include <gtest/gtest.h>

#include "gqa/problem.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

// First prompt: B=2, S=T=4, N=4, Nk=2, H=16.
GqaCase prompt() {
  CaseSpec s;
  s.batch = 2, s.seq = 4, s.heads = 4, s.kv_heads = 2, s.head_size = 16;
  return make_case(s);
}
// Token generation: B=2, S=1, past 5, T=6.
GqaCase decode() {
  CaseSpec s;
  s.batch = 2, s.seq = 1, s.past = 5, s.heads = 4, s.kv_heads = 2, s.head_size = 16;
  return make_case(s);
}

Status run(GqaCase& c) {
  GqaInputs in = c.inputs();
  GqaProblem p;
  return validate_gqa(in, c.attrs, c.request, &p);
}

void expect_error(GqaCase c, const std::string& fragment) {
  Status st = run(c);
  ASSERT_FALSE(st.ok()) << "expected an error containing: " << fragment;
  EXPECT_NE(st.message().find(fragment), std::string::npos) << "message: " << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "one line: " << st.message();
}

void expect_ok(GqaCase c) {
  Status st = run(c);
  EXPECT_TRUE(st.ok()) << st.message();
}

GqaCase with_quant(GqaCase c, const char* type, int bits, bool per_channel) {
  c.attrs.k_quant_type = c.attrs.v_quant_type = type;
  c.attrs.kv_cache_bit_width = bits;
  const Shape scale_shape = per_channel ? Shape{1, 2, 1, 16} : Shape{1};
  c.set("k_scale", random_tensor(DType::kFloat32, scale_shape, 11, 0.01, 0.02));
  c.set("v_scale", random_tensor(DType::kFloat32, scale_shape, 12, 0.01, 0.02));
  if (c.tensors.count("past_key")) {
    const Shape ps = c.at("past_key").shape;
    const Shape qs = {ps[0], ps[1], ps[2], bits == 4 ? ps[3] / 2 : ps[3]};
    const DType dt = bits == 4 ? DType::kUInt8 : DType::kInt8;
    c.set("past_key", random_tensor(dt, qs, 13));
    c.set("past_value", random_tensor(dt, qs, 14));
  }
  return c;
}

TEST(GqaValidate, AcceptsBaseCases) {
  expect_ok(prompt());
  expect_ok(decode());
  expect_ok(with_quant(decode(), "per_tensor", 8, false));  // uppercased like ORT
  expect_ok(with_quant(decode(), "PER_CHANNEL", 4, true));
}

TEST(GqaValidate, DerivesProblem) {
  CaseSpec s;
  s.batch = 3, s.seq = 1, s.past = 9, s.heads = 8, s.kv_heads = 2, s.head_size = 32;
  s.seqlens = {9, 4, 7};
  GqaCase c = make_case(s);
  add_rotary(&c, DType::kFloat32, 16, 8, false);
  GqaInputs in = c.inputs();
  GqaProblem p;
  ASSERT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
  EXPECT_EQ(p.group, 4);
  EXPECT_EQ(p.total, 10);
  EXPECT_EQ(p.present_len, 10);
  EXPECT_FALSE(p.first_prompt);
  EXPECT_EQ(p.total_len, (std::vector<int64_t>{10, 5, 8}));
  EXPECT_EQ(p.past_len, (std::vector<int64_t>{9, 4, 7}));
  EXPECT_EQ(p.causal_offset, (std::vector<int64_t>{9, 4, 7}));
  EXPECT_EQ(p.positions, (std::vector<int64_t>{9, 4, 7}));
  EXPECT_EQ(p.rotary_dim, 16);
  EXPECT_FLOAT_EQ(p.alpha, 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(p.cache_row_bytes, 32 * 4);
}

TEST(GqaValidate, FirstPromptPositionIdsUseOnlyTheFirstElement) {
  GqaCase c = prompt();
  add_rotary(&c, DType::kFloat32, 32, 8, true);
  c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 4}, {3, 0, 0, 0, 9, 9, 9, 9}));
  GqaInputs in = c.inputs();
  GqaProblem p;
  ASSERT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
  EXPECT_EQ(p.positions, (std::vector<int64_t>{3, 4, 5, 6, 3, 4, 5, 6}));
}

TEST(GqaValidate, Attributes) {
  { GqaCase c = prompt(); c.attrs.num_heads = 0; expect_error(c, "num_heads = 0 must be positive"); }
  { GqaCase c = prompt(); c.attrs.kv_num_heads = -1; expect_error(c, "kv_num_heads = -1"); }
  { GqaCase c = prompt(); c.attrs.kv_num_heads = 3; expect_error(c, "multiple of kv_num_heads"); }
  { GqaCase c = prompt(); c.attrs.num_heads = int64_t(1) << 62; expect_error(c, "must be at most"); }
  { GqaCase c = prompt(); c.attrs.qk_output = 3; expect_error(c, "qk_output = 3"); }
  { GqaCase c = prompt(); c.attrs.qk_output = 1; expect_error(c, "requires the output_qk output"); }
  { GqaCase c = prompt(); c.request.output_qk = true; expect_error(c, "qk_output = 0"); }
  { GqaCase c = prompt(); c.attrs.causal = 2; expect_error(c, "causal = 2 must be 0 or 1"); }
  { GqaCase c = prompt(); c.attrs.local_window_size = -2; expect_error(c, "local_window_size = -2"); }
  { GqaCase c = prompt(); c.attrs.local_window_size = 0; expect_error(c, "local_window_size = 0"); }
  {
    GqaCase c = prompt();
    c.attrs.causal = 0, c.attrs.local_window_size = 2;
    expect_error(c, "local_window_size must be -1 when causal = 0");
  }
  { GqaCase c = prompt(); c.attrs.softcap = std::nanf(""); expect_error(c, "softcap = nan must be finite (0 or less: off)"); }
  { GqaCase c = prompt(); c.attrs.scale = NAN; expect_error(c, "scale"); }
  { GqaCase c = prompt(); c.attrs.do_rotary = 2; expect_error(c, "do_rotary = 2"); }
  { GqaCase c = prompt(); c.attrs.rotary_interleaved = 5; expect_error(c, "rotary_interleaved = 5"); }
}

// sliding_window_cache = 1 (§2.9): ORT 1.30's rules, and entries that run past the cache's capacity.
TEST(GqaValidate, WindowCache) {
  const auto window = [](GqaCase c, int64_t w) {
    c.attrs.sliding_window_cache = 1, c.attrs.local_window_size = w;
    return c;
  };
  { GqaCase c = window(decode(), 3); c.attrs.sliding_window_cache = 2; expect_error(c, "sliding_window_cache = 2 must be 0 or 1"); }
  { GqaCase c = decode(); c.attrs.sliding_window_cache = 1; expect_error(c, "needs local_window_size > 0"); }
  { GqaCase c = window(prompt(), 3); expect_error(c, "needs past_key and past_value"); }
  { GqaCase c = window(decode(), 6); expect_error(c, "dim 2 = 5 (the cache capacity) must be >= local_window_size 6"); }
  {
    GqaCase c = window(decode(), 3);
    c.attrs.qk_output = 1, c.request.output_qk = true;
    expect_error(c, "qk_output = 1 is not supported with sliding_window_cache = 1");
  }
  {
    // A padded prompt would leave its padding inside the window.
    CaseSpec s;
    s.batch = 2, s.seq = 4, s.past_capacity = 6, s.heads = 4, s.kv_heads = 2, s.head_size = 16;
    s.seqlens = {3, 1};
    expect_error(window(make_case(s), 3), "does not take padded prompts");
    s.seqlens = {3, 3};
    expect_ok(window(make_case(s), 3));
  }
  {
    // Entries past the capacity are the point of a window cache: 21 and 8 tokens in 5 rows.
    CaseSpec s;
    s.batch = 2, s.seq = 1, s.past = 5, s.heads = 4, s.kv_heads = 2, s.head_size = 16, s.total = 21;
    s.seqlens = {20, 7};
    expect_ok(window(make_case(s), 3));
    expect_error(make_case(s), "seqlens_k[0] = 20 needs 20 past rows but past_key holds 5");
  }
}

TEST(GqaValidate, QuantizationAttributes) {
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_GROUP";
    expect_error(c, "k_quant_type = \"PER_GROUP\" is not supported");
  }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.attrs.v_quant_type = "PER_CHANNEL";
    expect_error(c, "must equal v_quant_type");
  }
  { GqaCase c = decode(); c.attrs.kv_cache_bit_width = 8; expect_error(c, "must be 0 when the cache is not quantized"); }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.attrs.kv_cache_bit_width = 2;
    expect_error(c, "kv_cache_bit_width = 2 must be 4 or 8");
  }
  { GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false); c.erase("v_scale"); expect_error(c, "v_scale: required"); }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.set("k_scale", random_tensor(DType::kFloat16, {1}, 3));
    expect_error(c, "k_scale: dtype must be float32");
  }
  {
    GqaCase c = with_quant(decode(), "PER_CHANNEL", 8, true);
    c.set("k_scale", random_tensor(DType::kFloat32, {16}, 3));
    expect_error(c, "k_scale shape mismatch: expected 32");
  }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.set("v_scale", random_tensor(DType::kFloat32, {2}, 3));
    expect_error(c, "v_scale shape mismatch: expected 1");
  }
  {
    GqaCase c = decode();
    c.set("k_scale", random_tensor(DType::kFloat32, {1}, 3));
    expect_error(c, "k_scale: only used with a quantized cache");
  }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 8, false);
    c.set("past_key", random_tensor(DType::kUInt8, {2, 2, 5, 16}, 3));
    expect_error(c, "past_key: dtype must be int8");
  }
  {
    GqaCase c = with_quant(decode(), "PER_TENSOR", 4, false);
    c.set("past_value", random_tensor(DType::kUInt8, {2, 2, 5, 16}, 3));
    expect_error(c, "past_value: dim 3 must equal ceil(head_size / 2) = 8, got 16");
  }
}

TEST(GqaValidate, RequiredAndRejectedInputs) {
  { GqaCase c = prompt(); c.erase("query"); expect_error(c, "query: required"); }
  { GqaCase c = prompt(); c.erase("seqlens_k"); expect_error(c, "seqlens_k: required"); }
  { GqaCase c = prompt(); c.erase("total_sequence_length"); expect_error(c, "total_sequence_length: required"); }
}

// q/k_norm_weight under ORT's WebGPU EP's rules (its CPU EP refuses them), and their shape and type.
TEST(GqaValidate, QkNormWeights) {
  auto with_norm = [](bool rotary, bool packed = false) {
    CaseSpec s;
    s.batch = 2, s.seq = 4, s.heads = 4, s.kv_heads = 2, s.head_size = 16, s.packed = packed;
    GqaCase c = make_case(s);
    if (rotary) add_rotary(&c, DType::kFloat32, 16, 8, false);
    c.set("q_norm_weight", random_tensor(DType::kFloat32, {16}, 3));
    c.set("k_norm_weight", random_tensor(DType::kFloat32, {16}, 4));
    return c;
  };
  { GqaCase c = with_norm(true); c.erase("k_norm_weight"); expect_error(c, "q_norm_weight and k_norm_weight must be provided together"); }
  { GqaCase c = with_norm(true); c.erase("q_norm_weight"); expect_error(c, "must be provided together"); }
  expect_error(with_norm(false), "q_norm_weight / k_norm_weight require do_rotary=1");
  expect_error(with_norm(true, true), "q_norm_weight / k_norm_weight are not supported when QKV is packed");
  {
    GqaCase c = with_norm(true);
    c.set("k_norm_weight", random_tensor(DType::kFloat32, {32}, 4));
    expect_error(c, "k_norm_weight: must be a 1-D tensor of shape [head_size=16], got [32]");
  }
  {
    GqaCase c = with_norm(true);
    c.set("q_norm_weight", random_tensor(DType::kFloat16, {16}, 3));
    expect_error(c, "q_norm_weight: dtype must be float32 like query, got float16");
  }
  { GqaCase c = with_norm(true); c.attrs.qk_norm_epsilon = -1e-6f; expect_error(c, "qk_norm_epsilon = -0.000001 must be finite and >= 0"); }
  { GqaCase c = with_norm(true); c.attrs.qk_norm_epsilon = NAN; expect_error(c, "qk_norm_epsilon"); }
  { GqaCase c = with_norm(true); c.attrs.qk_norm_epsilon = 0.0f; expect_ok(c); }
}

TEST(GqaValidate, StorageSanity) {
  {
    GqaCase c = prompt();
    c.raw_views["key"] = TensorView{DType::kFloat32, {2, 4, 32}, nullptr};
    c.tensors.erase("key");
    expect_error(c, "key: data pointer is null for a non-empty tensor");
  }
  {
    GqaCase c = prompt();
    c.raw_views["query"] = TensorView{DType::kFloat32, {2, -4, 64}, c.at("query").bytes.data()};
    expect_error(c, "query: shape [2, -4, 64] has a negative dimension");
  }
  {
    // Never read: the element count overflows before any access.
    static const float fake = 0.0f;
    GqaCase c = decode();
    c.raw_views["past_key"] = TensorView{DType::kFloat32, {int64_t(1) << 40, int64_t(1) << 30, 2, 16}, &fake};
    expect_error(c, "past_key: element count of shape");
  }
}

TEST(GqaValidate, QueryKeyValueShapes) {
  { GqaCase c = prompt(); c.at("query").shape = {2, 4 * 64}; expect_error(c, "query: rank must be 3"); }
  {
    GqaCase c = prompt();
    c.set("query", random_tensor(DType::kInt32, {2, 4, 64}, 1));
    expect_error(c, "query: dtype must be float32, float16 or bfloat16, got int32");
  }
  {
    GqaCase c = prompt();
    c.set("query", random_tensor(DType::kFloat32, {0, 4, 64}, 1));
    expect_error(c, "query: dim 0 (batch_size) must be positive");
  }
  { GqaCase c = prompt(); c.erase("key"); expect_error(c, "value: must be absent when key is absent"); }
  { GqaCase c = prompt(); c.erase("value"); expect_error(c, "value: required when key is given"); }
  {
    GqaCase c = prompt();
    c.erase("key"), c.erase("value");
    c.set("query", random_tensor(DType::kFloat32, {2, 4, 100}, 1));
    expect_error(c, "packed QKV dim 2 = 100 must be a multiple of num_heads + 2 * kv_num_heads = 8");
  }
  {
    GqaCase c = prompt();
    c.set("query", random_tensor(DType::kFloat32, {2, 4, 66}, 1));
    expect_error(c, "query: dim 2 = 66 must be a multiple of num_heads = 4");
  }
  {
    GqaCase c = prompt();
    c.set("key", random_tensor(DType::kFloat16, {2, 4, 32}, 1));
    expect_error(c, "key: dtype must be float32 like query, got float16");
  }
  {
    GqaCase c = prompt();
    c.set("value", random_tensor(DType::kFloat32, {1, 4, 32}, 1));
    expect_error(c, "value: dim 0 must equal batch_size 2, got 1");
  }
  {
    GqaCase c = prompt();
    c.set("key", random_tensor(DType::kFloat32, {2, 4, 48}, 1));
    expect_error(c, "key: dim 2 must equal kv_num_heads * head_size = 32, got 48");
  }
  {
    GqaCase c = prompt();
    c.set("value", random_tensor(DType::kFloat32, {2, 3, 32}, 1));
    expect_error(c, "value: dim 1 must equal key dim 1 4, got 3");
  }
  {
    GqaCase c = prompt();
    c.set("key", random_tensor(DType::kFloat32, {2, 3, 32}, 1));  // only the key is off: named, not the value
    expect_error(c, "key: dim 1 must equal sequence_length 4");
  }
  {
    CaseSpec s;
    s.heads = 2, s.kv_heads = 1, s.head_size = 12;
    expect_error(make_case(s), "head_size = 12 must be a positive multiple of 8");
  }
}

TEST(GqaValidate, PastShapes) {
  { GqaCase c = decode(); c.erase("past_value"); expect_error(c, "past_key and past_value must be given together"); }
  { GqaCase c = decode(); c.at("past_key").shape = {2, 2, 80}; expect_error(c, "past_key: rank must be 4"); }
  {
    GqaCase c = decode();
    // A float16 cache under float32 activations is allowed, but then past_value must match it.
    c.set("past_key", random_tensor(DType::kFloat16, {2, 2, 5, 16}, 1));
    expect_error(c, "past_value: dtype must be float16");
  }
  {
    GqaCase c = decode();
    c.set("past_key", random_tensor(DType::kInt32, {2, 2, 5, 16}, 1));
    expect_error(c, "past_key: dtype must be float32");
  }
  {
    GqaCase c = decode();
    c.set("past_value", random_tensor(DType::kFloat32, {2, 1, 10, 16}, 1));
    expect_error(c, "past_value: dim 1 must equal kv_num_heads 2, got 1");
  }
  {
    GqaCase c = decode();
    c.set("past_key", random_tensor(DType::kFloat32, {2, 2, 5, 8}, 1));
    expect_error(c, "past_key: dim 3 must equal head_size 16, got 8");
  }
  {
    GqaCase c = decode();
    c.set("past_value", random_tensor(DType::kFloat32, {2, 2, 6, 16}, 1));
    expect_error(c, "past_value: dim 2 must equal past_key dim 2 5, got 6");
  }
}

TEST(GqaValidate, SeqlensAndTotal) {
  {
    GqaCase c = prompt();
    c.set("seqlens_k", int_tensor<int64_t>(DType::kInt64, {2}, {3, 3}));
    expect_error(c, "seqlens_k: dtype must be int32");
  }
  {
    GqaCase c = prompt();
    c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {}, {3}));
    expect_error(c, "seqlens_k must be at least 1D");
  }
  {
    GqaCase c = prompt();
    c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {3}, {3, 3, 3}));
    expect_error(c, "seqlens_k must have batch_size = 2 elements");
  }
  {
    CaseSpec s;
    s.batch = 4, s.seq = 1;
    GqaCase c = make_case(s);
    c.at("seqlens_k").shape = {2, 2};
    expect_error(c, "seqlens_k has unexpected shape [2, 2]");
    c.at("seqlens_k").shape = {4, 1};
    expect_ok(c);
    c.at("seqlens_k").shape = {1, 4};
    expect_ok(c);
  }
  {
    GqaCase c = prompt();
    c.set("total_sequence_length", int_tensor<int64_t>(DType::kInt64, {}, {4}));
    expect_error(c, "total_sequence_length: dtype must be int32");
  }
  {
    GqaCase c = prompt();
    c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {2}, {4, 4}));
    expect_error(c, "total_sequence_length must be a scalar or a 1-D tensor of one element");
  }
  {
    GqaCase c = prompt();
    c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {1}, {0}));
    expect_error(c, "total_sequence_length must be positive");
  }
  {
    GqaCase c = decode();
    c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {1}, {1 << 27}));
    expect_error(c, "total_sequence_length = 134217728 exceeds the supported maximum");
  }
  {
    GqaCase c = decode();
    c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {2}, {5, -1}));
    expect_error(c, "seqlens_k[1] = -1 is out of range [0, 6)");
  }
  {
    CaseSpec s;
    s.seq = 1, s.past = 8, s.total = 4;  // present length max(4, 8) = 8
    s.seqlens = {8};
    expect_error(make_case(s), "seqlens_k[0] = 8 is out of range [0, 8)");
  }
  {
    CaseSpec s;
    s.seq = 1, s.past = 8, s.total = 4;
    s.seqlens = {5};
    expect_error(make_case(s), "seqlens_k[0] = 5 exceeds total_sequence_length - 1 = 3");
  }
}

TEST(GqaValidate, Phases) {
  {
    CaseSpec s;  // chunked prefill needs batch 1
    s.batch = 2, s.seq = 3, s.past = 4;
    expect_error(make_case(s), "requires batch_size 1, got 2");
  }
  {
    CaseSpec s;
    s.batch = 1, s.seq = 3, s.past = 4;
    expect_ok(make_case(s));
  }
  {
    CaseSpec s;  // ORT's NonPromptSeqlensKUnderflow: seqlens 1, total 5, S 3
    s.seq = 3, s.past = 4, s.total = 5;
    s.seqlens = {1};
    expect_error(make_case(s), "seqlens_k[0] = 1 is too small for sequence_length 3");
  }
  {
    CaseSpec s;  // token generation needing 5 past rows with a 3-row past buffer
    s.seq = 1, s.past = 3, s.total = 6;
    expect_error(make_case(s), "seqlens_k[0] = 5 needs 5 past rows but past_key holds 3");
  }
  {
    CaseSpec s;
    s.seq = 1, s.past = 0, s.total = 6;
    expect_error(make_case(s), "(no past_key given)");
  }
  {
    GqaCase c = decode();
    c.set("query", random_tensor(DType::kFloat32, {2, 0, 64}, 1));
    c.set("key", random_tensor(DType::kFloat32, {2, 0, 32}, 1));
    c.set("value", random_tensor(DType::kFloat32, {2, 0, 32}, 1));
    expect_error(c, "sequence_length must be positive");
  }
}

TEST(GqaValidate, SharedKv) {
  GqaCase c = decode();
  c.set("key", random_tensor(DType::kFloat32, {2, 0, 32}, 1));
  c.set("value", random_tensor(DType::kFloat32, {2, 0, 32}, 1));
  {
    GqaCase bad = c;
    bad.erase("past_key"), bad.erase("past_value");
    expect_error(bad, "shared KV) requires past_key and past_value");
  }
  {
    GqaCase bad = c;  // total 6 > past 5
    expect_error(bad, "past_key: dim 2 = 5 must be >= total_sequence_length 6");
  }
  c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {}, {5}));
  c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {2}, {4, 2}));
  GqaInputs in = c.inputs();
  GqaProblem p;
  ASSERT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
  EXPECT_TRUE(p.shared_kv);
  EXPECT_EQ(p.past_len, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(p.causal_offset, (std::vector<int64_t>{4, 2}));
}

TEST(GqaValidate, Rotary) {
  { GqaCase c = prompt(); add_rotary(&c, DType::kFloat32, 8, 8, false); c.erase("sin_cache"); expect_error(c, "must be given together"); }
  { GqaCase c = prompt(); add_rotary(&c, DType::kFloat32, 8, 8, false); c.attrs.do_rotary = 0; expect_error(c, "cos_cache: given but do_rotary = 0"); }
  { GqaCase c = prompt(); c.attrs.do_rotary = 1; expect_error(c, "cos_cache: required when do_rotary = 1"); }
  {
    CaseSpec s;
    s.head_size = 8;
    GqaCase c = make_case(s);
    add_rotary(&c, DType::kFloat32, 8, 8, false);
    expect_error(c, "head_size = 8 must be a multiple of 16 when do_rotary = 1");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 8, 8, false);
    c.at("cos_cache").shape = {64}, c.at("sin_cache").shape = {64};
    expect_error(c, "cos_cache: rank must be 2");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat16, 8, 8, false);
    expect_error(c, "cos_cache: dtype must be float32 like query, got float16");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 8, 8, false);
    c.set("sin_cache", random_tensor(DType::kFloat32, {9, 8}, 1));
    expect_error(c, "sin_cache: shape [9, 8] must equal cos_cache shape [8, 8]");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 3, 8, false);
    expect_error(c, "cos_cache: dim 0 = 3 must be >= total_sequence_length 4");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 8, 12, false);
    expect_error(c, "cos_cache: dim 1 = 12 must be a positive multiple of 8");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 8, 16, false);  // H = 16 allows at most 8
    expect_error(c, "at most head_size / 2 = 8");
  }
}

TEST(GqaValidate, PositionIds) {
  auto base = [] {
    GqaCase c = decode();
    add_rotary(&c, DType::kFloat32, 16, 8, false);
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 1}, {5, 3}));
    return c;
  };
  expect_ok(base());
  { GqaCase c = base(); c.at("position_ids").shape = {2}; expect_error(c, "position_ids: rank must be 2"); }
  {
    GqaCase c = base();
    c.set("position_ids", int_tensor<int32_t>(DType::kInt32, {2, 1}, {5, 3}));
    expect_error(c, "position_ids: dtype must be int64");
  }
  {
    GqaCase c = base();
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {1, 2}, {5, 3}));
    expect_error(c, "position_ids: dim 0 must equal batch_size 2, got 1");
  }
  {
    GqaCase c = base();
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 0}, {}));
    expect_error(c, "position_ids: dim 1 must be >= sequence_length 1");
  }
  {
    GqaCase c = base();
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 1}, {5, -1}));
    expect_error(c, "position_ids[1][0] = -1 is out of range [0, 16)");
  }
  {
    GqaCase c = base();
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 1}, {16, 0}));
    expect_error(c, "position_ids[0][0] = 16 is out of range [0, 16)");
  }
  {
    GqaCase c = prompt();  // first prompt: position_ids[0][0] + s must stay inside the cache
    add_rotary(&c, DType::kFloat32, 8, 8, false);
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 4}, {5, 0, 0, 0, 0, 0, 0, 0}));
    expect_error(c, "position_ids[0][0] + 3 = 8 is out of range [0, 8)");
  }
  {
    GqaCase c = prompt();
    add_rotary(&c, DType::kFloat32, 8, 8, false);
    c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {2, 4}, {INT64_MAX, 0, 0, 0, 0, 0, 0, 0}));
    expect_error(c, "position_ids[0][0] = 9223372036854775807 is out of range");
  }
}

TEST(GqaValidate, AttentionBias) {
  auto with_bias = [](Shape shape, DType dtype = DType::kFloat32) {
    GqaCase c = decode();
    c.set("attention_bias", random_tensor(dtype, shape, 5));
    return c;
  };
  expect_ok(with_bias({2, 4, 1, 6}));
  expect_ok(with_bias({1, 1, 1, 6}));
  expect_error(with_bias({2, 4, 6}), "attention_bias: rank must be 4");
  expect_error(with_bias({2, 4, 1, 6}, DType::kFloat16), "attention_bias: dtype must be float32");
  expect_error(with_bias({3, 4, 1, 6}), "attention_bias: dim 0 must be 1 or batch_size 2, got 3");
  expect_error(with_bias({2, 2, 1, 6}), "attention_bias: dim 1 must be 1 or num_heads 4, got 2");
  expect_error(with_bias({2, 4, 2, 6}), "attention_bias: dim 2 must equal sequence_length 1, got 2");
  expect_error(with_bias({2, 4, 1, 5}), "attention_bias: dim 3 must equal total_sequence_length 6, got 5");
}

TEST(GqaValidate, HeadSink) {
  { GqaCase c = decode(); c.set("head_sink", random_tensor(DType::kFloat32, {4}, 1)); expect_ok(c); }
  { GqaCase c = decode(); c.set("head_sink", random_tensor(DType::kFloat32, {1, 4}, 1)); expect_error(c, "head_sink: rank must be 1"); }
  { GqaCase c = decode(); c.set("head_sink", random_tensor(DType::kFloat16, {4}, 1)); expect_error(c, "head_sink: dtype must be float32"); }
  { GqaCase c = decode(); c.set("head_sink", random_tensor(DType::kFloat32, {2}, 1)); expect_error(c, "head_sink: dim 0 must equal num_heads 4, got 2"); }
}

// A token over a static cache of T rows (ORT's shared buffer, never read here: its data pointer is fake).
GqaCase over_static_cache(int64_t heads, int64_t kv_heads, int64_t total) {
  static const float fake = 0.0f;
  CaseSpec s;
  s.heads = heads, s.kv_heads = kv_heads, s.total = total;
  s.seqlens = {0};
  GqaCase c = make_case(s);
  for (const char* name : {"past_key", "past_value"}) {
    c.raw_views[name] = TensorView{DType::kFloat32, {1, kv_heads, total, s.head_size}, &fake};
  }
  return c;
}

TEST(GqaValidate, HugeOutputsAreRefusedBeforeAllocation) {
  {
    // output_qk (1, 4096, 1, 2^21) float32 = 32 GiB; the inputs that are read are small.
    GqaCase c = over_static_cache(4096, 1, int64_t(1) << 21);
    c.attrs.qk_output = 1;
    c.request.output_qk = true;
    expect_error(c, "output_qk: 34359738368 bytes exceeds the 16 GiB limit");
  }
  {
    // present (1, 1024, 2^26, 8) float32 = 2^41 bytes.
    GqaCase c = over_static_cache(1024, 1024, int64_t(1) << 26);
    expect_error(c, "present_key: 2199023255552 bytes exceeds the 16 GiB limit");
  }
}

}  // namespace
}  // namespace attnkit
