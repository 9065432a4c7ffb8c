// attnkit: x86 pieces shared by the AVX2 and AVX512 kernel files (included by both, compiled with each
// file's flags; everything sits in an anonymous namespace so the two copies never meet at link time).
// 8-element cache-row loaders for every dtype, an 8x8 transpose, and the panel packer built on them.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "qk_gemm/cache_elem.h"
#include "qk_gemm/qk_gemm.h"
#include "sv_gemm/sv_gemm.h"
#include "unroll.h"

namespace attnkit {
namespace {

using cache_elem::BF16;
using cache_elem::F16;
using cache_elem::F32;
using cache_elem::S4;
using cache_elem::S8;

// Decode blocks (kStreamMinBytes and more, sv_gemm.h) come from DRAM: there the hardware prefetchers alone
// left the direct QK and the streamed SV at 8-10 GB/s on Zen 3; asking for the lines 16 rows ahead (8 KB
// of fp32 rows at H=128) gave 10.5-12. Narrow rows look at least 4 KB ahead: 16 int8 rows are only 2 KB,
// and the int8 limb QK (Zen 5, from DRAM, 2 query rows) read its K blocks in 160-205 us per step at 4 KB
// against 180-210 at 2 KB, 160-225 at 8 KB and 190-255 with no prefetch. (wasm, which has no prefetch
// instruction, walks those blocks key by key instead: simd128_gemm_impl.h.)
constexpr size_t kStreamPrefetchRows = 16;
constexpr size_t kStreamPrefetchMinBytes = 4096;
inline size_t stream_prefetch_rows(size_t row_bytes) {
  return std::max(kStreamPrefetchRows, kStreamPrefetchMinBytes / row_bytes);
}
// How far ahead the direct QK kernels ask for a block of N rows: 0 (never) below a decode block.
inline size_t block_prefetch_rows(size_t N, size_t row_bytes) {
  return N * row_bytes >= kStreamMinBytes ? stream_prefetch_rows(row_bytes) : 0;
}

inline void prefetch_lines(const uint8_t* p, size_t bytes) {
  for (size_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(p + b), _MM_HINT_T0);
}

// Elements [d, d+8) of a cache row as 8 floats (exact conversions; d is a multiple of 8).
inline __m256 load8(F32, const uint8_t* row, size_t d) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
}
inline __m256 load8(F16, const uint8_t* row, size_t d) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
}
inline __m256 load8(BF16, const uint8_t* row, size_t d) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(S8, const uint8_t* row, size_t d) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + d));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
inline __m256 load8(S4, const uint8_t* row, size_t d) {
  int32_t four;
  std::memcpy(&four, row + d / 2, 4);
  const __m128i b = _mm_cvtsi32_si128(four);
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(b, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
  const __m256i v = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(8)));
}

inline void transpose8x8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Panels of 16 keys: 8x8 tiles are converted, transposed and stored; missing keys are zero rows.
// A prompt's K block comes from L3 (each task of a head packs it again), and the packer's loads waited on it:
// 4.2% of an fp32 S=T=2048 prefill (`perf`, one thread). Asking for the rows 16 keys ahead, 2.2%.
template <typename E>
void pack_x86(size_t N, size_t H, const void* K, size_t ldk, float* panels) {
  constexpr size_t kPackAheadKeys = 16;
  const uint8_t* base = static_cast<const uint8_t*>(K);
  // The H elements of each row, not its whole stride: QAttention packs a head's K from rows of all heads' Q, K and V
  // (9 KB at hidden 768, of which it reads 256 bytes), and asking for the whole stride made the packing of a
  // 128-token prompt 9.5% of the call (`perf`, one thread).
  const size_t row = std::min(ldk, cache_elem::row_bytes<E>(H));
  for (size_t t = 0; t < std::min(N, kPackAheadKeys); ++t) prefetch_lines(base + t * ldk, row);
  const size_t panel_count = (N + kQkPanelKeys - 1) / kQkPanelKeys;
  for (size_t p = 0; p < panel_count; ++p) {
    float* panel = panels + p * H * kQkPanelKeys;
    for (size_t t0 = 0; t0 < kQkPanelKeys; t0 += 8) {
      const size_t first = p * kQkPanelKeys + t0;
      for (size_t t = first + kPackAheadKeys; t < std::min(N, first + kPackAheadKeys + 8); ++t)
        prefetch_lines(base + t * ldk, row);
      for (size_t d0 = 0; d0 < H; d0 += 8) {
        __m256 r[8];
        for (size_t t = 0; t < 8; ++t)
          r[t] = first + t < N ? load8(E{}, base + (first + t) * ldk, d0) : _mm256_setzero_ps();
        transpose8x8(r);
        for (size_t k = 0; k < 8; ++k) _mm256_storeu_ps(panel + (d0 + k) * kQkPanelKeys + t0, r[k]);
      }
    }
  }
}

}  // namespace
}  // namespace attnkit
