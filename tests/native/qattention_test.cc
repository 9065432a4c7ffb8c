// attnkit tests: QAttention, the op against core/reference over the sweep (B, S, P, N, H, pruned
// input, every mask spelling, unidirectional, per-tensor/per-column, u8/s8 weights, zero points), every
// ISA, thread-count invariance, and every validation rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnkit/qattention.h"
#include "attnkit/schema.h"
#include "common/half.h"
#include "dispatch.h"
#include "qattention/problem.h"
#include "qattention_reference.h"

namespace attnkit {
namespace {

enum class Mask { kNone, kDummy, kEnd, kEndStart, kKeys, kQueryKeys };
const char* mask_name(Mask m) {
  static const char* names[] = {"none", "(B,1)", "(B)", "(2B)", "(B,T)", "(B,S,T)"};
  return names[int(m)];
}

struct Spec {
  int64_t B = 1, S = 1, P = 0, N = 1, H = 8, extra_in = 0;  // D_i = N*H + extra_in
  bool s8 = true, per_column = false, input_zp = false, weight_zp = false, unidirectional = false;
  Mask mask = Mask::kNone;
  float mask_filter_value = -10000.0f;
  float scale = 0.0f;
  uint32_t seed = 1;
  std::string label() const {
    return "B=" + std::to_string(B) + " S=" + std::to_string(S) + " P=" + std::to_string(P) + " N=" +
           std::to_string(N) + " H=" + std::to_string(H) + " Di+=" + std::to_string(extra_in) + (s8 ? " s8" : " u8") +
           (per_column ? " per-column" : " per-tensor") + (input_zp ? " izp" : "") + (weight_zp ? " wzp" : "") +
           (unidirectional ? " uni" : "") + " mask " + mask_name(mask);
  }
};

// Owns the input buffers and the views over them.
struct Built {
  std::vector<uint8_t> x, w, izp, wzp;
  std::vector<float> bias, xs, ws, past;
  std::vector<int32_t> mask;
  TensorView vx, vw, vbias, vxs, vws, vmask, vizp, vwzp, vpast;
  QAttentionInputs in;
  QAttentionAttributes attrs;
};

void build(const Spec& s, Built* t) {
  std::mt19937 rng(s.seed);
  auto uni = [&](double lo, double hi) { return lo + (hi - lo) * (rng() / 4294967296.0); };
  const int64_t D = s.N * s.H, Di = D + s.extra_in, C = 3 * D, T = s.P + s.S;
  t->x.resize(s.B * s.S * Di);
  for (auto& v : t->x) v = uint8_t(rng());
  t->w.resize(Di * C);
  for (auto& v : t->w) v = uint8_t(rng());
  t->bias.resize(C);
  for (auto& v : t->bias) v = float(uni(-0.5, 0.5));
  // Scales that keep projected values O(1): |a - za| ~ 128, |b - zb| ~ 74, sums over D_i terms.
  t->xs = {1.0f / 128};
  const double wmag = 1.0 / (74.0 * std::sqrt(double(Di)));
  t->ws.resize(s.per_column ? C : 1);
  for (auto& v : t->ws) v = float(wmag * uni(0.5, 1.5) * (rng() % 4 == 0 ? -1 : 1));  // negative scales are legal
  t->vx = {DType::kUInt8, {s.B, s.S, Di}, t->x.data()};
  t->vw = {s.s8 ? DType::kInt8 : DType::kUInt8, {Di, C}, t->w.data()};
  t->vbias = {DType::kFloat32, {C}, t->bias.data()};
  t->vxs = {DType::kFloat32, {}, t->xs.data()};
  t->vws = {DType::kFloat32, s.per_column ? Shape{C} : Shape{1}, t->ws.data()};
  t->in = QAttentionInputs();
  t->in.input = &t->vx;
  t->in.weight = &t->vw;
  t->in.bias = &t->vbias;
  t->in.input_scale = &t->vxs;
  t->in.weight_scale = &t->vws;
  if (s.input_zp) {
    t->izp = {uint8_t(100 + rng() % 56)};
    t->vizp = {DType::kUInt8, {1}, t->izp.data()};
    t->in.input_zero_point = &t->vizp;
  }
  if (s.weight_zp) {
    t->wzp.resize(s.per_column ? C : 1);
    for (auto& v : t->wzp) v = s.s8 ? uint8_t(int8_t(int(rng() % 41) - 20)) : uint8_t(108 + rng() % 41);
    t->vwzp = {t->vw.dtype, s.per_column ? Shape{C} : Shape{}, t->wzp.data()};
    t->in.weight_zero_point = &t->vwzp;
  }
  if (s.P > 0) {
    t->past.resize(2 * s.B * s.N * s.P * s.H);
    for (auto& v : t->past) v = float(uni(-1, 1));
    t->vpast = {DType::kFloat32, {2, s.B, s.N, s.P, s.H}, t->past.data()};
    t->in.past = &t->vpast;
  }
  switch (s.mask) {
    case Mask::kNone: break;
    case Mask::kDummy:
      t->mask.assign(s.B, 0);  // values are ignored, even 0
      t->vmask = {DType::kInt32, {s.B, 1}, t->mask.data()};
      break;
    case Mask::kEnd:
    case Mask::kEndStart: {
      // End positions in [0, T + 3]: 0 masks every key (an all-masked row), > T masks none.
      const int64_t n = s.mask == Mask::kEnd ? s.B : 2 * s.B;
      t->mask.resize(n);
      for (int64_t b = 0; b < s.B; ++b) t->mask[b] = b == 0 && s.B > 1 ? 0 : int32_t(rng() % (T + 4));
      for (int64_t b = s.B; b < n; ++b) t->mask[b] = int32_t(rng() % (T + 3)) - 1;  // starts, also < 0 and > T
      t->vmask = {DType::kInt32, {n}, t->mask.data()};
      break;
    }
    case Mask::kKeys:
      t->mask.resize(s.B * T);
      for (auto& v : t->mask) v = int32_t(rng() % 4) - 1;  // <= 0 masks
      if (s.B > 1) std::fill(t->mask.begin(), t->mask.begin() + T, 0);  // batch 0 fully masked
      t->vmask = {DType::kInt32, {s.B, T}, t->mask.data()};
      break;
    case Mask::kQueryKeys:
      t->mask.resize(s.B * s.S * T);
      for (auto& v : t->mask) v = int32_t(rng() % 3);
      std::fill(t->mask.begin(), t->mask.begin() + T, 0);  // query row 0 of batch 0 fully masked
      t->vmask = {DType::kInt32, {s.B, s.S, T}, t->mask.data()};
      break;
  }
  if (s.mask != Mask::kNone) t->in.mask_index = &t->vmask;
  t->attrs = QAttentionAttributes();
  t->attrs.num_heads = s.N;
  t->attrs.unidirectional = s.unidirectional;
  t->attrs.mask_filter_value = s.mask_filter_value;
  t->attrs.scale = s.scale;
}

// Tolerance. Errors of the fp32 op against the double reference: projection values carry ~2^-24
// relative error, a score over H <= 64 terms of O(1) magnitude ~1e-6 absolute, the shared exp polynomial
// < 2 ulp, and the output is a convex combination of V rows, so its error scales with max|V| rather than
// with the (possibly cancelling) output itself: |err| <= 1e-5 * (|ref| + max|V|) bounds all of these with
// margin. A fully masked row (every key got mask_filter_value added in fp32) is the exception: its
// logits sit near -10000 where the fp32 grid is 2^-10, and the op's fp32 score can round to the
// neighbouring grid point of the reference's — one such step moves the output by at most 2^-10 * max|V|.
void expect_close(const Spec& s, const Built& t, const QAttentionOutputs& got,
                  const reference::QAttentionReferenceResult& want) {
  const int64_t D = s.N * s.H, T = s.P + s.S;
  ASSERT_EQ(got.output.shape, want.output_shape);
  double vmax = 0;
  for (int64_t i = 0; i < want.present.elements() / 2; ++i)
    vmax = std::max(vmax, std::fabs(double(want.present.as<float>()[want.present.elements() / 2 + i])));
  QAttentionProblem p;
  ASSERT_TRUE(validate_qattention(t.in, t.attrs, QAttentionRequest{true}, &p).ok());
  const float* out = got.output.as<float>();
  int failures = 0;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t i = 0; i < s.S; ++i) {
      bool all_masked = p.mask != QMaskKind::kNone;
      for (int64_t j = 0; j < T && all_masked; ++j) all_masked = p.key_masked(b, i, j);
      for (int64_t d = 0; d < D; ++d) {
        const size_t k = (b * s.S + i) * D + d;
        const double ref = want.output[k];
        const double tol = all_masked ? std::ldexp(1.0, -10) * vmax + 1e-5 * std::fabs(ref)
                                      : 1e-5 * (std::fabs(ref) + vmax);
        if (!(std::fabs(out[k] - ref) <= tol) && failures++ < 3) {
          ADD_FAILURE() << s.label() << ": output[" << b << "," << i << "," << d << "] = " << out[k]
                        << ", reference " << ref << " (tol " << tol << ")";
        }
      }
    }
  }
}

void run_and_compare(const Spec& s, int threads = 0) {
  Built t;
  build(s, &t);
  const bool want_present = true;
  QAttentionOutputs got;
  RunOptions opts;
  opts.threads = threads;
  Status st = q_attention(t.in, t.attrs, QAttentionRequest{want_present}, &got, opts);
  ASSERT_TRUE(st.ok()) << s.label() << ": " << st.message();
  reference::QAttentionReferenceResult want;
  st = reference::q_attention(t.in, t.attrs, QAttentionRequest{true}, &want);
  ASSERT_TRUE(st.ok()) << st.message();
  expect_close(s, t, got, want);
  // present: past rows are copied bit for bit; new rows are float(acc) * scale + bias in fp32, two
  // roundings of terms no larger than max|present| (the data keeps acc * scale and bias O(1)), so the
  // error is below 2 * 2^-24 * max|present| even where acc * scale and bias cancel.
  ASSERT_EQ(got.present.shape, want.present.shape);
  const float* gp = got.present.as<float>();
  const float* wp = want.present.as<float>();
  double pmax = 0;
  for (int64_t i = 0; i < want.present.elements(); ++i) pmax = std::max(pmax, std::fabs(double(wp[i])));
  for (int64_t i = 0; i < got.present.elements(); ++i) {
    ASSERT_LE(std::fabs(gp[i] - wp[i]), std::ldexp(pmax, -23)) << s.label() << " present[" << i << "]";
  }
}

TEST(QAttention, SweepAgainstReference) {
  const int64_t Bs[] = {1, 2}, Ss[] = {1, 2, 5, 64}, Ps[] = {0, 15}, Ns[] = {1, 2, 12}, Hs[] = {4, 16, 64};
  uint32_t idx = 0;
  for (int64_t B : Bs)
    for (int64_t S : Ss)
      for (int64_t P : Ps)
        for (int64_t N : Ns)
          for (int64_t H : Hs) {
            ++idx;
            // Keep the int64 reference projection affordable: the largest heads only with short inputs.
            if (N * H >= 768 && B * S > 5) continue;
            Spec s;
            s.B = B, s.S = S, s.P = P, s.N = N, s.H = H, s.seed = idx;
            s.extra_in = (idx % 3) * 5;  // pruned models: D_i > D
            s.s8 = idx % 2;
            s.per_column = (idx / 2) % 2;
            s.input_zp = (idx / 4) % 2;
            s.weight_zp = (idx / 3) % 2;
            s.mask = Mask(idx % 6);
            s.unidirectional = idx % 4 == 1;
            run_and_compare(s);
          }
}

TEST(QAttention, MaskFilterValueAndScale) {
  for (Mask m : {Mask::kEnd, Mask::kKeys, Mask::kQueryKeys}) {
    Spec s;
    s.B = 2, s.S = 5, s.P = 3, s.N = 2, s.H = 16, s.mask = m;
    s.mask_filter_value = -3.0f;  // small: masked keys keep visible weight, so the value itself is tested
    s.scale = 0.3f;
    run_and_compare(s);
    s.unidirectional = true;  // causal overwrites with -FLT_MAX whatever mask_filter_value is
    run_and_compare(s);
  }
}

TEST(QAttention, EveryIsaMatchesReference) {
  const std::string before = kernel_table().isa;
  for (const std::string& isa : available_isas()) {
    ASSERT_TRUE(set_kernel_isa(isa));
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Spec s;
      s.B = 2, s.S = seed == 1 ? 1 : 7, s.P = seed % 2 ? 15 : 0, s.N = 3, s.H = seed == 3 ? 4 : 16;
      s.extra_in = 3, s.s8 = seed % 2, s.per_column = seed > 2, s.input_zp = true, s.weight_zp = true;
      s.mask = Mask(seed + 1), s.unidirectional = seed == 2, s.seed = 100 + seed;
      run_and_compare(s);
    }
  }
  ASSERT_TRUE(set_kernel_isa(before));
}

// Random values over a long past cancel to outputs of about max|V| / sqrt(T), while one fp32 chain of multiply-adds
// over all T keys rounds by about sqrt(T) ulps of its partial sums: 6.3e-6 and 7.5e-6 of the output's peak from the
// reference here. Summed by key blocks (kQAttentionSumKeys) it stays within 2e-6 of the peak, the bound
// GroupQueryAttention's long contexts meet (gqa_op_test.cc).
TEST(QAttention, LongPastSumsStayWithinTwoMillionthsOfTheOutputsPeak) {
  for (int64_t S : {1, 2}) {
    Spec s;
    s.S = S, s.P = 65536 - S, s.N = 2, s.H = 16, s.seed = 500 + S;
    Built t;
    build(s, &t);
    QAttentionOutputs got;
    const Status st = q_attention(t.in, t.attrs, QAttentionRequest{true}, &got);
    ASSERT_TRUE(st.ok()) << st.message();
    reference::QAttentionReferenceResult want;
    ASSERT_TRUE(reference::q_attention(t.in, t.attrs, QAttentionRequest{true}, &want).ok());
    double peak = 0, worst = 0;
    for (size_t k = 0; k < want.output.size(); ++k) {
      peak = std::max(peak, std::fabs(want.output[k]));
      worst = std::max(worst, std::fabs(got.output.as<float>()[k] - want.output[k]));
    }
    EXPECT_LE(worst, 2e-6 * peak) << s.label() << ", peak " << peak;
  }
}

// A decode step and a short chunk after a long past (a 2.25 MB present, the streamed SV and prefetching QK), on
// every ISA, against the reference.
TEST(QAttention, StepsAfterALongPast) {
  const std::string before = kernel_table().isa;
  for (const std::string& isa : available_isas()) {
    ASSERT_TRUE(set_kernel_isa(isa));
    for (int64_t S : {1, 3}) {
      Spec s;
      s.S = S, s.P = 1100, s.N = 4, s.H = 64, s.per_column = S == 3, s.weight_zp = true, s.seed = 400 + S;
      s.mask = S == 1 ? Mask::kKeys : Mask::kEnd;
      s.unidirectional = S == 3;
      run_and_compare(s);
    }
  }
  ASSERT_TRUE(set_kernel_isa(before));
}

// Prefill longer than one attention row block (kQAttentionQueryBlock): K/V read in place with shared
// per-head panels (H = 16), gathered rows (H = 4), a last block short enough for the unpacked path
// (S = 197), causal masking across blocks, and the result independent of the thread count.
TEST(QAttention, SeveralQueryBlocksPerHead) {
  uint32_t seed = 300;
  for (int64_t S : {197, 203}) {
    for (int64_t H : {4, 16}) {
      Spec s;
      s.B = 2, s.S = S, s.N = 2, s.H = H, s.per_column = true, s.weight_zp = true, s.seed = ++seed;
      s.mask = seed % 2 ? Mask::kKeys : Mask::kEnd;
      s.unidirectional = H == 16;
      run_and_compare(s, 1);
      run_and_compare(s, 3);
    }
  }
}

// A prompt (the projection in column blocks) and decode steps (the weight's rows in one range per thread). At
// H = 64 (a head's columns are whole column blocks) and N = 4, 1 and 2 threads run a task per head (its
// projection, then its attention) and 3 and 5 run the phases over all heads, with and without past.
TEST(QAttention, BitIdenticalForAnyThreadCount) {
  Spec prompt;
  prompt.B = 2, prompt.S = 33, prompt.P = 15, prompt.N = 4, prompt.H = 16, prompt.mask = Mask::kKeys;
  prompt.per_column = true, prompt.weight_zp = true;
  Spec step = prompt;
  step.S = 1, step.H = 96, step.extra_in = 5, step.input_zp = true;  // 389 weight rows: up to 6 ranges
  Spec head_tasks = prompt;
  head_tasks.H = 64, head_tasks.S = 100;  // two row blocks per head
  Spec head_tasks_past = head_tasks;
  head_tasks.P = 0;
  for (const Spec& s : {prompt, step, head_tasks, head_tasks_past}) {
    Built t;
    build(s, &t);
    std::vector<QAttentionOutputs> outs(4);
    const int threads[] = {1, 2, 3, 5};
    for (int i = 0; i < 4; ++i) {
      RunOptions opts;
      opts.threads = threads[i];
      ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{true}, &outs[i], opts).ok());
    }
    for (int i = 1; i < 4; ++i) {
      EXPECT_EQ(outs[0].output.storage, outs[i].output.storage) << s.label() << ", " << threads[i] << " threads";
      EXPECT_EQ(outs[0].present.storage, outs[i].present.storage) << s.label() << ", " << threads[i] << " threads";
    }
    run_and_compare(s, 5);
  }
}

TEST(QAttention, ReportsPeakScratch) {
  Spec s;
  s.B = 1, s.S = 8, s.N = 2, s.H = 8;
  Built t;
  build(s, &t);
  QAttentionOutputs out;
  size_t peak = 0;
  RunOptions opts;
  opts.peak_scratch_bytes = &peak;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{}, &out, opts).ok());
  EXPECT_GE(peak, size_t(8 * 48 * 4));  // at least the (B*S, 3D) projection
  EXPECT_TRUE(out.present.empty());
  size_t predicted = 0;
  ASSERT_TRUE(qattention_peak_scratch_bytes(t.in, t.attrs, QAttentionRequest{}, 0, &predicted).ok());
  EXPECT_EQ(predicted, peak);
}

TEST(QAttention, SchemaShapesMatchTheOp) {
  Spec s;
  s.B = 2, s.S = 3, s.P = 5, s.N = 2, s.H = 4, s.extra_in = 2;
  Built t;
  build(s, &t);
  QAttentionOutputShapes shapes;
  ASSERT_TRUE(qattention_output_shapes(t.in, t.attrs, QAttentionRequest{true}, &shapes).ok());
  QAttentionOutputs out;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{true}, &out).ok());
  EXPECT_EQ(shapes.output.shape, out.output.shape);
  EXPECT_EQ(shapes.present.shape, out.present.shape);
  EXPECT_EQ(shapes.present.shape, (Shape{2, 2, 2, 8, 4}));
  EXPECT_TRUE(shapes.present.produced);
  size_t bytes = 0;
  EXPECT_EQ(qattention_output_shapes(t.in, t.attrs, QAttentionRequest{true}, nullptr).message(),
            "shapes must not be null");
  EXPECT_EQ(qattention_peak_scratch_bytes(t.in, t.attrs, QAttentionRequest{true}, 0, nullptr).message(),
            "bytes must not be null");
  EXPECT_EQ(qattention_peak_scratch_bytes(t.in, t.attrs, QAttentionRequest{true}, -1, &bytes).message(),
            "threads = -1 must be >= 0");
  t.attrs.do_rotary = 1;
  Status st = qattention_output_shapes(t.in, t.attrs, QAttentionRequest{true}, &shapes);
  EXPECT_FALSE(st.ok());
}

// ---- validation: each case breaks one rule; the message must name the input/attribute ----
struct Broken {
  const char* want;
  void (*apply)(Built*, std::vector<int32_t>*, std::vector<float>*);
};

TEST(QAttention, ValidationRejectsEveryBrokenRule) {
  static std::vector<uint8_t> bytes(4096, 1);
  static std::vector<int32_t> ints(64, 1);
  static std::vector<float> floats(4096, 1.0f);
  const Broken cases[] = {
      {"num_heads: must be positive", [](Built* t, auto*, auto*) { t->attrs.num_heads = 0; }},
      {"num_heads: hidden_size 8 must be divisible by num_heads 3", [](Built* t, auto*, auto*) { t->attrs.num_heads = 3; }},
      {"do_rotary: only 0", [](Built* t, auto*, auto*) { t->attrs.do_rotary = 1; }},
      {"past_present_share_buffer: only 0", [](Built* t, auto*, auto*) { t->attrs.past_present_share_buffer = 1; }},
      {"unidirectional: must be 0 or 1", [](Built* t, auto*, auto*) { t->attrs.unidirectional = 2; }},
      {"input: required input is missing", [](Built* t, auto*, auto*) { t->in.input = nullptr; }},
      {"weight_scale: required input is missing", [](Built* t, auto*, auto*) { t->in.weight_scale = nullptr; }},
      {"input: must be uint8, got int8", [](Built* t, auto*, auto*) { t->vx.dtype = DType::kInt8; }},
      {"input: must have rank 3", [](Built* t, auto*, auto*) { t->vx.shape = {2, 24}; }},
      {"weight: must be int8 or uint8", [](Built* t, auto*, auto*) { t->vw.dtype = DType::kFloat32; }},
      {"weight: dim 0 must equal input_hidden_size", [](Built* t, auto*, auto*) { t->vw.shape = {7, 24}; }},
      {"weight: dim 1 must be 3 * hidden_size", [](Built* t, auto*, auto*) { t->vw.shape = {8, 25}; }},
      {"bias: must be (3 * hidden_size)", [](Built* t, auto*, auto*) { t->vbias.shape = {23}; }},
      {"bias: must be float32 or float16, got bfloat16",
       [](Built* t, auto*, auto*) { t->vbias.dtype = DType::kBFloat16; }},
      {"input_scale: must be a scalar or one element", [](Built* t, auto*, auto*) { t->vxs.shape = {2}; }},
      {"weight_scale: must be a scalar, one element or (3 * hidden_size)", [](Built* t, auto*, auto*) { t->vws.shape = {8}; }},
      {"input_zero_point: must be uint8", [](Built* t, auto*, auto*) {
         t->vizp = {DType::kInt8, {}, bytes.data()};
         t->in.input_zero_point = &t->vizp;
       }},
      {"weight_zero_point: must be int8", [](Built* t, auto*, auto*) {
         t->vwzp = {DType::kUInt8, {}, bytes.data()};
         t->in.weight_zero_point = &t->vwzp;
       }},
      {"weight_zero_point: must be a scalar, one element or (3 * hidden_size)", [](Built* t, auto*, auto*) {
         t->vwzp = {DType::kInt8, {2, 12}, bytes.data()};
         t->in.weight_zero_point = &t->vwzp;
       }},
      {"past: must be (2, batch=2", [](Built* t, auto*, auto*) {
         t->vpast = {DType::kFloat32, {2, 2, 2, 3, 5}, floats.data()};
         t->in.past = &t->vpast;
       }},
      {"present: must be requested when past is given", nullptr},
      {"mask_index: must be int32", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt64, {2}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: 1D mask must have batch_size", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {3}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: 1D mask must have batch_size", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {8}, ints.data()};  // 3B + 2: a CUDA-only spelling
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: end position -1 at index 1 is negative", [](Built* t, std::vector<int32_t>* m, auto*) {
         *m = {2, -1};
         t->vmask = {DType::kInt32, {2}, m->data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: 2D mask must be (batch_size, total_sequence_length)", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {1, 3}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: 3D mask must be (batch_size, sequence_length, total_sequence_length)", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {2, 3, 4}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: 4D (Megatron) masks are not supported", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {2, 1, 3, 3}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"mask_index: must be 1D (B) or (2B), 2D (B, T) or 3D (B, S, T)", [](Built* t, auto*, auto*) {
         t->vmask = {DType::kInt32, {}, ints.data()};
         t->in.mask_index = &t->vmask;
       }},
      {"input: input_hidden_size 40000 exceeds 33025", [](Built* t, auto*, auto*) {
         t->vx.shape = {2, 3, 40000};
         t->vw.shape = {40000, 24};
       }},
      {"present: would need more than 16 GiB", [](Built* t, auto*, auto*) {
         t->vpast = {DType::kFloat32, {2, 2, 2, int64_t(1) << 40, 4}, floats.data()};
         t->in.past = &t->vpast;
       }},
  };
  for (const Broken& c : cases) {
    Spec s;
    s.B = 2, s.S = 3, s.N = 2, s.H = 4;
    Built t;
    build(s, &t);
    std::vector<int32_t> mask;
    std::vector<float> extra;
    QAttentionRequest request{true};
    if (c.apply) {
      c.apply(&t, &mask, &extra);
    } else {
      t.vpast = {DType::kFloat32, {2, 2, 2, 3, 4}, floats.data()};
      t.in.past = &t.vpast;
      request.present = false;
    }
    QAttentionOutputs out;
    Status st = q_attention(t.in, t.attrs, request, &out);
    ASSERT_FALSE(st.ok()) << c.want;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << "got: " << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos);
  }
}

TEST(QAttention, IgnoredDummyMaskAndClampedPositions) {
  // (1, 1) is ignored for any batch size, like (B, 1); end positions beyond T mask nothing.
  Spec s;
  s.B = 2, s.S = 3, s.N = 2, s.H = 8;
  Built t;
  build(s, &t);
  QAttentionOutputs plain, dummy, beyond;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{}, &plain).ok());
  std::vector<int32_t> zero = {0};
  TensorView one_one{DType::kInt32, {1, 1}, zero.data()};
  t.in.mask_index = &one_one;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{}, &dummy).ok());
  std::vector<int32_t> ends = {3, 1000};
  TensorView end_view{DType::kInt32, {2}, ends.data()};
  t.in.mask_index = &end_view;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{}, &beyond).ok());
  EXPECT_EQ(plain.output.storage, dummy.output.storage);
  EXPECT_EQ(plain.output.storage, beyond.output.storage);
}

// float16 is ORT's float32 kernel between casts: the float32 op's bits on the widened values, each output rounded
// once to nearest even; the schema's peak scratch is the call's; the in-place form (and so the cache) refuses it.
TEST(QAttention, Float16IsTheFloat32OpBetweenCasts) {
  Spec s;
  s.B = 2, s.S = 5, s.P = 3, s.N = 2, s.H = 16, s.per_column = true, s.unidirectional = true, s.mask = Mask::kEnd;
  Built t;
  build(s, &t);
  // float16 values, which the float32 call then sees exactly as the float16 one widens them.
  std::vector<uint16_t> halves[4];
  std::vector<float>* floats[4] = {&t.bias, &t.xs, &t.ws, &t.past};
  TensorView* wide_views[4] = {&t.vbias, &t.vxs, &t.vws, &t.vpast};
  TensorView half_views[4];
  QAttentionInputs half = t.in;
  const TensorView** half_slots[4] = {&half.bias, &half.input_scale, &half.weight_scale, &half.past};
  for (int i = 0; i < 4; ++i) {
    for (float& v : *floats[i]) {
      halves[i].push_back(float_to_f16(v));
      v = f16_to_float(halves[i].back());
    }
    half_views[i] = TensorView{DType::kFloat16, wide_views[i]->shape, halves[i].data()};
    *half_slots[i] = &half_views[i];
  }
  QAttentionOutputs want, got;
  ASSERT_TRUE(q_attention(t.in, t.attrs, QAttentionRequest{true}, &want).ok());
  size_t peak = 0;
  RunOptions options;
  options.threads = 3;
  options.peak_scratch_bytes = &peak;
  const Status st = q_attention(half, t.attrs, QAttentionRequest{true}, &got, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(got.output.dtype, DType::kFloat16);
  EXPECT_EQ(got.present.dtype, DType::kFloat16);
  EXPECT_EQ(got.output.storage, rounded_to_float16(want.output).storage);
  EXPECT_EQ(got.present.storage, rounded_to_float16(want.present).storage);
  size_t predicted = 0;
  ASSERT_TRUE(qattention_peak_scratch_bytes(half, t.attrs, QAttentionRequest{true}, 3, &predicted).ok());
  EXPECT_EQ(predicted, peak);
  QAttentionOutputShapes shapes;
  ASSERT_TRUE(qattention_output_shapes(half, t.attrs, QAttentionRequest{true}, &shapes).ok());
  EXPECT_EQ(shapes.output.dtype, DType::kFloat16);
  QAttentionOutputs in_place;
  const Status refused = q_attention_in_place(half, t.attrs, &in_place, RunOptions(), 0);
  EXPECT_NE(refused.message().find("float16 runs through the stateless q_attention only"), std::string::npos)
      << refused.message();
  half.input_scale = &t.vxs;
  EXPECT_EQ(q_attention(half, t.attrs, QAttentionRequest{true}, &got).message(),
            "input_scale: must be float16, got float32 (like bias)");
}

}  // namespace
}  // namespace attnkit
