// attnkit: AVX512 traits for x86_gemm_impl.h (16 floats per vector); included only by files compiled
// with the avx512 flags. Register budgets (32 zmm) pick the tile sizes below.
#pragma once
#include "qk_gemm/x86_common.h"

namespace attnkit {
namespace {

struct Avx512 {
  using V = __m512;
  using Vi = __m512i;
  static constexpr size_t W = 16;
  // Direct QK: up to 8 query rows share each K row; keys per tile keep accumulators + q <= ~28.
  static constexpr int kMaxRows = 8;
  static constexpr int keys_for_rows(int mb) {
    return mb == 1 ? 8 : mb == 2 ? 8 : mb == 3 ? 6 : mb == 4 ? 5 : mb <= 6 ? 3 : 2;
  }
  // Packed QK: 6 rows x 64 keys (24 accumulators, 4 panel loads + 6 broadcasts per step). 12 x 32 needs
  // 12 broadcasts per 24 FMAs and 12 row pointers, more than the free GPRs: 6% slower at H = 64.
  static constexpr int kPackedRows = 6;
  static constexpr int kPackedVecs = 4;
  // SV: the same 6 x 64 shape (per key 4 V loads and 6 broadcasts); 13% faster than 12 x 32 at H = 64.
  // One or two rows (decode) take whole 128-column rows, so V streams through once in order.
  static constexpr int kSvRows = 6;
  static constexpr int sv_vecs_for_rows(int mb) { return mb <= 2 ? 8 : 4; }
  // Decode SV (sv_stream): V rows per group, as many as the 32 registers hold (mb x keys broadcasts, the keys' V
  // vectors, an accumulator); fewer keys per group mean more output loads and stores per key. Against the 4 / 2
  // that fit AVX2's 16, from L2: 2 rows int8 31-32 -> 40.5 GB/s and fp32 79-83 -> 92-97; 4 rows int8 9.5 -> 18
  // and fp32 32 -> 55 (from DRAM 9 -> 13-16.5 and 18-21 -> 24-26). Decode T=4096 int8 in place: 338-366 -> 293-311 us.
  static constexpr int sv_stream_keys(int mb) { return mb <= 2 ? 8 : 4; }

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V loadu_half(const float* p) { return _mm512_maskz_loadu_ps(0xff, p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void storeu_n(float* p, V v, size_t n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }

  static V load(F32, const uint8_t* row, size_t d) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + d);
  }
  static V load(F16, const uint8_t* row, size_t d) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d)));
  }
  static V load(BF16, const uint8_t* row, size_t d) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * d));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load(S8, const uint8_t* row, size_t d) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
  }
  // 8 elements in the low half, zeros above.
  template <class E>
  static V load_half(E e, const uint8_t* row, size_t d) {
    return _mm512_castsi512_ps(
        _mm512_zextsi256_si512(_mm256_castps_si256(load8(e, row, d))));
  }

  static Vi nib_bytes(const uint8_t* p, size_t n) {
    const __m128i b = n == W ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                             : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << n) - 1), p);
    return _mm512_cvtepu8_epi32(b);
  }
  // nibble - 8 as float without a conversion: one ternary-logic op ORs the nibble into the mantissa of
  // a power of two whose ulp is the nibble's weight (2^23 for bits 0-3, 2^19 for bits 4-7), and one
  // exact subtraction removes the power of two and the 8. x holds a zero-extended byte per lane.
  static V nib_lo(Vi x) {
    const Vi m = _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0x0f), _mm512_set1_epi32(0x4b000000), 0xea);
    return _mm512_sub_ps(_mm512_castsi512_ps(m), _mm512_set1_ps(8388616.0f));  // 2^23 + 8
  }
  static V nib_hi(Vi x) {
    const Vi m = _mm512_ternarylogic_epi32(x, _mm512_set1_epi32(0xf0), _mm512_set1_epi32(0x49000000), 0xea);
    return _mm512_sub_ps(_mm512_castsi512_ps(m), _mm512_set1_ps(524296.0f));  // 2^19 + 8
  }
  // The same low nibble - 8 in one instruction: vpermps reads only the low 4 bits of each index, so a 16-entry table
  // maps the zero-extended byte at once. For the SV of one or two rows (decode steps), which convert each V row for
  // few FMAs, over what is left of a row after its whole 64-byte chunks (nibbles_by_position, below); with more rows
  // the permutes, on a pipe the FMAs use, cost more than they save. BM_SVGemm s4, 2048
  // keys, H=128: 1 row 4.46-4.50 -> 3.98-4.10 us, 2 rows 5.93-5.97 -> 5.55-5.63; 4 rows 9.18-9.28 -> 9.70-9.82.
  static constexpr int kNibbleTableMaxRows = 2;
  static V nibble_values() { return _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7); }
  static V nib_lo_table(Vi x) { return _mm512_permutexvar_ps(x, nibble_values()); }
  // One or two SV rows over whole 64-byte int4 chunks (decode steps): one load, then nibble k of every dword (the
  // elements 8 l + k of the chunk, l = lane) by a shift and the same table, 15 instructions for 128 elements where
  // nib_bytes, nib_lo_table and nib_hi take 16 and four loads (the widening ones on the FMA pipes). The accumulators
  // are then nibble-major (nibble_major_load / _store). BM_SVGemm s4, H = 128, pinned, 8 alternating rounds, fastest:
  // 1 row 3.99 -> 3.53 us (2048 keys), 0.99 -> 0.90 (512); 2 rows 5.48 -> 5.05, 1.32 -> 1.27 (the transposes at
  // the call's ends weigh on short ones). 2048-key blocks from DRAM, 2 rows: 6.51 -> 6.15 us.
  static constexpr int kNibbleRowMaxRows = 2;
  static void nibbles_by_position(const uint8_t* p, V (&v)[8]) {
    const Vi x = _mm512_loadu_si512(p);
    const V table = nibble_values();
    v[0] = _mm512_permutexvar_ps(x, table);
    v[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 4), table);
    v[2] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 8), table);
    v[3] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 12), table);
    v[4] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 16), table);
    v[5] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 20), table);
    v[6] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 24), table);
    v[7] = _mm512_permutexvar_ps(_mm512_srli_epi32(x, 28), table);
  }
  // Interleaving kUnit floats at a time: lo takes the units of the low halves of a and b in turn, hi of the high.
  template <int kUnit>
  static __m512i interleave_index(bool high) {
    int32_t idx[16];
    for (int i = 0; i < 16; ++i) {
      const int unit = i / kUnit, within = i % kUnit, source = unit % 2;
      idx[i] = source * 16 + (high ? 8 : 0) + (unit / 2) * kUnit + within;
    }
    return _mm512_loadu_si512(idx);
  }
  // Its inverse: the units at even (first) or odd (second) places of lo, then of hi.
  template <int kUnit>
  static __m512i deinterleave_index(bool second) {
    int32_t idx[16];
    for (int i = 0; i < 16; ++i) {
      const int unit = i / kUnit, within = i % kUnit, half = unit / (8 / kUnit);
      idx[i] = half * 16 + (2 * (unit % (8 / kUnit)) + (second ? 1 : 0)) * kUnit + within;
    }
    return _mm512_loadu_si512(idx);
  }
  // 128 floats in element order <-> nibble-major a[k] (lane l = element 8 l + k): three rounds of two-source
  // permutes that interleave 1, 2 and then 4 floats of vector pairs (an 8 x 16 transpose), or undo them in reverse.
  static void nibble_major_store(float* p, const V (&a)[8]) {
    V l[4], h[4], g[8];
    const __m512i lo1 = interleave_index<1>(false), hi1 = interleave_index<1>(true);
    const __m512i lo2 = interleave_index<2>(false), hi2 = interleave_index<2>(true);
    const __m512i lo4 = interleave_index<4>(false), hi4 = interleave_index<4>(true);
    for (int q = 0; q < 4; ++q) {  // lanes 0-7 and 8-15 of a[2q], a[2q + 1]
      l[q] = _mm512_permutex2var_ps(a[2 * q], lo1, a[2 * q + 1]);
      h[q] = _mm512_permutex2var_ps(a[2 * q], hi1, a[2 * q + 1]);
    }
    for (int t = 0; t < 2; ++t) {  // g[2 s + t]: lanes 4s..4s+3 of a[4t..4t+3]
      g[t] = _mm512_permutex2var_ps(l[2 * t], lo2, l[2 * t + 1]);
      g[2 + t] = _mm512_permutex2var_ps(l[2 * t], hi2, l[2 * t + 1]);
      g[4 + t] = _mm512_permutex2var_ps(h[2 * t], lo2, h[2 * t + 1]);
      g[6 + t] = _mm512_permutex2var_ps(h[2 * t], hi2, h[2 * t + 1]);
    }
    for (int s = 0; s < 4; ++s) {  // elements 32 s .. 32 s + 31
      _mm512_storeu_ps(p + 32 * s, _mm512_permutex2var_ps(g[2 * s], lo4, g[2 * s + 1]));
      _mm512_storeu_ps(p + 32 * s + 16, _mm512_permutex2var_ps(g[2 * s], hi4, g[2 * s + 1]));
    }
  }
  static void nibble_major_load(const float* p, V (&a)[8]) {
    V l[4], h[4], g[8];
    const __m512i a1 = deinterleave_index<1>(false), b1 = deinterleave_index<1>(true);
    const __m512i a2 = deinterleave_index<2>(false), b2 = deinterleave_index<2>(true);
    const __m512i a4 = deinterleave_index<4>(false), b4 = deinterleave_index<4>(true);
    for (int s = 0; s < 4; ++s) {
      const V lo = _mm512_loadu_ps(p + 32 * s), hi = _mm512_loadu_ps(p + 32 * s + 16);
      g[2 * s] = _mm512_permutex2var_ps(lo, a4, hi);
      g[2 * s + 1] = _mm512_permutex2var_ps(lo, b4, hi);
    }
    for (int t = 0; t < 2; ++t) {
      l[2 * t] = _mm512_permutex2var_ps(g[t], a2, g[2 + t]);
      l[2 * t + 1] = _mm512_permutex2var_ps(g[t], b2, g[2 + t]);
      h[2 * t] = _mm512_permutex2var_ps(g[4 + t], a2, g[6 + t]);
      h[2 * t + 1] = _mm512_permutex2var_ps(g[4 + t], b2, g[6 + t]);
    }
    for (int q = 0; q < 4; ++q) {
      a[2 * q] = _mm512_permutex2var_ps(l[q], a1, h[q]);
      a[2 * q + 1] = _mm512_permutex2var_ps(l[q], b1, h[q]);
    }
  }
  static void deinterleave(const float* p, size_t n, V& ev, V& od) {
    const V a = n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
    const V b = n >= 32 ? _mm512_loadu_ps(p + 16)
                        : (n > 16 ? _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (n - 16)) - 1), p + 16)
                                  : _mm512_setzero_ps());
    ev = _mm512_permutex2var_ps(a, deinterleave_index<1>(false), b);
    od = _mm512_permutex2var_ps(a, deinterleave_index<1>(true), b);
  }
  static void interleave_store(float* p, size_t n, V ev, V od) {
    const V a = _mm512_permutex2var_ps(ev, interleave_index<1>(false), od);
    const V b = _mm512_permutex2var_ps(ev, interleave_index<1>(true), od);
    if (n >= 16) _mm512_storeu_ps(p, a); else storeu_n(p, a, n);
    if (n >= 32) _mm512_storeu_ps(p + 16, b); else if (n > 16) storeu_n(p + 16, b, n - 16);
  }

  // Lane r of each 128-bit chunk = the sum of v[r]'s four lanes in that chunk (in-lane unpacks and adds).
  __attribute__((always_inline)) static Vi chunk_sums4(const Vi v[4]) {
    const auto pairs = [](Vi x, Vi y) {
      return _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
    };
    const Vi p01 = pairs(v[0], v[1]), p23 = pairs(v[2], v[3]);
    return _mm512_add_epi32(_mm512_unpacklo_epi64(p01, p23), _mm512_unpackhi_epi64(p01, p23));
  }

  // Lane r = sum of v[r]: each 128-bit chunk holding its sums of v[0..3] (x03) and v[4..7] (x47), then two folds
  // across chunks. 24 instructions; halving each vector to 256 bits first and finishing with hadd took about 37, and
  // this tree made the exact s8 QK (M=1, N=512, H=128) 11% faster.
  __attribute__((always_inline)) static __m256i reduce8i(const Vi v[8]) {
    const Vi x03 = chunk_sums4(v), x47 = chunk_sums4(v + 4);
    const Vi f = _mm512_add_epi32(_mm512_shuffle_i32x4(x03, x47, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_i32x4(x03, x47, _MM_SHUFFLE(3, 2, 3, 2)));
    const Vi g = _mm512_add_epi32(f, _mm512_shuffle_i32x4(f, f, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_shuffle_i32x4(g, g, _MM_SHUFFLE(0, 0, 2, 0)));
  }

  // Sums of 8 vectors as one __m256 (lane r = sum of v[r]) through a shuffle tree.
  __attribute__((always_inline)) static __m256 reduce8(const V v[8]) {
    V t[4];
    for (int k = 0; k < 4; ++k) {
      const V lo = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0));
      const V hi = _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2));
      t[k] = _mm512_add_ps(lo, hi);
    }
    V u[2];
    for (int k = 0; k < 2; ++k) {
      const V lo = _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0));
      const V hi = _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1));
      u[k] = _mm512_add_ps(lo, hi);
    }
    const V s = _mm512_add_ps(_mm512_unpacklo_ps(u[0], u[1]), _mm512_unpackhi_ps(u[0], u[1]));
    const V s2 = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, s2));
  }
};

}  // namespace
}  // namespace attnkit
