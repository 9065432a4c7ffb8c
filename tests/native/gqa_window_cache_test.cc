// attnkit tests: GroupQueryAttention with sliding_window_cache = 1 (spec §2.9), a past/present buffer of fixed
// capacity holding each entry's latest tokens. Steps that run in the buffer itself and steps that need a staging
// cache (chunks that evict what their first queries see, prompts longer than the capacity) against the reference,
// on both paths and 1 and 3 threads; the in-place form against the stateless one; and a long decode in place
// against the same tokens attended through an ordinary cache with the same local window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gqa/problem.h"
#include "gqa_reference.h"
#include "gqa_test_inputs.h"

namespace attnkit {
namespace {

using namespace testing_gqa;

struct WindowCase {
  int64_t seq, capacity, window;
  std::vector<int32_t> totals;  // T_b per entry (absolute tokens, may exceed the capacity)
  int bits = 0;                 // 0: float cache; 8 or 4: quantized per channel
  DType cache = DType::kFloat32;
  bool features = false;        // rotary, attention_bias, softcap and a head sink
  int64_t heads = 8, kv_heads = 2, head_size = 32;
};

// Rows a window cache holds after t tokens, written out here independently of the library.
int64_t held_rows(const WindowCase& w, int64_t t) {
  const int64_t evict = w.capacity - w.window + 1;
  return t <= w.capacity ? t : t - evict * ((t - w.capacity + evict - 1) / evict);
}

GqaCase build(const WindowCase& w, uint64_t seed) {
  CaseSpec s;
  s.batch = static_cast<int64_t>(w.totals.size()), s.seq = w.seq, s.heads = w.heads, s.kv_heads = w.kv_heads;
  s.head_size = w.head_size, s.past_capacity = w.capacity, s.seed = seed;
  s.total = *std::max_element(w.totals.begin(), w.totals.end());
  for (int32_t t : w.totals) s.seqlens.push_back(t - 1);
  GqaCase c = make_case(s);
  c.attrs.sliding_window_cache = 1;
  c.attrs.local_window_size = w.window;
  const Shape past_shape{s.batch, s.kv_heads, w.capacity, w.bits == 4 ? w.head_size / 2 : w.head_size};
  if (w.bits) {
    c.attrs.k_quant_type = c.attrs.v_quant_type = "PER_CHANNEL";
    c.attrs.kv_cache_bit_width = w.bits;
    const double qmax = w.bits == 8 ? 127.0 : 7.0;
    const Shape scale_shape{s.kv_heads * s.head_size};
    c.set("k_scale", random_tensor(DType::kFloat32, scale_shape, seed + 5, 0.8 / qmax, 1.2 / qmax));
    c.set("v_scale", random_tensor(DType::kFloat32, scale_shape, seed + 6, 0.8 / qmax, 1.2 / qmax));
  }
  const DType past_dtype = w.bits == 8 ? DType::kInt8 : w.bits == 4 ? DType::kUInt8 : w.cache;
  c.set("past_key", random_tensor(past_dtype, past_shape, seed + 3));
  c.set("past_value", random_tensor(past_dtype, past_shape, seed + 4));
  if (w.features) {
    add_rotary(&c, DType::kFloat32, s.total + 8, w.head_size / 2, false);
    c.attrs.softcap = 3.0f;
    c.set("attention_bias", random_tensor(DType::kFloat32, {s.batch, 1, w.seq, s.total}, seed + 7));
    c.set("head_sink", random_tensor(DType::kFloat32, {w.heads}, seed + 8));
  }
  return c;
}

// fp32 outputs: the op grid's bound, 2e-6 of max(1, the largest reference value) (gqa_op_test.cc).
void expect_near_reference(const std::vector<double>& ref, const Tensor& got) {
  double peak = 1.0, worst = 0.0;
  for (double v : ref) peak = std::max(peak, std::fabs(v));
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::fabs(reference::load_float(got.storage.data(), got.dtype, static_cast<int64_t>(i)) - ref[i]));
  EXPECT_LE(worst, 2e-6 * peak);
}

bool window_staging(GqaCase& c) {
  GqaInputs in = c.inputs();
  GqaProblem p;
  EXPECT_TRUE(validate_gqa(in, c.attrs, c.request, &p).ok());
  window_step(&p);
  return p.window_staging;
}

void check(const WindowCase& w, bool staging, uint64_t seed) {
  GqaCase c = build(w, seed);
  EXPECT_EQ(window_staging(c), staging) << "the case does not run the step it is meant to";
  GqaInputs in = c.inputs();
  reference::GqaReferenceResult ref;
  Status st = reference::group_query_attention(in, c.attrs, c.request, &ref);
  ASSERT_TRUE(st.ok()) << st.message();
  // The present is the capacity's rows: each entry's held tokens, then zeros.
  const size_t row_bytes = ref.present_key.storage.size() / static_cast<size_t>(w.totals.size() * w.kv_heads * w.capacity);
  for (size_t b = 0; b < w.totals.size(); ++b) {
    const int64_t held = held_rows(w, w.totals[b]);
    const uint8_t* rows = ref.present_key.storage.data() + b * w.kv_heads * w.capacity * row_bytes;
    EXPECT_TRUE(std::all_of(rows + held * row_bytes, rows + w.capacity * row_bytes, [](uint8_t v) { return v == 0; }))
        << "entry " << b << ": rows past its " << held << " held ones are not zero";
  }

  for (AttentionPath path : {AttentionPath::kNaive, AttentionPath::kFlash}) {
    SCOPED_TRACE(path == AttentionPath::kNaive ? "naive" : "flash");
    GqaOutputs one, three, in_place;
    ASSERT_NO_FATAL_FAILURE(run_one_and_three_threads(in, c.attrs, c.request, path, &one, &three));
    EXPECT_TRUE(same_bytes(one.present_key, ref.present_key)) << "present_key differs from the reference";
    EXPECT_TRUE(same_bytes(one.present_value, ref.present_value)) << "present_value differs from the reference";
    EXPECT_TRUE(same_bytes(three.present_value, ref.present_value));
    expect_near_reference(ref.output, one.output);

    // In place: the same bits, and the buffer ends holding what the stateless present holds.
    GqaCase cached = c;
    GqaInputs cached_in = cached.inputs();
    RunOptions options;
    options.path = path;
    options.threads = 3;
    st = group_query_attention_in_place(cached_in, cached.attrs, GqaRequest(), &in_place, options);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_TRUE(same_bytes(one.output, in_place.output)) << "stateless and in-place outputs differ";
    for (size_t b = 0; b < w.totals.size(); ++b) {
      const size_t at = b * w.kv_heads * w.capacity * row_bytes;
      for (int64_t g = 0; g < w.kv_heads; ++g) {
        const size_t head = at + g * w.capacity * row_bytes, held = held_rows(w, w.totals[b]) * row_bytes;
        for (const char* name : {"past_key", "past_value"}) {
          const Tensor& present = name[5] == 'k' ? ref.present_key : ref.present_value;
          EXPECT_TRUE(std::equal(present.storage.begin() + head, present.storage.begin() + head + held,
                                 cached.at(name).bytes.begin() + head))
              << name << " of entry " << b << ", kv head " << g << " after the in-place step";
        }
      }
    }
  }
}

TEST(GqaWindowCache, DecodeInTheBuffer) {
  check({1, 6, 4, {3}}, false, 11);          // not full yet
  check({1, 6, 4, {7}}, false, 12);          // full: the oldest 3 rows go, 3 kept + the new one
  check({1, 6, 4, {10, 4, 7}}, false, 13);   // a ragged batch, one entry past the capacity twice over
  check({1, 5, 5, {40}, 8}, false, 14);      // capacity == window: every step evicts one row
  check({1, 9, 4, {31, 12}, 4}, false, 15);  // int4
  check({1, 8, 3, {21}, 0, DType::kFloat16}, false, 16);
  check({1, 6, 4, {12}, 0, DType::kFloat32, true}, false, 17);
}

TEST(GqaWindowCache, ChunksAndPrompts) {
  check({3, 8, 4, {21}}, false, 21);            // the final window still holds what the chunk sees
  check({3, 8, 4, {20}}, true, 27);             // it does not (2 past rows kept, 3 seen): staging
  check({7, 6, 4, {14}, 8}, true, 22);          // it does not: staging
  check({9, 6, 4, {9, 9}}, true, 23);           // a prompt longer than the capacity
  check({5, 6, 4, {5}}, false, 24);             // a prompt that fits
  check({12, 6, 4, {30}, 0, DType::kFloat32, true}, true, 25);
  check({300, 512, 256, {3000}, 4}, true, 26);  // several flash blocks and tasks
}

// Long caches take split-KV decoding: chunks of the buffer, whose kept rows start after the evicted ones.
TEST(GqaWindowCache, LongDecodeSplitsTheBuffer) {
  check({1, 1024, 512, {3000, 1500}, 8}, false, 31);
  check({1, 2048, 2048, {2049}, 0}, false, 32);
}

// 40 decoding steps in place through a window cache, against the same tokens in an ordinary cache with the
// same local window: the attended keys are the same, only their rows (hence the flash blocks) differ.
TEST(GqaWindowCache, DecodeLoopMatchesAnOrdinaryCache) {
  for (int64_t capacity : {5, 11}) {
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    const int64_t window = 5, heads = 4, kv_heads = 2, H = 16, steps = 40;
    const Shape cache_shape{1, kv_heads, capacity, H};
    OwnedTensor window_k = zero_tensor(DType::kFloat32, cache_shape), window_v = window_k;
    OwnedTensor full_k = zero_tensor(DType::kFloat32, {1, kv_heads, steps, H}), full_v = full_k;
    for (int64_t t = 0; t < steps; ++t) {
      CaseSpec s;
      s.heads = heads, s.kv_heads = kv_heads, s.head_size = H, s.total = t + 1, s.seed = 500 + t;
      GqaCase step = make_case(s);
      step.attrs.local_window_size = window;
      GqaCase ordinary = step;
      step.attrs.sliding_window_cache = 1;
      step.set("past_key", window_k);
      step.set("past_value", window_v);
      ordinary.set("past_key", full_k);
      ordinary.set("past_value", full_v);
      GqaInputs a = step.inputs(), b = ordinary.inputs();
      GqaOutputs got, want;
      ASSERT_TRUE(group_query_attention_in_place(a, step.attrs, GqaRequest(), &got).ok()) << "step " << t;
      ASSERT_TRUE(group_query_attention_in_place(b, ordinary.attrs, GqaRequest(), &want).ok()) << "step " << t;
      window_k = step.at("past_key"), window_v = step.at("past_value");
      full_k = ordinary.at("past_key"), full_v = ordinary.at("past_value");
      double worst = 0.0;
      for (int64_t i = 0; i < heads * H; ++i)
        worst = std::max(worst, std::fabs(double(got.output.as<float>()[i]) - want.output.as<float>()[i]));
      EXPECT_LE(worst, 2e-6) << "step " << t;
    }
  }
}

}  // namespace
}  // namespace attnkit
