// attnkit benches: this host's physical limits, measured in the same run as the benchmarks.
// The host is shared and noisy, so speed is reported as a fraction of a peak measured moments before,
// never against a constant: fp32 FMA throughput of one core, read bandwidth (one thread, or as many as a
// multi-thread run uses), and what reading lines another core just wrote costs.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace attnkit::bench {

// Register-only FMA chains: 12 independent accumulators cover latency x throughput on either width.
// Each call runs iters * 12 FMAs of 16 (AVX512) or 8 (AVX2) lanes and returns a value to keep it alive.
#if defined(__x86_64__)
__attribute__((target("avx512f,fma"), noinline)) inline float fma_loop_avx512(long iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(0.0001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips its own -Wuninitialized (an undefined-vector idiom).
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float lane : lanes) total += lane;
  return total;
}
__attribute__((target("avx2,fma"), noinline)) inline float fma_loop_avx2(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(0.0001f);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  float out[8];
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  _mm256_storeu_ps(out, sum);
  return out[0];
}
#endif

// The int8 projection's instruction mixes on AVX2 (no VNNI), 12 independent accumulators each:
//  exact:      vpmaddwd (16 int16 products, paired into int32) then vpaddd into the accumulator;
//  saturating: vpmaddubsw (32 u8 x s8 products, paired into int16, saturating) then vpmaddwd by ones
//              and vpaddd, the form of a u8 x s8 GEMM that accepts maddubs' int16 saturation.
// Written in asm so the loop is exactly these instructions. Returns iters * 12 groups' worth of work.
#if defined(__x86_64__) && defined(__GNUC__)
#define ATTNKIT_MADD_GROUP(c) \
  asm volatile("vpmaddwd %1, %2, %%ymm15\n\tvpaddd %%ymm15, %0, %0" : "+x"(c) : "x"(b), "x"(a) : "xmm15");
#define ATTNKIT_MADDUBS_GROUP(c)                                                                 \
  asm volatile("vpmaddubsw %1, %2, %%ymm15\n\tvpmaddwd %%ymm15, %3, %%ymm15\n\tvpaddd %%ymm15, %0, %0" \
               : "+x"(c) : "x"(b), "x"(a), "x"(ones) : "xmm15");
template <bool kSaturating>
__attribute__((target("avx2"), noinline)) inline int int8_mix_loop_avx2(long iters) {
  const __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(5), ones = _mm256_set1_epi16(1);
  __m256i c0 = a, c1 = a, c2 = a, c3 = a, c4 = a, c5 = a, c6 = a, c7 = a, c8 = a, c9 = a, c10 = a, c11 = a;
  for (long it = 0; it < iters; ++it) {
    if (kSaturating) {
      ATTNKIT_MADDUBS_GROUP(c0) ATTNKIT_MADDUBS_GROUP(c1) ATTNKIT_MADDUBS_GROUP(c2) ATTNKIT_MADDUBS_GROUP(c3)
      ATTNKIT_MADDUBS_GROUP(c4) ATTNKIT_MADDUBS_GROUP(c5) ATTNKIT_MADDUBS_GROUP(c6) ATTNKIT_MADDUBS_GROUP(c7)
      ATTNKIT_MADDUBS_GROUP(c8) ATTNKIT_MADDUBS_GROUP(c9) ATTNKIT_MADDUBS_GROUP(c10) ATTNKIT_MADDUBS_GROUP(c11)
    } else {
      ATTNKIT_MADD_GROUP(c0) ATTNKIT_MADD_GROUP(c1) ATTNKIT_MADD_GROUP(c2) ATTNKIT_MADD_GROUP(c3)
      ATTNKIT_MADD_GROUP(c4) ATTNKIT_MADD_GROUP(c5) ATTNKIT_MADD_GROUP(c6) ATTNKIT_MADD_GROUP(c7)
      ATTNKIT_MADD_GROUP(c8) ATTNKIT_MADD_GROUP(c9) ATTNKIT_MADD_GROUP(c10) ATTNKIT_MADD_GROUP(c11)
    }
  }
#undef ATTNKIT_MADD_GROUP
#undef ATTNKIT_MADDUBS_GROUP
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                                     _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  return _mm256_extract_epi32(_mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(c8, c9), c10)), 0) +
         _mm256_extract_epi32(c11, 0);
}
// Multiply-accumulates per group: 16 exact (madd), 32 saturating (maddubs).
constexpr double kInt8MixMacs[2] = {16.0, 32.0};
#endif

// Sums floats [begin, end) of buf with `kLanes` independent lanes (vectorized): one read pass. 16 lanes (two AVX2
// chains) read DRAM as fast as any loop tried; from L2 they wait on their adds (about 110 GB/s where the cache gives
// 180), so a cache-resident read takes 64 (eight chains).
template <int kLanes = 16>
#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
inline float read_range(const std::vector<float>& buf, size_t begin, size_t end) {
  float acc[kLanes] = {};
  for (size_t i = begin; i + kLanes <= end; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += buf[i + k];
  float total = 0.0f;
  for (float a : acc) total += a;
  return total;
}

inline float read_pass(const std::vector<float>& buf) { return read_range(buf, 0, buf.size()); }

// GFLOP/s of one core, best of a few runs; `wide` selects AVX512 (else AVX2). 0 where the ISA is missing.
inline double measured_fma_peak_gflops(bool wide) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (wide ? !__builtin_cpu_supports("avx512f") : !__builtin_cpu_supports("avx2")) return 0.0;
  const long iters = 2000000;
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + (wide ? fma_loop_avx512(iters) : fma_loop_avx2(iters));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * 12 * (wide ? 16 : 8) * static_cast<double>(iters) / s * 1e-9);
  }
  return best;
#else
  (void)wide;
  return 0.0;
#endif
}

// GB/s of `threads` threads together reading a buffer of `bytes`, each its own contiguous share (best of a few
// passes after a warm-up pass). Decode on several threads is compared with the bandwidth the same threads get.
inline double measured_read_bandwidth_gbs(size_t bytes, int threads = 1) {
  std::vector<float> buf(bytes / sizeof(float), 1.0f);
  const size_t share = buf.size() / static_cast<size_t>(threads) / 16 * 16;
  std::vector<float> sums(static_cast<size_t>(threads));
  const auto pass = [&] {
    std::vector<std::thread> workers;
    for (int t = 1; t < threads; ++t)
      workers.emplace_back([&, t] { sums[t] = read_range(buf, share * t, share * (t + 1)); });
    sums[0] = read_range(buf, 0, share);
    for (auto& w : workers) w.join();
  };
  pass();
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    pass();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(share * threads * sizeof(float)) / s * 1e-9);
  }
  volatile float sink = sums[0];
  (void)sink;
  return best;
}

// GB/s of one thread reading `bytes` that were written just before, by itself (from_other_thread false: the lines
// sit in its own caches) or by another thread that keeps running meanwhile (so on another core): best of 20 rounds.
// What a task pays for reading what a task on another core produced (QAttention's one task per head, RESULTS).
inline double measured_handoff_read_gbs(size_t bytes, bool from_other_thread) {
  std::vector<float> buf(bytes / sizeof(float));
  std::atomic<int> round{-1};
  std::atomic<bool> written{false}, done{false};
  const auto write = [&buf](int r) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(i + static_cast<size_t>(r));
  };
  std::thread writer;
  if (from_other_thread) {
    writer = std::thread([&] {
      for (int seen = -1; !done.load();) {
        const int r = round.load();
        if (r == seen) continue;  // spins: an idle writer could be moved onto the reader's core
        write(r);
        seen = r;
        written.store(true);
      }
    });
  }
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int r = 0; r < 20; ++r) {
    if (from_other_thread) {
      written.store(false);
      round.store(r);
      while (!written.load()) {
      }
    } else {
      write(r);
    }
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + read_range<64>(buf, 0, buf.size());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(buf.size() * sizeof(float)) / s * 1e-9);
  }
  done.store(true);
  if (writer.joinable()) writer.join();
  return best;
}

}  // namespace attnkit::bench
