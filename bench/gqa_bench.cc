// attnkit benches: GroupQueryAttention end to end — naive vs flash, prefill and decode, stateless and
// in place — for the shapes of issue 3 (N=16, Nk=8, H=128), with GFLOP/s and GB/s counters next to this
// host's FMA peak and read bandwidth measured in the same run (the "host_*" rows), so ratios are honest.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>

#include "attnkit/gqa.h"
#include "attnkit/kv_cache.h"
#include "host_limits.h"

namespace attnkit {
namespace {

enum CacheKind { kF32 = 0, kI8 = 1, kI4 = 2 };
const char* const kCacheNames[] = {"f32", "int8", "int4"};

struct Problem {
  // Allocated as a GqaKvCache's buffers are (on cache lines, attnkit/tensor.h): the in-place modes stand for one.
  std::vector<TensorBytes> buffers;
  std::vector<TensorView> views;
  GqaInputs inputs;
  GqaAttributes attrs;

  const TensorView* add(DType dtype, Shape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    const size_t n = static_cast<size_t>(shape_elements(shape));
    buffers.emplace_back(n * dtype_size(dtype));
    uint8_t* data = buffers.back().data();
    std::uniform_real_distribution<float> dist(lo, hi);
    for (size_t i = 0; i < n; ++i) {
      if (dtype == DType::kFloat32) {
        float v = dist(rng);
        std::memcpy(data + 4 * i, &v, 4);
      } else {
        data[i] = static_cast<uint8_t>(rng());
      }
    }
    views.push_back(TensorView{dtype, std::move(shape), data});
    return &views.back();
  }
  const TensorView* add_int32(Shape shape, int32_t value) {
    const size_t n = static_cast<size_t>(shape_elements(shape));
    buffers.emplace_back(n * 4);
    for (size_t i = 0; i < n; ++i) std::memcpy(buffers.back().data() + 4 * i, &value, 4);
    views.push_back(TensorView{DType::kInt32, std::move(shape), buffers.back().data()});
    return &views.back();
  }
};

// S new tokens on top of `past` cached ones: S == T is a prompt, S == 1 a decode step. The cache
// tensors hold `capacity` rows (>= past; the in-place form needs room for the new tokens).
void make_problem(Problem* p, int64_t N, int64_t Nk, int64_t H, int64_t S, int64_t past, CacheKind kind,
                  int64_t capacity = -1) {
  if (capacity < past) capacity = past;
  std::mt19937 rng(5);
  p->buffers.reserve(16);
  p->views.reserve(16);
  p->attrs.num_heads = N;
  p->attrs.kv_num_heads = Nk;
  const int64_t T = past + S;
  p->inputs.query = p->add(DType::kFloat32, {1, S, N * H}, rng);
  p->inputs.key = p->add(DType::kFloat32, {1, S, Nk * H}, rng);
  p->inputs.value = p->add(DType::kFloat32, {1, S, Nk * H}, rng);
  p->inputs.seqlens_k = p->add_int32({1}, static_cast<int32_t>(T - 1));
  p->inputs.total_sequence_length = p->add_int32({1}, static_cast<int32_t>(T));
  const DType cache = kind == kF32 ? DType::kFloat32 : kind == kI8 ? DType::kInt8 : DType::kUInt8;
  if (kind != kF32) {
    p->attrs.k_quant_type = p->attrs.v_quant_type = "PER_CHANNEL";
    p->attrs.kv_cache_bit_width = kind == kI8 ? 8 : 4;
    p->inputs.k_scale = p->add(DType::kFloat32, {Nk * H}, rng, 0.005f, 0.01f);
    p->inputs.v_scale = p->add(DType::kFloat32, {Nk * H}, rng, 0.005f, 0.01f);
  }
  if (past > 0 || kind != kF32) {
    const int64_t row = kind == kI4 ? H / 2 : H;
    p->inputs.past_key = p->add(cache, {1, Nk, capacity, row}, rng);
    p->inputs.past_value = p->add(cache, {1, Nk, capacity, row}, rng);
  }
}

double cache_bytes_per_token(int64_t Nk, int64_t H, CacheKind kind) {
  const double per = kind == kF32 ? 4.0 : kind == kI8 ? 1.0 : 0.5;
  return 2.0 * static_cast<double>(Nk * H) * per;  // K and V
}

void report_host(benchmark::State& state) {
  static const double fma512 = bench::measured_fma_peak_gflops(true);
  static const double fma256 = bench::measured_fma_peak_gflops(false);
  static const double dram = bench::measured_read_bandwidth_gbs(size_t{256} << 20);
  static const double l3 = bench::measured_read_bandwidth_gbs(size_t{8} << 20);
  static const double dram2 = bench::measured_read_bandwidth_gbs(size_t{256} << 20, 2);
  for (auto _ : state) benchmark::DoNotOptimize(fma512);
  state.counters["fma_avx512_GFLOPs_1core"] = fma512;
  state.counters["fma_avx2_GFLOPs_1core"] = fma256;
  state.counters["read_256MiB_GBs_1thread"] = dram;
  state.counters["read_8MiB_GBs_1thread"] = l3;
  state.counters["read_256MiB_GBs_2threads"] = dram2;
}

// args: T, cache kind, threads, path (0 naive, 1 flash)
void BM_GQA_Prefill(benchmark::State& state) {
  const int64_t T = state.range(0);
  const CacheKind kind = static_cast<CacheKind>(state.range(1));
  Problem p;
  make_problem(&p, 16, 8, 128, T, 0, kind);
  RunOptions options;
  options.threads = static_cast<int>(state.range(2));
  options.path = state.range(3) ? AttentionPath::kFlash : AttentionPath::kNaive;
  size_t scratch = 0;
  options.peak_scratch_bytes = &scratch;
  GqaOutputs out;
  for (auto _ : state) {
    Status st = group_query_attention(p.inputs, p.attrs, GqaRequest(), &out, options);
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
  // Causal: QK and SV over the lower triangle, 2 FLOPs per multiply-add.
  const double flops = 2.0 * 2.0 * 16 * 128 * static_cast<double>(T) * static_cast<double>(T + 1) / 2.0;
  state.counters["GFLOPs"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["scratch_MiB"] = static_cast<double>(scratch) / (1 << 20);
  // The peak of the threads' cores, measured right after: the host's speed moves within minutes, so host_limits
  // from the start of the run is no fair denominator for a row timed later.
  double peak = bench::measured_fma_peak_gflops(true);  // AVX512, else AVX2 (0 where the ISA is missing)
  if (peak == 0.0) peak = bench::measured_fma_peak_gflops(false);
  state.counters["fma_peak_GFLOPs"] = options.threads * peak;
  state.SetLabel(std::string(kCacheNames[kind]) + (state.range(3) ? " flash" : " naive"));
}

// A real model decodes layer after layer, so each layer's cache comes from DRAM: the "cold" mode
// cycles through enough layers (each its own cache) that together they exceed L3 several times over.
constexpr double kColdBytes = 160.0 * (1 << 20);

// args: T (cached tokens + 1), cache kind, threads, mode (0 naive stateless, 1 flash stateless, 2 in
// place, 3 in place over cold layers, 4 flash stateless over cold layers, each with its own present outputs as a
// model's runtime keeps them)
void BM_GQA_Decode(benchmark::State& state, int64_t N, int64_t Nk, int64_t H = 128) {
  const int64_t T = state.range(0);
  const CacheKind kind = static_cast<CacheKind>(state.range(1));
  const int mode = static_cast<int>(state.range(3));
  const double kv_bytes = cache_bytes_per_token(Nk, H, kind) * static_cast<double>(T);
  const bool cold = mode >= 3, in_place = mode == 2 || mode == 3;
  const size_t layers = cold ? static_cast<size_t>(kColdBytes / kv_bytes) + 1 : 1;
  std::vector<std::unique_ptr<Problem>> problems;
  for (size_t l = 0; l < layers; ++l) {
    problems.push_back(std::make_unique<Problem>());
    make_problem(problems.back().get(), N, Nk, H, 1, T - 1, kind, in_place ? T : T - 1);
  }
  RunOptions options;
  options.threads = static_cast<int>(state.range(2));
  options.path = mode == 0 ? AttentionPath::kNaive : AttentionPath::kFlash;
  std::vector<GqaOutputs> outputs(layers);
  const auto step = [&](size_t layer) {
    const Problem& p = *problems[layer];
    return in_place ? group_query_attention_in_place(p.inputs, p.attrs, GqaRequest(), &outputs[layer], options)
                    : group_query_attention(p.inputs, p.attrs, GqaRequest(), &outputs[layer], options);
  };
  // Each layer's outputs fault their pages in on its first step; a few timed steps would be mostly that.
  for (size_t layer = 0; layer < layers; ++layer) step(layer);
  size_t layer = 0;
  for (auto _ : state) {
    Status st = step(layer);
    layer = (layer + 1) % layers;
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
  state.counters["KV_GBs"] = benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  // From DRAM, what the same threads read, measured right after (see BM_GQA_Prefill).
  if (cold) state.counters["read_GBs"] = bench::measured_read_bandwidth_gbs(size_t{256} << 20, options.threads);
  static const char* const modes[] = {" naive", " flash", " in-place", " in-place cold", " flash cold"};
  state.SetLabel(std::string(kCacheNames[kind]) + modes[mode]);
}

void BM_GQA_Decode_16x8(benchmark::State& state) { BM_GQA_Decode(state, 16, 8); }
void BM_GQA_FlashDecoding_4x4(benchmark::State& state) { BM_GQA_Decode(state, 4, 4); }
// Groups of 4 query heads per KV head (Llama 3, Mistral): 4 rows per KV head in a decode step.
void BM_GQA_Decode_32x8(benchmark::State& state) { BM_GQA_Decode(state, 32, 8); }
// 8 query heads per KV head (Llama 3 70B): the limb QK's direct/packed crossover.
void BM_GQA_Decode_64x8(benchmark::State& state) { BM_GQA_Decode(state, 64, 8); }
// 7 query heads per KV head at H = 64 (Qwen2.5 0.5B): row tiles of 4 + 3, short rows.
void BM_GQA_Decode_14x2_H64(benchmark::State& state) { BM_GQA_Decode(state, 14, 2, 64); }
// One query head per KV head at H = 96 (Phi-3): the one-row QK over rows of one and a half 64-byte chunks.
void BM_GQA_Decode_32x32_H96(benchmark::State& state) { BM_GQA_Decode(state, 32, 32, 96); }

BENCHMARK(report_host)->Name("host_limits")->Iterations(1);
BENCHMARK(BM_GQA_Prefill)
    ->ArgNames({"T", "cache", "threads", "flash"})
    ->ArgsProduct({{512, 2048, 4096}, {kF32, kI8, kI4}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_Decode_16x8)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{512, 2048, 4096}, {kF32, kI8, kI4}, {1, 2}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_FlashDecoding_4x4)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{4096}, {kF32, kI8, kI4}, {1, 2}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_Decode_32x8)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{512, 4096}, {kF32, kI8, kI4}, {1, 2}, {2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_Decode_64x8)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{4096}, {kF32, kI8, kI4}, {1, 2}, {2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_Decode_14x2_H64)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{4096}, {kF32, kI8, kI4}, {1, 2}, {2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_GQA_Decode_32x32_H96)
    ->ArgNames({"T", "cache", "threads", "mode"})
    ->ArgsProduct({{2048}, {kF32, kI8, kI4}, {1, 2}, {2, 3}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace attnkit
