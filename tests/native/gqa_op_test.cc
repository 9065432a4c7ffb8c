// attnkit tests: attnkit::group_query_attention against the double-precision reference over the
// issue-2 grid (B, S, past, heads, head size) crossed with every feature, dtype and cache type,
// on both attention paths and with 1 and 3 threads (which must agree bit for bit).
// The grid is sampled, not crossed: each axis walks through its values in rounds, each round a
// different fixed shuffle, so every value of every axis appears while the axes stay uncorrelated and
// the run stays well under a minute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "attnkit/schema.h"
#include "gqa_reference.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

const int64_t kBatches[] = {1, 3};
const int64_t kSeqs[] = {1, 7, 64, 129};
const int64_t kPasts[] = {0, 1, 37, 300};
const int64_t kHeads[][2] = {{4, 4}, {8, 2}, {6, 3}, {32, 8}};
const int64_t kHeadSizes[] = {8, 64, 80, 128, 256};
enum Feature {
  kPlain, kRotarySplit, kRotaryInterleaved, kRotaryPartialPositionIds, kPositionIds, kNonCausal,
  kWindow, kSoftcap, kBias, kHeadSink, kSmoothSoftmax, kQkBefore, kQkAfter, kPacked, kRagged,
  kWindowSoftcapBiasSink, kQkNorm, kFeatureCount
};
const char* kFeatureNames[] = {"plain", "rotary-split", "rotary-interleaved", "rotary-partial-posids",
                               "position-ids", "causal0", "window", "softcap", "bias", "head-sink",
                               "smooth-softmax", "qk-before", "qk-after", "packed", "ragged",
                               "window+softcap+bias+sink", "qk-norm"};
const DType kDtypes[] = {DType::kFloat32, DType::kFloat32, DType::kFloat16, DType::kBFloat16};
struct CacheKind { const char* quant; int bits; };
const CacheKind kCaches[] = {{"NONE", 0}, {"NONE", 0}, {"NONE", 0}, {"PER_TENSOR", 8},
                             {"PER_CHANNEL", 4}, {"PER_CHANNEL", 8}, {"PER_TENSOR", 4}};
constexpr int kCases = 96;

struct GridPoint {
  int64_t batch, seq, past, heads, kv_heads, head_size;
  Feature feature;
  DType dtype;
  CacheKind cache;
  std::string name;
};

// Value index of case i on an axis of `len` values: round i / len is a seeded shuffle of [0, len).
size_t axis_index(int i, size_t len, int axis) {
  std::vector<size_t> perm(len);
  for (size_t k = 0; k < len; ++k) perm[k] = k;
  SplitMix rng(static_cast<uint64_t>(axis) * 1000003u + static_cast<uint64_t>(i) / len);
  for (size_t k = len - 1; k > 0; --k) std::swap(perm[k], perm[rng.next() % (k + 1)]);
  return perm[static_cast<size_t>(i) % len];
}

template <typename T, size_t N>
const T& pick(const T (&axis)[N], int i, int axis_id) {
  return axis[axis_index(i, N, axis_id)];
}

GridPoint grid_point(int i) {
  GridPoint g;
  g.batch = pick(kBatches, i, 1);
  g.seq = pick(kSeqs, i, 2);
  g.past = pick(kPasts, i, 3);
  const auto& heads = pick(kHeads, i, 4);
  g.heads = heads[0], g.kv_heads = heads[1];
  g.head_size = pick(kHeadSizes, i, 5);
  g.feature = static_cast<Feature>(axis_index(i, kFeatureCount, 6));
  g.dtype = pick(kDtypes, i, 7);
  g.cache = pick(kCaches, i, 8);
  // Chunked prefill (S > 1 after a past) exists only for batch 1 in ORT.
  if (g.seq > 1 && g.past > 0) g.batch = 1;
  // Rotary needs head_size % 16 == 0: the one head size that is not moves up to 16.
  const bool rotary = g.feature == kRotarySplit || g.feature == kRotaryInterleaved ||
                      g.feature == kRotaryPartialPositionIds || g.feature == kPositionIds || g.feature == kQkNorm;
  if (rotary && g.head_size % 16 != 0) g.head_size = 16;
  // Keep the fp64 reference affordable: about 1.5e8 multiply-adds per case at most.
  auto work = [&] { return g.batch * g.heads * g.seq * (g.past + g.seq) * g.head_size; };
  if (work() > 150000000) g.batch = 1;
  if (work() > 150000000) g.seq = 7;
  std::ostringstream os;
  os << "B" << g.batch << "_S" << g.seq << "_P" << g.past << "_N" << g.heads << "_Nk" << g.kv_heads
     << "_H" << g.head_size << "_" << kFeatureNames[g.feature] << "_" << dtype_name(g.dtype) << "_"
     << g.cache.quant << g.cache.bits;
  g.name = os.str();
  return g;
}

GqaCase build(const GridPoint& g, uint64_t seed) {
  const int64_t total = g.past + g.seq;
  const bool first_prompt = g.past == 0;
  CaseSpec s;
  s.batch = g.batch, s.seq = g.seq, s.past = g.past, s.heads = g.heads, s.kv_heads = g.kv_heads;
  s.head_size = g.head_size, s.dtype = g.dtype, s.packed = g.feature == kPacked, s.seed = seed;
  if (g.feature == kRagged) {
    // Entry 0 is full (so total is the batch maximum); the others are shorter but keep the phase's
    // rules: a first prompt has T_b <= S, later steps need T_b >= S.
    for (int64_t b = 0; b < g.batch; ++b) {
      int64_t tb = total - 5 * b;
      if (g.batch == 1) tb = total - 1;
      tb = std::max<int64_t>(tb, first_prompt ? 1 : g.seq);
      s.seqlens.push_back(static_cast<int32_t>(tb - 1));
    }
  }
  GqaCase c = make_case(s);
  GqaAttributes& a = c.attrs;
  const int64_t max_pos = total + 16;
  switch (g.feature) {
    case kRotarySplit: add_rotary(&c, g.dtype, max_pos, g.head_size / 2, false); break;
    case kRotaryInterleaved: add_rotary(&c, g.dtype, max_pos, g.head_size / 2, true); break;
    case kRotaryPartialPositionIds:
    case kPositionIds: {
      const int64_t half = g.feature == kPositionIds ? g.head_size / 2 : std::max<int64_t>(8, g.head_size / 4 / 8 * 8);
      add_rotary(&c, g.dtype, max_pos, half, g.feature == kRotaryPartialPositionIds);
      // Positions differ from the defaults (shifted per entry) but stay inside the cos cache.
      std::vector<int64_t> ids(g.batch * g.seq);
      for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t i = 0; i < g.seq; ++i) ids[b * g.seq + i] = (first_prompt ? 3 : g.past - 1 + b % 2) + i;
      c.set("position_ids", int_tensor<int64_t>(DType::kInt64, {g.batch, g.seq}, ids));
      break;
    }
    case kQkNorm:
      add_rotary(&c, g.dtype, max_pos, g.head_size / 2, false);
      c.set("q_norm_weight", random_tensor(g.dtype, {g.head_size}, seed + 9, 0.5, 1.5));
      c.set("k_norm_weight", random_tensor(g.dtype, {g.head_size}, seed + 10, 0.5, 1.5));
      break;
    case kNonCausal: a.causal = 0; break;
    case kWindow: a.local_window_size = std::max<int64_t>(1, total / 3); break;
    case kSoftcap: a.softcap = 0.8f; break;
    case kBias: {
      const Shape shapes[4] = {{g.batch, g.heads, g.seq, total}, {1, g.heads, g.seq, total},
                               {g.batch, 1, g.seq, total}, {1, 1, g.seq, total}};
      c.set("attention_bias", random_tensor(g.dtype, shapes[seed % 4], seed + 7, -2.0, 2.0));
      break;
    }
    case kHeadSink: c.set("head_sink", random_tensor(g.dtype, {g.heads}, seed + 8)); break;
    case kSmoothSoftmax: a.smooth_softmax = 1; break;
    case kQkBefore: a.qk_output = 1; c.request.output_qk = true; break;
    case kQkAfter: a.qk_output = 2; c.request.output_qk = true; break;
    case kWindowSoftcapBiasSink:
      a.local_window_size = std::max<int64_t>(1, total / 2);
      a.softcap = 1.5f;
      c.set("attention_bias", random_tensor(g.dtype, {1, g.heads, g.seq, total}, seed + 7));
      c.set("head_sink", random_tensor(g.dtype, {g.heads}, seed + 8));
      break;
    default: break;
  }
  if (g.cache.bits != 0) {
    a.k_quant_type = a.v_quant_type = g.cache.quant;
    a.kv_cache_bit_width = g.cache.bits;
    const bool channel = std::string(g.cache.quant) == "PER_CHANNEL";
    const Shape scale_shape = channel ? Shape{1, g.kv_heads, 1, g.head_size} : Shape{1};
    const double qmax = g.cache.bits == 8 ? 127.0 : 7.0;
    c.set("k_scale", random_tensor(DType::kFloat32, scale_shape, seed + 9, 0.8 / qmax, 1.2 / qmax));
    c.set("v_scale", random_tensor(DType::kFloat32, scale_shape, seed + 10, 0.8 / qmax, 1.2 / qmax));
    if (g.past > 0) {
      const Shape ps{g.batch, g.kv_heads, g.past, g.cache.bits == 4 ? g.head_size / 2 : g.head_size};
      const DType dt = g.cache.bits == 4 ? DType::kUInt8 : DType::kInt8;
      c.set("past_key", random_tensor(dt, ps, seed + 3));
      c.set("past_value", random_tensor(dt, ps, seed + 4));
    }
  }
  return c;
}

void check_point(const GridPoint& g, uint64_t seed) {
  GqaCase c = build(g, seed);
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  Status st = reference::group_query_attention(in, c.attrs, c.request, &ref);
  ASSERT_TRUE(st.ok()) << st.message();

  GqaOutputShapes shapes;
  ASSERT_TRUE(gqa_output_shapes(in, c.attrs, c.request, &shapes).ok());

  // Flash twice: with the planner's block (up to 512 keys, so one block for most of the grid) and with 32-key
  // blocks, whose boundaries every prompt here crosses (the running max and sum carried between blocks).
  const struct {
    AttentionPath path;
    int block_keys;
    const char* name;
  } runs[] = {{AttentionPath::kNaive, 0, "naive"}, {AttentionPath::kFlash, 0, "flash"},
              {AttentionPath::kFlash, 32, "flash, 32-key blocks"}};
  for (const auto& run : runs) {
    SCOPED_TRACE(run.name);
    GqaOutputs one, three;
    ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, run.path, &one, &three, run.block_keys));
    EXPECT_TRUE(same_bytes(one.present_key, three.present_key));
    EXPECT_TRUE(same_bytes(one.output_qk, three.output_qk)) << "output_qk differs between 1 and 3 threads";

    EXPECT_EQ(one.output.shape, shapes.output.shape);
    EXPECT_EQ(one.present_key.shape, shapes.present_key.shape);
    EXPECT_EQ(one.present_value.dtype, shapes.present_value.dtype);
    // present holds exactly what ORT stores: the same float rotary, rounding and quantization.
    EXPECT_TRUE(same_bytes(one.present_key, ref.present_key)) << "present_key differs from the reference";
    EXPECT_TRUE(same_bytes(one.present_value, ref.present_value)) << "present_value differs";

    const int64_t h = g.head_size;
    expect_close(ref.output, one.output.storage.data(), g.dtype, h, "output");
    if (c.request.output_qk) {
      ASSERT_EQ(one.output_qk.shape, ref.output_qk_shape);
      expect_close(ref.output_qk, one.output_qk.storage.data(), g.dtype, ref.output_qk_shape[3], "output_qk");
    }
  }
}

void check_case(int index) {
  const GridPoint g = grid_point(index);
  SCOPED_TRACE("case " + std::to_string(index) + ": " + g.name);
  check_point(g, 1000 + index);
}

// Prompts longer than one flash task (~384 score rows: 384 query rows at one head per KV head, 192 at two),
// ending in a partial task, against the causal diagonal, a window and a chunked prefill's past.
TEST(GqaOp, PromptsSpanSeveralFlashTasks) {
  const CacheKind none{"NONE", 0}, int8{"PER_CHANNEL", 8};
  const GridPoint points[] = {
      {1, 400, 0, 4, 4, 64, kWindow, DType::kFloat32, none, "S400 G1 window"},
      {1, 400, 37, 4, 2, 64, kPlain, DType::kFloat32, int8, "S400 P37 G2 int8"},
      {2, 200, 0, 6, 3, 80, kSoftcap, DType::kFloat16, none, "B2 S200 G2 softcap fp16"},
  };
  uint64_t seed = 77;
  for (const GridPoint& g : points) {
    SCOPED_TRACE(g.name);
    check_point(g, seed++);
  }
}

// Long contexts: random values cancel to outputs far below max|V| (about 1/sqrt(T) of it), and one fp32 chain of
// multiply-adds over all T keys rounds by about sqrt(T) ulps of its partial sums: at T = 65536 that sat 5e-6 to 1e-5
// of the output's peak from the reference (naive, and flash prompts; flash decoding's split-KV chunks of at most 2048
// keys stayed within the bound). Summed by key blocks (attention.cc, add_block_values) it stays within 2e-6 of the
// peak: js/tolerance.js's fp32 bound, whose floor for a quantized cache is the output's peak.
TEST(GqaOp, LongContextSumsStayWithinTheFp32BoundOfTheOutputsPeak) {
  const CacheKind caches[] = {{"NONE", 0}, {"PER_TENSOR", 8}};
  for (const CacheKind& cache : caches)
    for (int64_t seq : {1, 2}) {
      const GridPoint g{1, seq, 65536 - seq, 2, 1, 32, kPlain, DType::kFloat32, cache, "T65536"};
      SCOPED_TRACE(std::string(cache.quant) + " S=" + std::to_string(seq));
      GqaCase c = build(g, 31);
      GqaInputs in = c.inputs();
      reference::GqaReferenceResult ref;
      ASSERT_TRUE(reference::group_query_attention(in, c.attrs, c.request, &ref).ok());
      double peak = 0.0;
      for (double v : ref.output) peak = std::max(peak, std::fabs(v));
      for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
        GqaOutputs out;
        RunOptions options;
        options.path = path;
        ASSERT_TRUE(group_query_attention(in, c.attrs, c.request, &out, options).ok());
        double worst = 0.0;
        const void* got = out.output.storage.data();
        for (size_t i = 0; i < ref.output.size(); ++i)
          worst = std::max(worst, std::fabs(reference::load_float(got, g.dtype, i) - ref.output[i]));
        EXPECT_LE(worst, 2e-6 * peak) << (path == AttentionPath::kNaive ? "naive" : "flash") << ", peak " << peak;
      }
    }
}

// Attribute spellings ORT 1.31 runs as another: a negative softcap is no softcap (spec §1), and smooth_softmax
// beside a head_sink is the head_sink alone (spec §2.1: the sink is head_sink[h]); same bits on both paths.
TEST(GqaOp, NegativeSoftcapAndSmoothSoftmaxBesideASinkAreTheirOrtMeanings) {
  const CacheKind none{"NONE", 0};
  GqaCase base = build({2, 1, 5, 4, 2, 64, kPlain, DType::kFloat32, none, "B2 S1 P5"}, 21);
  base.set("head_sink", random_tensor(DType::kFloat32, {4}, 22));
  GqaCase spelled = base;
  spelled.attrs.softcap = -3.0f;
  spelled.attrs.smooth_softmax = 1;
  for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
    GqaOutputs want, got, unused;
    ASSERT_NO_FATAL_FAILURE(
        run_one_and_three_threads(base.inputs(), base.attrs, base.request, path, &want, &unused));
    ASSERT_NO_FATAL_FAILURE(
        run_one_and_three_threads(spelled.inputs(), spelled.attrs, spelled.request, path, &got, &unused));
    EXPECT_TRUE(same_bytes(want.output, got.output)) << static_cast<int>(path);
  }
}

TEST(GqaOp, FlashBlockKeysMustBeAMultipleOf16) {
  const CacheKind none{"NONE", 0};
  GqaCase c = build({1, 40, 0, 4, 2, 64, kPlain, DType::kFloat32, none, "S40"}, 5);
  GqaInputs in = c.inputs();
  for (int keys : {-16, 24, 65552}) {
    RunOptions options;
    options.flash_block_keys = keys;
    GqaOutputs out;
    const Status st = group_query_attention(in, c.attrs, c.request, &out, options);
    ASSERT_FALSE(st.ok()) << keys;
    EXPECT_NE(st.message().find("flash_block_keys = " + std::to_string(keys) + " must be 0 or a multiple of 16"),
              std::string::npos)
        << st.message();
  }
}

TEST(GqaOp, GridCoversEveryAxisValue) {
  std::set<int64_t> b, s, p, n, hs;
  std::set<int> f, dt, ck;
  bool chunked = false;
  for (int i = 0; i < kCases; ++i) {
    GridPoint g = grid_point(i);
    b.insert(g.batch), s.insert(g.seq), p.insert(g.past), n.insert(g.heads), hs.insert(g.head_size);
    f.insert(g.feature), dt.insert(static_cast<int>(g.dtype));
    ck.insert(g.cache.bits * 10 + (std::string(g.cache.quant) == "PER_CHANNEL"));
    chunked |= g.seq > 1 && g.past > 0;
  }
  EXPECT_EQ(b, (std::set<int64_t>{1, 3}));
  EXPECT_EQ(s, (std::set<int64_t>{1, 7, 64, 129}));
  EXPECT_EQ(p, (std::set<int64_t>{0, 1, 37, 300}));
  EXPECT_EQ(n, (std::set<int64_t>{4, 8, 6, 32}));
  for (int64_t h : kHeadSizes) EXPECT_TRUE(hs.count(h)) << "head size " << h;
  EXPECT_EQ(f.size(), static_cast<size_t>(kFeatureCount));
  EXPECT_EQ(dt.size(), 3u);
  EXPECT_EQ(ck.size(), 5u);
  EXPECT_TRUE(chunked);
}

class GqaOpGrid : public ::testing::TestWithParam<int> {};
TEST_P(GqaOpGrid, MatchesReference) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Sampled, GqaOpGrid, ::testing::Range(0, kCases));

}  // namespace
}  // namespace attnkit
