// attnkit: AVX2+FMA traits for x86_gemm_impl.h (8 floats per vector); included only by files compiled
// with the avx2 flags. 16 ymm registers pick the smaller tiles below. H is a multiple of 8, so the
// half-vector tail paths of the generic code are never taken here.
#pragma once
#include "qk_gemm/x86_common.h"

namespace attnkit {
namespace {

struct Avx2 {
  using V = __m256;
  using Vi = __m256i;
  static constexpr size_t W = 8;
  static constexpr int kMaxRows = 4;
  static constexpr int keys_for_rows(int mb) { return mb == 1 ? 8 : mb == 2 ? 4 : mb == 3 ? 3 : 2; }
  // Packed QK: 6 rows x 16 keys (12 accumulators, the classic 6x16 micro-kernel).
  static constexpr int kPackedRows = 6;
  static constexpr int kPackedVecs = 2;
  // SV: the 6 x 16 shape of packed QK (12 accumulators, 2 V loads and 6 broadcasts per key).
  static constexpr int kSvRows = 6;
  static constexpr int sv_vecs_for_rows(int mb) { return mb == 1 ? 8 : mb == 2 ? 4 : 2; }
  // Decode SV (sv_stream): V rows per group; broadcasts for mb rows x keys, the keys' V vectors and an
  // accumulator fit the 16 registers.
  static constexpr int sv_stream_keys(int mb) { return mb <= 2 ? 4 : 2; }

  static __m256i tail_mask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V loadu_half(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void storeu_n(float* p, V v, size_t n) {
    if (n >= 8) _mm256_storeu_ps(p, v); else _mm256_maskstore_ps(p, tail_mask(n), v);
  }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  template <class E>
  static V load(E e, const uint8_t* row, size_t d) { return load8(e, row, d); }
  template <class E>
  static V load_half(E e, const uint8_t* row, size_t d) { return load8(e, row, d); }

  static Vi nib_bytes(const uint8_t* p, size_t n) {
    __m128i b;
    if (n == 8) {
      b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    } else {
      int64_t bytes = 0;
      std::memcpy(&bytes, p, n);
      b = _mm_cvtsi64_si128(bytes);
    }
    return _mm256_cvtepu8_epi32(b);
  }
  static constexpr int kNibbleTableMaxRows = 0;  // vpermps ymm indexes 8 entries, not 16 (avx512's nib_lo_table)
  static constexpr int kNibbleRowMaxRows = 0;    // nor avx512's nibbles_by_position
  static V nib_lo(Vi x) {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(x, _mm256_set1_epi32(15)), _mm256_set1_epi32(8)));
  }
  static V nib_hi(Vi x) {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(x, 4), _mm256_set1_epi32(8)));
  }
  static void deinterleave(const float* p, size_t n, V& ev, V& od) {
    const V a = n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n));
    const V b = n >= 16 ? _mm256_loadu_ps(p + 8) : (n > 8 ? _mm256_maskload_ps(p + 8, tail_mask(n - 8)) : zero());
    const V e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const V o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
    od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
  }
  static void interleave_store(float* p, size_t n, V ev, V od) {
    const V lo = _mm256_unpacklo_ps(ev, od), hi = _mm256_unpackhi_ps(ev, od);
    const V a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
    storeu_n(p, a, n);
    if (n > 8) storeu_n(p + 8, b, n - 8);
  }
  __attribute__((always_inline)) static __m256 reduce8(const V v[8]) {
    const V t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
    const V t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
    const V u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
  }
};

}  // namespace
}  // namespace attnkit
