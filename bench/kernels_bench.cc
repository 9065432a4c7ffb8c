// attnkit kernel benchmarks: QK and SV GEMMs per ISA and cache dtype (GFLOP/s and GB/s counters; a decode step's
// blocks also from DRAM), the packed prefill GEMM, and this host's fp32 FMA peak and read bandwidth in the same run,
// so every kernel number can be read as a fraction of what the machine does.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnkit/tensor.h"
#include "common/half.h"
#include "dispatch.h"
#include "host_limits.h"
#include "kernel_reference.h"

namespace attnkit {
namespace {

using ref::CacheElem;
const CacheElem kElems[] = {CacheElem::kF32, CacheElem::kF16, CacheElem::kBF16, CacheElem::kS8,
                            CacheElem::kS4};

// On a 64-byte boundary, as attnkit's caches and outputs are (and the README asks of a caller's): a std::vector put
// them 32 bytes past one, and every fp32 row straddled an extra cache line.
TensorBytes random_cache(CacheElem e, size_t N, size_t H) {
  std::mt19937 rng(1);
  const size_t row = ref::cache_row_bytes(e, H);
  TensorBytes k(N * row);
  std::uniform_real_distribution<float> uni(-1, 1);
  for (size_t j = 0; j < N; ++j)
    for (size_t d = 0; d < H; ++d) {
      uint8_t* r = k.data() + j * row;
      switch (e) {
        case CacheElem::kF32: reinterpret_cast<float*>(r)[d] = uni(rng); break;
        case CacheElem::kF16: reinterpret_cast<uint16_t*>(r)[d] = float_to_f16(uni(rng)); break;
        case CacheElem::kBF16: reinterpret_cast<uint16_t*>(r)[d] = float_to_bf16(uni(rng)); break;
        default: r[d % row] = static_cast<uint8_t>(rng()); break;
      }
    }
  return k;
}

std::vector<float> random_floats(size_t n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> uni(-1, 1);
  std::vector<float> x(n);
  for (float& v : x) v = uni(rng);
  return x;
}

template <typename Fn>
Fn pick(const QkGemmKernels& k, CacheElem e) {
  const Fn fns[] = {k.f32, k.f16, k.bf16, k.s8, k.s4};
  return fns[static_cast<int>(e)];
}

void set_counters(benchmark::State& state, double flops, double bytes) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// The cache blocks a QK or SV row reads: one, hot in L1/L2 as in the flash loop, or (from_dram) enough copies of it
// to pass L3 several times over, one per iteration in turn, as a decode step meets each layer's cache.
struct CacheBlocks {
  TensorBytes bytes;
  size_t block = 0, count = 1;
  CacheBlocks(CacheElem e, size_t N, size_t H, bool from_dram) : bytes(random_cache(e, N, H)), block(bytes.size()) {
    if (!from_dram) return;
    count = (size_t{192} << 20) / block + 1;
    TensorBytes all(count * block);
    for (size_t b = 0; b < count; ++b) std::memcpy(all.data() + b * block, bytes.data(), block);
    bytes.swap(all);
  }
  const uint8_t* at(size_t iteration) const { return bytes.data() + iteration % count * block; }
};

// From DRAM, the same thread's plain read of 256 MiB measured right after (kernels that overlap their reads with
// their arithmetic run at its rate).
void set_read_counter(benchmark::State& state, bool from_dram) {
  if (from_dram) state.counters["read_GBs"] = bench::measured_read_bandwidth_gbs(size_t{256} << 20, 1);
}

// Arguments: M, N, H.
void BM_QKGemm(benchmark::State& state, const KernelTable* t, CacheElem e, bool approx, bool from_dram) {
  const size_t M = state.range(0), N = state.range(1), H = state.range(2);
  const CacheBlocks K(e, N, H, from_dram);
  const std::vector<float> Q = random_floats(M * H);
  std::vector<float> C(M * N);
  const QkGemmFn fn = approx ? t->qk.s8_approx_vnni : pick<QkGemmFn>(t->qk, e);
  const size_t ldk = ref::cache_row_bytes(e, H);
  size_t iteration = 0;
  for (auto _ : state) {
    fn(M, N, H, Q.data(), H, K.at(iteration++), ldk, 0.088f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * M * N * H, static_cast<double>(K.block));
  set_read_counter(state, from_dram);
}

void BM_SVGemm(benchmark::State& state, const KernelTable* t, CacheElem e, bool from_dram) {
  const size_t M = state.range(0), N = state.range(1), H = state.range(2);
  const CacheBlocks V(e, N, H, from_dram);
  const std::vector<float> P = random_floats(M * N);
  std::vector<float> O(M * H);
  const SvGemmFn fns[] = {t->sv.f32, t->sv.f16, t->sv.bf16, t->sv.s8, t->sv.s4};
  const SvGemmFn fn = fns[static_cast<int>(e)];
  const size_t ldv = ref::cache_row_bytes(e, H);
  size_t iteration = 0;
  for (auto _ : state) {
    fn(M, N, H, P.data(), N, V.at(iteration++), ldv, O.data(), H, false);
    benchmark::DoNotOptimize(O.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * M * N * H, static_cast<double>(V.block));
  set_read_counter(state, from_dram);
}

// Prefill QK block: pack once outside the loop (amortized over query blocks in the flash path).
void BM_QKPacked(benchmark::State& state, const KernelTable* t) {
  const size_t M = state.range(0), N = state.range(1), H = state.range(2);
  const TensorBytes K = random_cache(CacheElem::kF32, N, H);
  const std::vector<float> Q = random_floats(M * H);
  std::vector<float> panels((N + 15) / 16 * 16 * H), C(M * N);
  t->qk.pack_f32(N, H, K.data(), H * 4, panels.data());
  for (auto _ : state) {
    t->qk.packed(M, N, H, Q.data(), H, panels.data(), 0.088f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, 2.0 * M * N * H, static_cast<double>(panels.size() * 4));
}

void BM_QKPack(benchmark::State& state, const KernelTable* t) {
  const size_t N = state.range(1), H = state.range(2);
  const TensorBytes K = random_cache(CacheElem::kS8, N, H);
  std::vector<float> panels((N + 15) / 16 * 16 * H);
  for (auto _ : state) {
    t->qk.pack_s8(N, H, K.data(), H, panels.data());
    benchmark::DoNotOptimize(panels.data());
  }
  set_counters(state, 0, static_cast<double>(K.size()));
}

#if defined(__x86_64__)
void BM_FmaPeak_AVX512(benchmark::State& state) {
  long iters = 1000;
  benchmark::DoNotOptimize(iters);  // a run-time trip count: the chain cannot be folded
  for (auto _ : state) benchmark::DoNotOptimize(bench::fma_loop_avx512(iters));
  set_counters(state, 1000.0 * 12 * 16 * 2, 0);
}
void BM_FmaPeak_AVX2(benchmark::State& state) {
  long iters = 1000;
  benchmark::DoNotOptimize(iters);
  for (auto _ : state) benchmark::DoNotOptimize(bench::fma_loop_avx2(iters));
  set_counters(state, 1000.0 * 12 * 8 * 2, 0);
}
#endif

// One read pass over a buffer of range(0) MiB.
void BM_ReadBandwidth(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  std::vector<float> buf(bytes / 4, 1.0f);
  for (auto _ : state) benchmark::DoNotOptimize(bench::read_pass(buf));
  set_counters(state, 0, static_cast<double>(bytes));
}

int register_all() {
  for (const std::string& isa : available_isas()) {
    const KernelTable* t = kernel_table_for(isa);
    for (CacheElem e : kElems) {
      const std::string tag = isa + "/" + ref::cache_elem_name(e);
      auto* qk = benchmark::RegisterBenchmark(("BM_QKGemm/" + tag).c_str(), BM_QKGemm, t, e, false, false);
      auto* sv = benchmark::RegisterBenchmark(("BM_SVGemm/" + tag).c_str(), BM_SVGemm, t, e, false);
      for (auto* b : {qk, sv}) {
        b->ArgNames({"M", "N", "K"});
        for (int64_t n : {512, 2048})
          for (int64_t k : {64, 128}) b->Args({1, n, k});
        b->Args({2, 2048, 128});
        b->Args({2, 512, 128});  // one decode block of a KV head with two query heads
        b->Args({4, 2048, 128});  // four query heads per KV head (Llama 3, Mistral)
      }
      if (e == CacheElem::kF32) sv->Args({96, 512, 64});  // QAttention's per-head block
    }
    if (t->qk.s8_approx_vnni)
      benchmark::RegisterBenchmark(("BM_QKGemm/" + isa + "/s8_approx_vnni").c_str(), BM_QKGemm, t,
                                   CacheElem::kS8, true, false)
          ->ArgNames({"M", "N", "K"})
          ->Args({1, 512, 128})
          ->Args({1, 2048, 128});
    benchmark::RegisterBenchmark(("BM_QKPacked/" + isa).c_str(), BM_QKPacked, t)
        ->ArgNames({"M", "N", "K"})
        ->Args({64, 256, 128})
        ->Args({96, 512, 64});
    benchmark::RegisterBenchmark(("BM_QKPack/" + isa + "/s8").c_str(), BM_QKPack, t)
        ->ArgNames({"M", "N", "K"})
        ->Args({64, 256, 128});
  }
  // A decode step's blocks from DRAM, on the table attnkit picks: two query rows per KV head, 2048 keys.
  const KernelTable* chosen = &kernel_table();
  for (CacheElem e : {CacheElem::kS8, CacheElem::kS4}) {
    const std::string tag = std::string(chosen->isa) + "/" + ref::cache_elem_name(e);
    benchmark::RegisterBenchmark(("BM_QKGemmFromDram/" + tag).c_str(), BM_QKGemm, chosen, e, false, true)
        ->ArgNames({"M", "N", "K"})
        ->Args({2, 2048, 128});
    benchmark::RegisterBenchmark(("BM_SVGemmFromDram/" + tag).c_str(), BM_SVGemm, chosen, e, true)
        ->ArgNames({"M", "N", "K"})
        ->Args({2, 2048, 128});
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) benchmark::RegisterBenchmark("BM_FmaPeak/avx512", BM_FmaPeak_AVX512);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    benchmark::RegisterBenchmark("BM_FmaPeak/avx2", BM_FmaPeak_AVX2);
#endif
  benchmark::RegisterBenchmark("BM_ReadBandwidth", BM_ReadBandwidth)->ArgName("MiB")->Arg(4)->Arg(64);
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace attnkit
