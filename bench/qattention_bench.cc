// attnkit benches: QAttention end to end for the shapes — B=1, D=768, N=12, u8 x s8 per-column —
// prefill S in {128, 512} and a decode step S=1 with P=511 (warm, and over cold layers), at 1 and 2 threads;
// plus the projection kernel alone per variant (GOP/s), to see how much of the op is the int8 GEMM, and the
// AVX2 instruction mixes' ceilings. ORT is timed by bench/js/qattention_ort.mjs in the same run.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnkit/qattention.h"
#include "host_limits.h"
#include "qattention/gemm_variants.h"

namespace attnkit {
namespace {

struct QaBenchProblem {
  std::vector<uint8_t> x, w, wzp;
  std::vector<float> bias, xs, ws, past;
  TensorView vx, vw, vbias, vxs, vws, vwzp, vpast;
  QAttentionInputs in;
  QAttentionAttributes attrs;
  bool with_past = false;

  QaBenchProblem(int64_t S, int64_t P) {
    const int64_t B = 1, D = 768, N = 12, H = 64, C = 3 * D;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    x.resize(B * S * D);
    for (auto& v : x) v = uint8_t(rng());
    w.resize(D * C);
    for (auto& v : w) v = uint8_t(rng());
    wzp.resize(C);
    for (auto& v : wzp) v = uint8_t(int8_t(int(rng() % 41) - 20));
    bias.resize(C);
    for (auto& v : bias) v = 0.5f * u(rng);
    xs = {1.0f / 128};
    ws.resize(C);
    for (auto& v : ws) v = (1.0f + 0.5f * u(rng)) / (74.0f * 27.7f);
    vx = {DType::kUInt8, {B, S, D}, x.data()};
    vw = {DType::kInt8, {D, C}, w.data()};
    vbias = {DType::kFloat32, {C}, bias.data()};
    vxs = {DType::kFloat32, {}, xs.data()};
    vws = {DType::kFloat32, {C}, ws.data()};
    vwzp = {DType::kInt8, {C}, wzp.data()};
    in.input = &vx;
    in.weight = &vw;
    in.bias = &vbias;
    in.input_scale = &vxs;
    in.weight_scale = &vws;
    in.weight_zero_point = &vwzp;
    if (P > 0) {
      past.resize(2 * B * N * P * H);
      for (auto& v : past) v = u(rng);
      vpast = {DType::kFloat32, {2, B, N, P, H}, past.data()};
      in.past = &vpast;
      with_past = true;
    }
    attrs.num_heads = N;
  }
};

// A model steps layer after layer, each with its own weight and cache, so a decode step reads them from DRAM: the
// cold form cycles through enough layers that together they exceed L3 several times over (as gqa_bench's).
constexpr double kColdBytes = 160.0 * (1 << 20);

// Where a prompt's work runs as one task per head, each head's projected columns are read on the core that wrote
// them; in phases, by whichever core claims the next task. What a line costs either way, in the same run.
void report_host(benchmark::State& state) {
  static const double own = bench::measured_handoff_read_gbs(size_t{512} << 10, false);
  static const double other = bench::measured_handoff_read_gbs(size_t{512} << 10, true);
  for (auto _ : state) benchmark::DoNotOptimize(own);
  state.counters["read_512KiB_own_writes_GBs"] = own;
  state.counters["read_512KiB_other_thread_writes_GBs"] = other;
}
BENCHMARK(report_host)->Name("host_limits")->Iterations(1);

// args: S, P, threads, cold (0: one layer stepped again and again, warm in the caches; 1: cold layers, each with
// its own outputs as a model's runtime keeps them)
void BM_QAttention(benchmark::State& state) {
  const int64_t S = state.range(0), P = state.range(1);
  const double layer_bytes = 768.0 * 2304 + 2.0 * 768 * static_cast<double>(2 * P + S) * sizeof(float);
  const size_t layers = state.range(3) ? static_cast<size_t>(kColdBytes / layer_bytes) + 1 : 1;
  std::vector<std::unique_ptr<QaBenchProblem>> problems;
  for (size_t l = 0; l < layers; ++l) problems.push_back(std::make_unique<QaBenchProblem>(S, P));
  RunOptions opts;
  opts.threads = static_cast<int>(state.range(2));
  std::vector<QAttentionOutputs> outputs(layers);
  const auto step = [&](size_t layer) {
    const QaBenchProblem& p = *problems[layer];
    return q_attention(p.in, p.attrs, QAttentionRequest{p.with_past}, &outputs[layer], opts);
  };
  // Each layer's outputs fault their pages in on its first step.
  for (size_t layer = 0; layer < layers; ++layer) step(layer);
  size_t layer = 0;
  for (auto _ : state) {
    Status st = step(layer);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(outputs[layer].output.storage.data());
    layer = (layer + 1) % layers;
  }
  const double macs = double(S) * 768 * 2304;
  state.counters["proj_GOPs"] = benchmark::Counter(2 * macs, benchmark::Counter::kIsIterationInvariantRate,
                                                   benchmark::Counter::kIs1000);
}
BENCHMARK(BM_QAttention)
    ->ArgNames({"S", "P", "threads", "cold"})
    ->Args({128, 0, 1, 0})->Args({128, 0, 2, 0})
    ->Args({512, 0, 1, 0})->Args({512, 0, 2, 0})
    ->Args({1, 511, 1, 0})->Args({1, 511, 2, 0})
    ->Args({1, 511, 1, 1})->Args({1, 511, 2, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// The projection alone: (S x 768) x (768 x 2304), every variant this host runs. arg: variant index, S.
void BM_GemmU8X8(benchmark::State& state) {
  const auto variants = gemm_u8x8_variants();
  const size_t vi = static_cast<size_t>(state.range(0));
  if (vi >= variants.size()) {
    state.SkipWithError("variant not available here");
    return;
  }
  const GemmU8X8Kernels& k = variants[vi];
  state.SetLabel(k.variant);
  if (std::string(k.variant) == "amx-emulated") {  // scalar tiles: a test vehicle, seconds per call
    state.SkipWithError("amx-emulated is for tests");
    return;
  }
  const size_t M = static_cast<size_t>(state.range(1)), K = 768, N = 2304;
  std::mt19937 rng(3);
  std::vector<uint8_t> a(M * K), b(K * N);
  for (auto& v : a) v = uint8_t(rng());
  for (auto& v : b) v = uint8_t(rng());
  std::vector<int32_t> zp(N, 3), c(M * N);
  std::vector<uint8_t> ws(k.workspace_bytes(M, 64, K));
  for (auto _ : state) {
    // As the driver splits it on one thread: a decode step's rows over all columns, else column blocks of 64.
    if (M <= kGemmDirectMaxRows) {
      k.gemm(M, N, K, a.data(), K, 128, b.data(), N, true, zp.data(), c.data(), N, nullptr);
    } else {
      for (size_t n0 = 0; n0 < N; n0 += 64)
        k.gemm(M, 64, K, a.data(), K, 128, b.data() + n0, N, true, zp.data() + n0, c.data() + n0, N, ws.data());
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GOPs"] = benchmark::Counter(2.0 * M * K * N, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_GemmU8X8)->ArgNames({"variant", "S"})->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 128}})
    ->Unit(benchmark::kMicrosecond);

#if defined(__x86_64__) && defined(__GNUC__)
// The AVX2 projection's ceiling on this core: GOP/s (2 per multiply-accumulate, as BM_GemmU8X8) of the exact
// madd + add mix the avx2-madd16 kernel runs, next to the saturating maddubs mix (inexact for u8 x s8, so
// attnkit cannot use it; shown because a peer that accepts the saturation runs it). arg: 1 = saturating.
void BM_Int8MixPeak(benchmark::State& state) {
  const bool saturating = state.range(0) != 0;
  long iters = 1000;
  benchmark::DoNotOptimize(iters);
  for (auto _ : state)
    benchmark::DoNotOptimize(saturating ? bench::int8_mix_loop_avx2<true>(iters) : bench::int8_mix_loop_avx2<false>(iters));
  state.SetLabel(saturating ? "maddubs+madd+add (saturating)" : "madd+add (exact)");
  state.counters["GOPs"] = benchmark::Counter(2000.0 * 12 * bench::kInt8MixMacs[saturating],
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}
const int int8_mix_registered = [] {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    benchmark::RegisterBenchmark("BM_Int8MixPeak", BM_Int8MixPeak)->ArgName("saturating")->Arg(0)->Arg(1);
  return 0;
}();
#endif

}  // namespace
}  // namespace attnkit
