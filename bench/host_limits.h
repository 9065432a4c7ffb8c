// attnkit benches: this host's physical limits, measured in the same run as the benchmarks.
// The host is shared and noisy, so speed is reported as a fraction of a peak measured moments before,
// never against a constant: fp32 FMA throughput of one core and single-thread read bandwidth.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
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
  return _mm512_reduce_add_ps(sum);
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

// Sums a buffer with 16 independent lanes (vectorized): one read pass.
#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
inline float read_pass(const std::vector<float>& buf) {
  float acc[16] = {};
  for (size_t i = 0; i + 16 <= buf.size(); i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += buf[i + k];
  float total = 0.0f;
  for (float a : acc) total += a;
  return total;
}

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

// GB/s of one thread reading a buffer of `bytes` (best of a few passes after a warm-up pass).
inline double measured_read_bandwidth_gbs(size_t bytes) {
  std::vector<float> buf(bytes / sizeof(float), 1.0f);
  double best = 0.0;
  volatile float sink = read_pass(buf);
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    sink = sink + read_pass(buf);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s * 1e-9);
  }
  return best;
}

}  // namespace attnkit::bench
