// attnkit tests: split-KV decoding over caches longer than one chunk (the op grid's pasts stay under
// one), and a short chunk of tokens after them, where the attention tasks copy their own past rows into the
// stateless present, or the past is copied up front (streamed past the cache, the flash path then reading the past
// where it lies, once the present is large).
// Checks the present bytes against the reference, stateless against in-place bit for bit, and 1 against 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gqa/driver.h"
#include "gqa_reference.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

// Ragged batch of two decode steps over ~1300 and ~900 cached rows: several 512-row chunks, a
// partial last chunk, and a capacity past both lengths (the rows beyond stay zero in the present).
// With 8 KV heads over ~3000 and ~2100 rows there are enough tasks for longer chunks (plan_gqa).
// A chunk of 4 tokens after ~3000 rows (one entry: ORT's chunked prefill takes no batch), and one of 200, more query
// rows than a flash task holds, so that the past is copied before the attention starts.
struct LongDecode {
  int64_t heads = 4, kv_heads = 2, past = 1400, total = 1301;
  std::vector<int32_t> seqlens{1300, 900};  // one per batch entry
  int64_t seq = 1;
};
const LongDecode kManyHeads{16, 8, 3200, 3001, {3000, 2100}};
const LongDecode kChunkAfterPast{16, 8, 3200, 3001, {3000}, 4};
const LongDecode kLongChunkAfterPast{4, 2, 3200, 3001, {3000}, 200};

GqaCase long_decode_case(int bits, int64_t window, const LongDecode& shape) {
  CaseSpec s;
  s.batch = static_cast<int64_t>(shape.seqlens.size()), s.seq = shape.seq;
  s.heads = shape.heads, s.kv_heads = shape.kv_heads, s.head_size = 64;
  s.past = shape.past;
  s.seqlens = shape.seqlens;
  s.total = shape.total;
  s.seed = 77;
  GqaCase c = make_case(s);
  c.attrs.local_window_size = window;
  if (bits) {
    c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_CHANNEL";
    c.attrs.kv_cache_bit_width = bits;
    const double qmax = bits == 8 ? 127.0 : 7.0;
    const Shape scale_shape{1, s.kv_heads, 1, s.head_size};
    c.set("k_scale", random_tensor(DType::kFloat32, scale_shape, 91, 0.8 / qmax, 1.2 / qmax));
    c.set("v_scale", random_tensor(DType::kFloat32, scale_shape, 92, 0.8 / qmax, 1.2 / qmax));
    const Shape past_shape{s.batch, s.kv_heads, s.past, bits == 4 ? s.head_size / 2 : s.head_size};
    const DType dt = bits == 4 ? DType::kUInt8 : DType::kInt8;
    c.set("past_key", random_tensor(dt, past_shape, 93));
    c.set("past_value", random_tensor(dt, past_shape, 94));
  }
  return c;
}

void check_long_decode(int bits, int64_t window, const LongDecode& shape = LongDecode()) {
  GqaCase c = long_decode_case(bits, window, shape);
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());

  GqaOutputs one, three;
  ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, AttentionPath::kFlash, &one, &three));
  EXPECT_TRUE(same_bytes(one.present_key, ref.present_key)) << "present_key differs from the reference";
  EXPECT_TRUE(same_bytes(one.present_value, ref.present_value)) << "present_value differs from the reference";
  EXPECT_TRUE(same_bytes(three.present_key, ref.present_key));
  EXPECT_TRUE(same_bytes(three.present_value, ref.present_value));

  // In place, the attention reads the same cache bytes through the same tiling: identical bits.
  GqaCase cached = c;
  GqaInputs in_place_inputs = cached.inputs();
  GqaOutputs in_place;
  RunOptions options;
  options.path = AttentionPath::kFlash;
  options.threads = 2;
  const Status st = group_query_attention_in_place(in_place_inputs, cached.attrs, GqaRequest(), &in_place, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(same_bytes(one.output, in_place.output)) << "stateless and in-place outputs differ";

  // Each output is a convex combination of dequantized values (|v| <= 8 * 1.2 / 7 < 1.4 here, or < 1
  // for fp32) formed by fp32 dot products over 64 channels and fp32 sums over <= 1301 keys; the
  // worst-case error of those recursive sums, (64 + total) * 2^-24 relative to the largest term,
  // times 4 for the exp polynomial, the LSE merge and the final scaling, bounds the difference.
  const double tol = 4.0 * static_cast<double>(64 + shape.total) * std::ldexp(1.0, -24) * 1.4;
  double worst = 0.0;
  for (size_t i = 0; i < ref.output.size(); ++i) {
    const double got = reference::load_float(one.output.storage.data(), DType::kFloat32, static_cast<int64_t>(i));
    worst = std::max(worst, std::fabs(got - ref.output[i]));
  }
  EXPECT_LE(worst, tol);
}

TEST(GqaSplitKv, Float32LongDecode) { check_long_decode(0, -1); }
TEST(GqaSplitKv, Float32LongDecodeWindowed) { check_long_decode(0, 700); }
TEST(GqaSplitKv, Int8LongDecode) { check_long_decode(8, -1); }
TEST(GqaSplitKv, Int4LongDecodeWindowed) { check_long_decode(4, 600); }

GqaProblem problem_of(const GqaCase& c, const GqaInputs& in) {
  GqaProblem p;
  EXPECT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
  return p;
}

GqaTiling flash_plan(GqaCase c) {
  const GqaInputs in = c.inputs();
  return plan_gqa(problem_of(c, in), true);
}

// The shapes above do run the chunk lengths they are meant to cover.
TEST(GqaSplitKv, ManyHeadsTakeLongChunks) {
  for (int bits : {0, 8}) {
    // 256 KiB of K per block: 1024 fp32 rows of 64 channels, 2048 (the most) int8 ones.
    const GqaTiling t = flash_plan(long_decode_case(bits, -1, kManyHeads));
    EXPECT_EQ(t.kv_chunk, bits ? 2048 : 1024) << bits;
    EXPECT_EQ(t.kv_chunks, bits ? 2 : 3) << bits;
    EXPECT_EQ(t.panel_keys, 0) << bits;  // two query heads per KV head read K directly
  }
  const GqaTiling few = flash_plan(long_decode_case(8, -1, LongDecode()));
  EXPECT_EQ(few.kv_chunk, 512);
  EXPECT_EQ(few.kv_chunks, 3);
}
TEST(GqaSplitKv, Float32LongChunks) { check_long_decode(0, -1, kManyHeads); }
TEST(GqaSplitKv, Int8LongChunksWindowed) { check_long_decode(8, 2500, kManyHeads); }
TEST(GqaSplitKv, Int4LongChunks) { check_long_decode(4, -1, kManyHeads); }
TEST(GqaSplitKv, Int8ChunkAfterLongPast) { check_long_decode(8, -1, kChunkAfterPast); }
TEST(GqaSplitKv, Float32ChunkAfterLongPastWindowed) { check_long_decode(0, 1800, kChunkAfterPast); }

// Which copies stream: the presents hold 0.3-2.5 MiB in the small shape and 2.9-23.4 MiB in the others, around
// stream_past_rows' 1 MiB; the chunk of 4 tokens is copied by its flash tasks, the one of 200 before them.
TEST(GqaSplitKv, LargePresentsAreStreamed) {
  const auto streams = [](int bits, const LongDecode& shape) {
    GqaCase c = long_decode_case(bits, -1, shape);
    const GqaInputs in = c.inputs();
    return stream_past_rows(problem_of(c, in));
  };
  EXPECT_TRUE(streams(0, LongDecode()));
  EXPECT_FALSE(streams(8, LongDecode()));
  EXPECT_FALSE(streams(4, LongDecode()));
  EXPECT_TRUE(streams(4, kManyHeads));
  EXPECT_TRUE(streams(8, kChunkAfterPast));
  GqaCase chunk = long_decode_case(0, -1, kChunkAfterPast);
  const GqaInputs in = chunk.inputs();
  const GqaProblem p = problem_of(chunk, in);
  EXPECT_TRUE(flash_tasks_copy_past(p, plan_gqa(p, true), false));
  GqaCase long_chunk = long_decode_case(0, -1, kLongChunkAfterPast);
  const GqaInputs long_in = long_chunk.inputs();
  const GqaProblem lp = problem_of(long_chunk, long_in);
  EXPECT_FALSE(flash_tasks_copy_past(lp, plan_gqa(lp, true), false));
  EXPECT_TRUE(attention_reads_past(lp, plan_gqa(lp, true), false));
}
TEST(GqaSplitKv, Float32ChunkAfterLongPast) { check_long_decode(0, -1, kChunkAfterPast); }
TEST(GqaSplitKv, Float32LongChunkAfterLongPast) { check_long_decode(0, -1, kLongChunkAfterPast); }
TEST(GqaSplitKv, Float32LongChunkAfterLongPastWindowed) { check_long_decode(0, 1000, kLongChunkAfterPast); }

}  // namespace
}  // namespace attnkit
