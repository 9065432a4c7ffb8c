// attnkit tests: non-finite logits. Fully masked query rows (every visible key biased to -inf, or to the lowest
// float that exporters use as finfo.min) give probability 0 and an output of 0 on every path, dtype, cache type and
// thread count, as ORT's fp32 and quantized flash paths do; other rows stay on the reference. Sinks of -inf are no
// sink at all, and +inf or NaN sinks give NaN rows, on every path as in the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "gqa_reference.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

struct MaskedCase {
  const char* name;
  int64_t seq, past, heads, kv_heads, head_size;
  DType dtype = DType::kFloat32;
  int bits = 0;  // quantized cache (PER_CHANNEL) when 8 or 4
  float softcap = 0.0f;
  bool sink = false;
  int64_t window = -1;
  int qk_output = 0;
};

// Row (h, i) of the bias: by (h + i) % 4 unmasked, all -inf, all lowest-float, or -inf on the keys it sees
// (0 .. past + i) with finite values on the causally hidden columns after them.
enum RowMask { kOpen, kAllNegInf, kAllLowest, kVisibleNegInf };
RowMask row_mask(int64_t h, int64_t i) { return static_cast<RowMask>((h + i) % 4); }

GqaCase build(const MaskedCase& m) {
  CaseSpec s;
  s.seq = m.seq, s.past = m.past, s.heads = m.heads, s.kv_heads = m.kv_heads, s.head_size = m.head_size;
  s.dtype = m.dtype, s.seed = 31;
  GqaCase c = make_case(s);
  const int64_t total = m.past + m.seq;
  std::vector<float> bias(static_cast<size_t>(m.heads * m.seq * total));
  SplitMix rng(5);
  for (int64_t h = 0; h < m.heads; ++h)
    for (int64_t i = 0; i < m.seq; ++i)
      for (int64_t j = 0; j < total; ++j) {
        float v = static_cast<float>(rng.uniform(-2.0, 2.0));
        const RowMask mask = row_mask(h, i);
        if (mask == kAllNegInf || (mask == kVisibleNegInf && j <= m.past + i)) v = -INFINITY;
        if (mask == kAllLowest) v = std::numeric_limits<float>::lowest();
        bias[static_cast<size_t>((h * m.seq + i) * total + j)] = v;
      }
  c.set("attention_bias", float_tensor(m.dtype, {1, m.heads, m.seq, total}, bias));
  GqaAttributes& a = c.attrs;
  a.softcap = m.softcap;
  a.local_window_size = m.window;
  if (m.sink) c.set("head_sink", random_tensor(m.dtype, {m.heads}, 8));
  if (m.qk_output) a.qk_output = m.qk_output, c.request.output_qk = true;
  if (m.bits) {
    a.k_quant_type = a.v_quant_type = "PER_CHANNEL";
    a.kv_cache_bit_width = m.bits;
    const double qmax = m.bits == 8 ? 127.0 : 7.0;
    const Shape scale_shape{1, m.kv_heads, 1, m.head_size};
    c.set("k_scale", random_tensor(DType::kFloat32, scale_shape, 9, 0.8 / qmax, 1.2 / qmax));
    c.set("v_scale", random_tensor(DType::kFloat32, scale_shape, 10, 0.8 / qmax, 1.2 / qmax));
    if (m.past > 0) {
      const Shape ps{1, m.kv_heads, m.past, m.bits == 4 ? m.head_size / 2 : m.head_size};
      const DType dt = m.bits == 4 ? DType::kUInt8 : DType::kInt8;
      c.set("past_key", random_tensor(dt, ps, 3));
      c.set("past_value", random_tensor(dt, ps, 4));
    }
  }
  return c;
}

// The first `defined(i)` elements of each masked row (h, i) of `data` are exactly 0 (rows of `row` elements, laid
// out as [i][h] for the output and [h][i] for output_qk).
template <class Defined>
void expect_masked_rows_zero(const MaskedCase& m, const void* data, int64_t row, bool head_major, Defined defined,
                             const std::string& what) {
  for (int64_t h = 0; h < m.heads; ++h)
    for (int64_t i = 0; i < m.seq; ++i) {
      if (row_mask(h, i) == kOpen) continue;
      const int64_t r = head_major ? h * m.seq + i : i * m.heads + h;
      for (int64_t k = 0; k < defined(i); ++k)
        ASSERT_EQ(reference::load_float(data, m.dtype, r * row + k), 0.0f)
            << what << " head " << h << " row " << i << " element " << k;
    }
}

void check(const MaskedCase& m) {
  SCOPED_TRACE(m.name);
  GqaCase c = build(m);
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
  const int64_t total = m.past + m.seq;
  for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
    SCOPED_TRACE(path == AttentionPath::kNaive ? "naive" : "flash");
    GqaOutputs one, three;
    ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three));
    const auto whole_row = [&](int64_t) { return m.head_size; };
    expect_masked_rows_zero(m, one.output.storage.data(), m.head_size, false, whole_row, "output");
    expect_close(ref.output, one.output.storage.data(), m.dtype, m.head_size, "output");
    if (m.qk_output == 2) {
      // A row's probabilities are defined over the keys up to its own position.
      const auto seen = [&](int64_t i) { return m.past + i + 1; };
      expect_masked_rows_zero(m, one.output_qk.storage.data(), total, true, seen, "output_qk");
    }
  }
}

TEST(GqaMaskedRows, PromptFp32) { check({"prompt fp32", 37, 0, 8, 2, 64}); }
TEST(GqaMaskedRows, ChunkAfterPastInt8) { check({"chunk int8", 9, 40, 4, 2, 32, DType::kFloat32, 8}); }
TEST(GqaMaskedRows, PromptFp16Int4) { check({"prompt fp16 int4", 12, 0, 4, 1, 64, DType::kFloat16, 4}); }
TEST(GqaMaskedRows, Softcap) { check({"softcap", 11, 5, 4, 2, 32, DType::kFloat32, 0, 2.0f}); }
TEST(GqaMaskedRows, SinkAndWindow) { check({"sink window", 16, 3, 4, 4, 16, DType::kFloat32, 0, 0.0f, true, 6}); }
TEST(GqaMaskedRows, QkAfterSoftmax) { check({"qk after", 6, 2, 4, 2, 16, DType::kFloat32, 0, 0.0f, false, -1, 2}); }
// One query row over a cache long enough for split-KV decoding (several chunks at 3 threads).
TEST(GqaMaskedRows, SplitKvDecode) { check({"decode", 1, 1500, 8, 1, 64}); }
TEST(GqaMaskedRows, SingleKey) { check({"single key", 1, 0, 4, 2, 8}); }

// A NaN score among masked ones is not a masked row: the NaN reaches the output, as in the reference.
TEST(GqaMaskedRows, NaNAmongMaskedScoresStaysNaN) {
  const MaskedCase m{"nan", 5, 0, 4, 2, 16};
  GqaCase c = build(m);
  std::vector<float> bias(static_cast<size_t>(m.heads * m.seq * m.seq), 0.0f);
  for (int64_t j = 0; j < m.seq; ++j) bias[static_cast<size_t>(3 * m.seq + j)] = j == 1 ? NAN : -INFINITY;  // h 0, i 3
  c.set("attention_bias", float_tensor(m.dtype, {1, m.heads, m.seq, m.seq}, bias));
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
  const int64_t row = 3 * m.heads * m.head_size;  // output row (i 3, h 0)
  EXPECT_TRUE(std::isnan(ref.output[static_cast<size_t>(row)]));
  for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
    GqaOutputs one, three;
    ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three));
    for (int64_t d = 0; d < m.head_size; ++d)
      EXPECT_TRUE(std::isnan(reference::load_float(one.output.storage.data(), m.dtype, row + d))) << d;
  }
}

// A decode step's NaN score reaches the output on every path and thread count wherever it falls, also as the first
// score of a block or split-KV chunk (where reduce_max returns it): head 0 NaN at key 0, head 1 too with -inf on
// keys 1-199, head 2 a NaN query (every score NaN), head 3 NaN at key 640 (a 64-key block's first); head 4 is finite.
TEST(GqaMaskedRows, NaNScoresInDecodeStayNaN) {
  for (int bits : {0, 8}) {
    const MaskedCase m{"nan decode", 1, 1500, 5, 1, 64, DType::kFloat32, bits};
    SCOPED_TRACE(bits);
    GqaCase c = build(m);
    const int64_t total = m.past + 1, H = m.head_size;
    std::vector<float> bias(static_cast<size_t>(m.heads * total), 0.0f);
    bias[0] = NAN;
    bias[static_cast<size_t>(total)] = NAN;
    std::fill(bias.begin() + total + 1, bias.begin() + total + 200, -INFINITY);
    bias[static_cast<size_t>(3 * total + 640)] = NAN;
    c.set("attention_bias", float_tensor(m.dtype, {1, m.heads, 1, total}, bias));
    put_float(&c.at("query"), 2 * H + 5, NAN);
    GqaInputs in = c.inputs();
    reference::GqaReferenceResult ref;
    ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
    for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
      SCOPED_TRACE(path == AttentionPath::kNaive ? "naive" : "flash");
      GqaOutputs one, three;
      ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three, 64));
      for (const GqaOutputs* run : {&one, &three})
        for (int64_t d = 0; d < 4 * H; ++d)
          ASSERT_TRUE(std::isnan(reference::load_float(run->output.storage.data(), m.dtype, d))) << "element " << d;
      const std::vector<double> finite(ref.output.begin() + 4 * H, ref.output.end());
      expect_close(finite, reinterpret_cast<const float*>(one.output.storage.data()) + 4 * H, m.dtype, H, "head 4");
    }
  }
}

// A NaN value behind masked keys: a fully masked row is still 0 (its zero probabilities are not multiplied into
// the values), and a partly masked one is NaN, the reference's 0 x NaN, also where every key of a split-KV chunk
// is masked (head 0 sees no key, head 1 keys 3990-4000 of a decode step after 4000).
TEST(GqaMaskedRows, NaNValuesBehindMaskedKeys) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    const MaskedCase m{"nan values", 1, 4000, 2, 1, 64, dtype};
    SCOPED_TRACE(dtype_name(dtype));
    GqaCase c = build(m);
    const int64_t total = m.past + 1, H = m.head_size;
    std::vector<float> bias(static_cast<size_t>(2 * total), -INFINITY);
    std::fill(bias.begin() + total + 3990, bias.end(), 0.0f);
    c.set("attention_bias", float_tensor(dtype, {1, 2, 1, total}, bias));
    put_float(&c.at("past_value"), 0, NAN);  // key 0, channel 0
    GqaInputs in = c.inputs();
    reference::GqaReferenceResult ref;
    ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
    ASSERT_TRUE(std::isnan(ref.output[static_cast<size_t>(H)]));
    for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
      SCOPED_TRACE(path == AttentionPath::kNaive ? "naive" : "flash");
      GqaOutputs one, three;
      ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three));
      for (const GqaOutputs* run : {&one, &three}) {
        const void* out = run->output.storage.data();
        for (int64_t d = 0; d < H; ++d) ASSERT_EQ(reference::load_float(out, dtype, d), 0.0f) << "head 0, " << d;
        ASSERT_TRUE(std::isnan(reference::load_float(out, dtype, H)));
      }
      std::vector<double> want(ref.output.begin() + H, ref.output.end());
      want[0] = 0.0;
      OwnedTensor got = zero_tensor(dtype, {H});
      std::memcpy(got.bytes.data(), one.output.storage.data() + H * dtype_size(dtype), H * dtype_size(dtype));
      put_float(&got, 0, 0.0f);
      expect_close(want, got.bytes.data(), dtype, H, "head 1");
    }
  }
}

// Head 0's sink is `sink`, the others' finite; a decode step over 1,500 keys (split-KV at 3 threads) and a prompt.
void check_sink(float sink, int64_t seq, int64_t past) {
  SCOPED_TRACE("sink " + std::to_string(sink) + " S " + std::to_string(seq));
  const int64_t heads = 4, head_size = 16;
  CaseSpec spec;
  spec.seq = seq, spec.past = past, spec.heads = heads, spec.kv_heads = 2, spec.head_size = head_size, spec.seed = 3;
  GqaCase c = make_case(spec);
  c.set("head_sink", float_tensor(DType::kFloat32, {heads}, {sink, 0.5f, -1.0f, 2.0f}));
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
  const bool nan_rows = !(sink < INFINITY);
  for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
    SCOPED_TRACE(path == AttentionPath::kNaive ? "naive" : "flash");
    GqaOutputs one, three;
    ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three));
    const float* out = reinterpret_cast<const float*>(one.output.storage.data());
    std::vector<double> want = ref.output;
    std::vector<float> got(out, out + want.size());
    if (nan_rows) {  // head 0's rows are NaN; heads 1-3 keep their finite sinks and the bound below
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t d = 0; d < head_size; ++d) {
          float& v = got[static_cast<size_t>(i * heads * head_size + d)];
          EXPECT_TRUE(std::isnan(v)) << "row " << i << " element " << d << ": " << v;
          v = 0.0f, want[static_cast<size_t>(i * heads * head_size + d)] = 0.0;
        }
    }
    // A -inf sink is no sink: every head, 0 included, holds the bound against the reference.
    expect_close(want, got.data(), DType::kFloat32, head_size, "output");
  }
}

TEST(GqaSinks, NegativeInfinityIsNoSink) {
  check_sink(-INFINITY, 7, 0);
  check_sink(-INFINITY, 1, 1500);
}
TEST(GqaSinks, PositiveInfinityOrNaNGivesNaNRows) {
  for (float sink : {INFINITY, NAN}) {
    check_sink(sink, 7, 0);
    check_sink(sink, 1, 1500);
  }
}

}  // namespace
}  // namespace attnkit
