// attnkit tests: GroupQueryAttention shape inference and peak scratch memory (attnkit/schema.h).
// Shapes must be what the op produces (the op test checks that too); peak bytes must be what the
// driver plans, and the flash path's must not grow with the sequence length.
#include <gtest/gtest.h>

#include "attnkit/schema.h"
#include "gqa/driver.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

TEST(GqaSchema, OutputShapesFollowPhaseAndCache) {
  CaseSpec s;
  s.batch = 2, s.seq = 1, s.past = 8, s.total = 5, s.heads = 8, s.kv_heads = 2, s.head_size = 64;
  s.seqlens = {4, 2};
  GqaCase c = make_case(s);
  GqaInputs in = c.inputs();
  GqaOutputShapes shapes;
  ASSERT_TRUE(gqa_output_shapes(in, c.attrs, c.request, &shapes).ok());
  EXPECT_EQ(shapes.output.shape, (Shape{2, 1, 512}));
  EXPECT_EQ(shapes.output.dtype, DType::kFloat32);
  // present = max(total 5, past buffer 8) rows.
  EXPECT_EQ(shapes.present_key.shape, (Shape{2, 2, 8, 64}));
  EXPECT_TRUE(shapes.present_value.produced);
  EXPECT_FALSE(shapes.output_qk.produced);

  c.attrs.qk_output = 2;
  c.request.output_qk = true;
  c.request.present_value = false;
  in = c.inputs();
  ASSERT_TRUE(gqa_output_shapes(in, c.attrs, c.request, &shapes).ok());
  EXPECT_TRUE(shapes.output_qk.produced);
  EXPECT_EQ(shapes.output_qk.shape, (Shape{2, 8, 1, 5}));
  EXPECT_FALSE(shapes.present_value.produced);
}

TEST(GqaSchema, QuantizedAndHalfCaches) {
  CaseSpec s;
  s.seq = 3, s.heads = 4, s.kv_heads = 2, s.head_size = 32, s.dtype = DType::kBFloat16;
  GqaCase c = make_case(s);
  GqaOutputShapes shapes;
  GqaInputs in = c.inputs();
  ASSERT_TRUE(gqa_output_shapes(in, c.attrs, c.request, &shapes).ok());
  EXPECT_EQ(shapes.output.dtype, DType::kBFloat16);
  EXPECT_EQ(shapes.present_key.dtype, DType::kBFloat16);
  EXPECT_EQ(shapes.present_key.shape, (Shape{1, 2, 3, 32}));

  c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_TENSOR";
  c.attrs.kv_cache_bit_width = 4;
  c.set("k_scale", float_tensor(DType::kFloat32, {1}, {0.1f}));
  c.set("v_scale", float_tensor(DType::kFloat32, {1}, {0.1f}));
  in = c.inputs();
  ASSERT_TRUE(gqa_output_shapes(in, c.attrs, c.request, &shapes).ok());
  EXPECT_EQ(shapes.present_key.dtype, DType::kUInt8);
  EXPECT_EQ(shapes.present_key.shape, (Shape{1, 2, 3, 16}));  // two int4 values per byte
  EXPECT_EQ(shapes.output.dtype, DType::kBFloat16);
}

TEST(GqaSchema, InvalidInputsFailWithTheOpsMessage) {
  GqaCase c = make_case(CaseSpec{});
  c.attrs.kv_num_heads = 3;
  GqaInputs in = c.inputs();
  GqaOutputShapes shapes;
  Status st = gqa_output_shapes(in, c.attrs, c.request, &shapes);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiple of kv_num_heads"), std::string::npos);
  size_t bytes = 0;
  EXPECT_FALSE(gqa_peak_scratch_bytes(in, c.attrs, c.request, AttentionPath::kAuto, 1, &bytes).ok());
  EXPECT_EQ(gqa_output_shapes(in, c.attrs, c.request, nullptr).message(), "shapes must not be null");
  EXPECT_EQ(gqa_peak_scratch_bytes(in, c.attrs, c.request, AttentionPath::kAuto, 1, nullptr).message(),
            "bytes must not be null");
}

// Prefill S = T = `seq` with N = 16, Nk = 8, H = 128 (the benchmark shape).
GqaCase prefill(int64_t seq) {
  GqaCase c;
  c.attrs.num_heads = 16, c.attrs.kv_num_heads = 8;
  c.set("query", zero_tensor(DType::kFloat32, {1, seq, 16 * 128}));
  c.set("key", zero_tensor(DType::kFloat32, {1, seq, 8 * 128}));
  c.set("value", zero_tensor(DType::kFloat32, {1, seq, 8 * 128}));
  c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {1}, {static_cast<int32_t>(seq - 1)}));
  c.set("total_sequence_length", int_tensor<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(seq)}));
  return c;
}

size_t peak(GqaCase& c, AttentionPath path, int threads) {
  GqaInputs in = c.inputs();
  size_t bytes = 0;
  Status st = gqa_peak_scratch_bytes(in, c.attrs, c.request, path, threads, &bytes);
  EXPECT_TRUE(st.ok()) << st.message();
  return bytes;
}

TEST(GqaSchema, FlashScratchPerThreadDoesNotGrowWithLength) {
  GqaCase short_case = prefill(512), long_case = prefill(4096);
  // Per-thread scratch, the part that tiles over keys, straight from the driver's plan (a single-thread
  // wasm build clamps every thread count to 1, so differences of whole-call peaks would read 0 there).
  auto per_thread = [](GqaCase& c, AttentionPath path) {
    GqaInputs in = c.inputs();
    GqaProblem p;
    EXPECT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
    return plan_gqa(p, gqa_uses_flash(p, path)).worker_floats * sizeof(float);
  };
  const size_t flash_short = per_thread(short_case, AttentionPath::kFlash);
  const size_t flash_long = per_thread(long_case, AttentionPath::kFlash);
  const size_t naive_long = per_thread(long_case, AttentionPath::kNaive);
  EXPECT_EQ(flash_short, flash_long);
  EXPECT_GT(naive_long, per_thread(short_case, AttentionPath::kNaive));
  // At T = 4096 the naive path holds the full [S, T] scores of a kv head per thread; flash holds
  // one key block.
  EXPECT_LE(flash_long * 10, naive_long) << "flash " << flash_long << " naive " << naive_long;
  // Issue 3: whole-call flash peak at S = 4096, N = 16 is at most 1/10 of the naive path's.
  EXPECT_LE(peak(long_case, AttentionPath::kFlash, 4) * 10, peak(long_case, AttentionPath::kNaive, 4));
  EXPECT_EQ(peak(long_case, AttentionPath::kAuto, 4), peak(long_case, AttentionPath::kFlash, 4));
}

// Scratch is per thread that gets a task: a naive prompt over 2 kv heads in one block of rows each is 2 tasks, so
// threads beyond 2 add nothing; the call reports what the plan says.
TEST(GqaSchema, ScratchCountsOnlyThreadsWithATask) {
  CaseSpec spec;
  spec.seq = 5, spec.heads = 4, spec.kv_heads = 2;
  GqaCase c = make_case(spec);
  uint64_t tasks = 0;
  {
    GqaInputs in = c.inputs();  // its views live until the next c.inputs()
    GqaProblem p;
    ASSERT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
    tasks = gqa_attention_workers(p, plan_gqa(p, false), 1 << 20);
  }
  ASSERT_EQ(tasks, 2u);
  const size_t at_8 = peak(c, AttentionPath::kNaive, 8);
  EXPECT_EQ(peak(c, AttentionPath::kNaive, static_cast<int>(tasks)), at_8);
  size_t reported = 0;
  RunOptions options;
  options.path = AttentionPath::kNaive;
  options.threads = 8;
  options.peak_scratch_bytes = &reported;
  GqaOutputs out;
  const Status st = group_query_attention(c.inputs(), c.attrs, c.request, &out, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(reported, at_8);
}

TEST(GqaSchema, UnrequestedPresentCountsAsScratch) {
  GqaCase c = prefill(64);
  const size_t with_present = peak(c, AttentionPath::kFlash, 1);
  c.request.present_key = c.request.present_value = false;
  // Two internal caches of (1, 8, 64, 128) fp32.
  EXPECT_EQ(peak(c, AttentionPath::kFlash, 1) - with_present, 2u * 8 * 64 * 128 * 4);
}

}  // namespace
}  // namespace attnkit
