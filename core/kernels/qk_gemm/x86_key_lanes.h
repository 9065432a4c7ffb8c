// attnkit qk_gemm: the exact int8/int4 limb QK of limb_query.h on AVX512-VNNI with keys in lanes. 16 K rows
// are transposed so that each 32-bit lane holds one key's 4 bytes of a column; the limbs are three signed bytes
// (hi = 256 a + b, lo) that vpdpbusd multiplies with the unsigned cache bytes (int4: the nibbles; int8: the
// bytes + 128), broadcast from memory. No per-key reduction is left, and the sums are the limb sums
// of every other ISA: the same bits. One to three rows (decode) take 32-key tiles transposed one tile ahead.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "qk_gemm/limb_query.h"
#include "qk_gemm/x86_common.h"
#include "x86_vnni.h"

namespace attnkit {
namespace {

constexpr size_t kLaneKeys = 16;   // keys per tile: one per 32-bit lane
constexpr size_t kLaneChunk = 64;  // K bytes per transposed chunk: 16 columns of 4 bytes
constexpr int kLaneMaxRows = 4;    // query rows per pass over K

// The query rows of one pass, column-major: for K column c (row bytes 4c..4c+3), row i and digit k, the D dwords
// at ((c * MB + i) * 3 + k) * D hold digit k of the column's elements: int4 (D = 2) the even elements 8c, 8c+2,
// 8c+4, 8c+6 (the low nibbles' partners), then the odd ones; int8 (D = 1) elements 4c..4c+3. Digits: hi as
// 256 d0 + d1 with d1 its low byte read as signed (|d0| <= 64 for |hi| <= 2^14), and d2 = lo, already a byte.
// Every broadcast of a column then comes from one pointer at constant offsets.
struct LaneQuery {
  const int32_t* digits;
  float factor[kLaneMaxRows];
  // int4 nibbles are the elements + 8, int8 bytes here + 128: the offsets are 8 or 128 times the limb sums, mod 2^32
  // as the sums themselves (int8's 256 a + b may wrap for long heads; the true sums never do, limb_query.h).
  uint32_t off_hi[kLaneMaxRows], off_lo[kLaneMaxRows];
};
template <bool kS4>
constexpr int kLaneDwords = kS4 ? 6 : 3;  // digit dwords per row and K column: 3 D

// r[k] holds 16 dwords of key k; afterwards r[c] holds column c of the 16 keys (lane k = key k).
__attribute__((always_inline)) inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // u[4g + t]: 128-bit lane L holds keys 4g..4g+3 at column 4L + t.
  __m512i u[16];
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

// The sums, one array per digit: GCC keeps arrays of up to 256 bytes in registers.
template <int MB>
struct LaneSums {
  __m512i d0[MB], d1[MB], d2[MB];
};

// Row i's three digit sums += the unsigned bytes u times the digits at d, d + step, d + 2 step.
template <int MB>
__attribute__((always_inline)) inline void lane_digit_dots(LaneSums<MB>& s, int i, __m512i u, const int32_t* d,
                                                           int step) {
  dpbusd_bcast_into(s.d0[i], u, d);
  dpbusd_bcast_into(s.d1[i], u, d + step);
  dpbusd_bcast_into(s.d2[i], u, d + 2 * step);
}

// One column of 16 keys into every row's three digit sums; qd points at the column's digits.
template <bool kS4, int MB>
__attribute__((always_inline)) inline void lane_column(LaneSums<MB>& s, __m512i x, const int32_t* qd) {
  if constexpr (kS4) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i even = _mm512_and_si512(x, nibble), odd = _mm512_and_si512(_mm512_srli_epi32(x, 4), nibble);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      lane_digit_dots(s, i, even, qd + i * 6, 2);
      lane_digit_dots(s, i, odd, qd + i * 6 + 1, 2);
    }
  } else {
    const __m512i u = _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) lane_digit_dots(s, i, u, qd + i * 3, 1);
  }
}

// One chunk of K rows [0, kn) (bytes [cb, cb + n) of each), transposed: r[c] = column c, lane k = key k.
template <bool kFull>
__attribute__((always_inline)) inline void lane_transpose(const uint8_t* K, size_t ldk, size_t kn, size_t cb,
                                                          size_t n, __m512i r[16]) {
  const __mmask64 m = n == kLaneChunk ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  ATTNKIT_UNROLL for (size_t k = 0; k < 16; ++k)
    r[k] = kFull || k < kn ? _mm512_maskz_loadu_epi8(m, K + k * ldk + cb) : _mm512_setzero_si512();
  transpose16x16_epi32(r);
}

// One 16-key tile's scores: combine_limbs lane-wise (the same integer sums and the same roundings as the scalar
// kernel), stored at c[i] + at for the keys in mask.
template <int MB>
__attribute__((always_inline)) inline void lane_store(const LaneSums<MB>& s, const LaneQuery& q, float* const* c,
                                                      size_t at, __mmask16 mask) {
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
    const __m512i hi = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32(s.d0[i], 8), s.d1[i]),
                                        _mm512_set1_epi32(static_cast<int32_t>(q.off_hi[i])));
    const __m512i lo = _mm512_sub_epi32(s.d2[i], _mm512_set1_epi32(static_cast<int32_t>(q.off_lo[i])));
    const __m512 out = _mm512_mul_ps(
        _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(hi), _mm512_set1_ps(kLimbBase)), _mm512_cvtepi32_ps(lo)),
        _mm512_set1_ps(q.factor[i]));
    _mm512_mask_storeu_ps(c[i] + at, mask, out);
  }
}

// MB query rows x up to 16 keys (kn). A row has 3 sums (one per digit), each a chain of multiply-adds of 4
// cycles' latency, two per 8 elements: from two rows on (6-12 sums), the chains nearly keep pace with two a cycle;
// a row alone (left by rows that take the fp32 kernel) runs at half that rate. Up to two rows the 16 transposed
// columns stay in registers beside the sums; from three rows on they go through an L1 buffer, which leaves the
// registers to the sums. Bytes past a row's end load as zero (int8: 128 once offset), against zero digits.
template <bool kS4, int MB, bool kFull>
inline void lane_tile(size_t H, const LaneQuery& q, const uint8_t* K, size_t ldk, size_t kn, float* const* c) {
  LaneSums<MB> s;
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) s.d0[i] = s.d1[i] = s.d2[i] = _mm512_setzero_si512();
  const int32_t* qd = q.digits;
  constexpr int kStride = MB * kLaneDwords<kS4>;
  const size_t bytes = kS4 ? H / 2 : H;
  for (size_t cb = 0; cb < bytes; cb += kLaneChunk) {
    const size_t n = std::min(kLaneChunk, bytes - cb);
    const size_t ncols = n / 4;  // H is a multiple of 8, so n of 4
    __m512i r[16];
    lane_transpose<kFull>(K, ldk, kn, cb, n, r);
    if (MB <= 2 && ncols == 16) {
      ATTNKIT_UNROLL for (int col = 0; col < 16; ++col) lane_column<kS4>(s, r[col], qd + col * kStride);
    } else {
      alignas(64) uint32_t cols[16][16];
      ATTNKIT_UNROLL for (int k = 0; k < 16; ++k) _mm512_store_si512(cols[k], r[k]);
      for (size_t col = 0; col < ncols; ++col) lane_column<kS4>(s, _mm512_load_si512(cols[col]), qd + col * kStride);
    }
    qd += ncols * kStride;
  }
  lane_store(s, q, c, 0, static_cast<__mmask16>((1u << kn) - 1));
}

// ---- One to three rows (a decode step): 32-key tiles, transposed one tile ahead ----
// On Zen 5 this core issues two zmm loads a cycle, broadcasts included, and two vpdpbusd; vpunpck* run beside them
// for free and vshufi32x4 nearly so. The 16-key tile above loads one digit per vpdpbusd plus the K rows (with
// four digits, 18 loads for 16 multiply-adds a key), and its transposes share the window with them: 12.8 cycles
// a key where 8 would do.
// Here each digit broadcast serves the same column of two 16-key halves, whose columns come from an L1 buffer
// filled one tile ahead: each column's multiply-adds carry one eighth of the next tile's transpose (4 K rows, or 4
// cross-lane combinations), so loads, shuffles and multiply-adds overlap. The same integer sums, so the same bits.
// BM_QKGemm avx512, 2 rows, H=128, N=512 / 2048 (in L2): int8 2.17 -> 1.96 / 8.03 -> 7.63 us, int4 1.96 -> 1.53 /
// 7.03 -> 5.48. Decode T=4096 in place: warm steps a few percent faster, through DRAM within the host's noise.
// Three digits where there were four (limb_query.h's 23-bit query), side by side at N=2048: int8 8.46 -> 5.73 us,
// int4 6.89 -> 5.00; decode T=512 in place, one thread, 44 -> 38 us (int8) and 44 -> 34 (int4). At T=4096, where
// the cache comes from L3 or DRAM, the steps did not change.
// Three rows keep their 18 sums in registers beside the transposes; four would not, so wider groups take passes of
// up to three rows (4 as 2 + 2), each over K from L1/L2 again. Against one pass of lane_tile's rows, BM_QKGemm avx512
// H=128, 2048 keys, 3 alternating rounds: int4 3 rows 8.2-9.2 -> 6.2-6.7 us, 4 rows 9.9-12.5 -> 8.5-9.2, 5 rows
// 12.7-15.6 -> 10.4-10.8; int8 3 rows 8.9-9.6 -> 7.7-8.6, 4 rows 10.9-11.9 -> 9.5-10.4. Decode T=4096 in place, one
// thread, medians of 4 rounds: N=32/Nk=8 int4 357 -> 341 us, int8 422 -> 410; N=64/Nk=8 int4 715 -> 649, int8 835 ->
// 778.
constexpr int kPipeMaxRows = 3;
constexpr size_t kPipeKeys = 32;
constexpr size_t kPipeMaxBytes = 256;  // K bytes per row: int8 H <= 256, int4 H <= 512
constexpr bool lane_pipe_fits(size_t bytes) { return bytes % kLaneChunk == 0 && bytes <= kPipeMaxBytes; }

using LaneColumns = uint32_t[2][kPipeMaxBytes / 4][16];  // a tile's transposed K: [half][column][key]

// Step S of the 16x16 transpose of keys [16 h, 16 h + 16) of the tile at Kt, K bytes [64 chunk, 64 chunk + 64)
// (transpose16x16_epi32 split in eight): steps 0-3 take 4 rows each through the in-lane stages into U, steps 4-7
// combine U across lanes into 4 finished columns.
template <int S>
__attribute__((always_inline)) inline void lane_transpose_step(const uint8_t* Kt, size_t ldk, int h, size_t chunk,
                                                               __m512i* U, uint32_t (*cols)[16]) {
  if constexpr (S < 4) {
    const uint8_t* p = Kt + (16 * h + 4 * S) * ldk + kLaneChunk * chunk;
    const __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + ldk);
    const __m512i x2 = _mm512_loadu_si512(p + 2 * ldk), x3 = _mm512_loadu_si512(p + 3 * ldk);
    const __m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
    const __m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
    _mm512_store_si512(U + 4 * S + 0, _mm512_unpacklo_epi64(t0, t2));
    _mm512_store_si512(U + 4 * S + 1, _mm512_unpackhi_epi64(t0, t2));
    _mm512_store_si512(U + 4 * S + 2, _mm512_unpacklo_epi64(t1, t3));
    _mm512_store_si512(U + 4 * S + 3, _mm512_unpackhi_epi64(t1, t3));
  } else {
    constexpr int c = S - 4;
    const __m512i u0 = _mm512_load_si512(U + c), u1 = _mm512_load_si512(U + 4 + c);
    const __m512i u2 = _mm512_load_si512(U + 8 + c), u3 = _mm512_load_si512(U + 12 + c);
    const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u0, u1, 0xee);
    const __m512i v2 = _mm512_shuffle_i32x4(u2, u3, 0x44), v3 = _mm512_shuffle_i32x4(u2, u3, 0xee);
    uint32_t(*out)[16] = cols + 16 * chunk;
    _mm512_store_si512(out[c], _mm512_shuffle_i32x4(v0, v2, 0x88));
    _mm512_store_si512(out[4 + c], _mm512_shuffle_i32x4(v0, v2, 0xdd));
    _mm512_store_si512(out[8 + c], _mm512_shuffle_i32x4(v1, v3, 0x88));
    _mm512_store_si512(out[12 + c], _mm512_shuffle_i32x4(v1, v3, 0xdd));
  }
}

// All eight steps, in order (the first tile's transposes, which nothing overlaps).
inline void lane_transpose_whole(const uint8_t* Kt, size_t ldk, int h, size_t chunk, __m512i* U, uint32_t (*cols)[16]) {
  lane_transpose_step<0>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<1>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<2>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<3>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<4>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<5>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<6>(Kt, ldk, h, chunk, U, cols);
  lane_transpose_step<7>(Kt, ldk, h, chunk, U, cols);
}

// Row i's digit sums of both halves += their unsigned bytes ua / ub times the digits at d, d + step, ...: one
// broadcast register per digit for the two vpdpbusd.
template <int MB>
__attribute__((always_inline)) inline void lane_digit_dots2(LaneSums<MB>& a, LaneSums<MB>& b, int i, __m512i ua,
                                                            __m512i ub, const int32_t* d, int step) {
  __m512i v = _mm512_set1_epi32(d[0]);
  dpbusd_into(a.d0[i], ua, v);
  dpbusd_into(b.d0[i], ub, v);
  v = _mm512_set1_epi32(d[step]);
  dpbusd_into(a.d1[i], ua, v);
  dpbusd_into(b.d1[i], ub, v);
  v = _mm512_set1_epi32(d[2 * step]);
  dpbusd_into(a.d2[i], ua, v);
  dpbusd_into(b.d2[i], ub, v);
}

// lane_column for the same column of both halves.
template <bool kS4, int MB>
__attribute__((always_inline)) inline void lane_column2(LaneSums<MB>& a, LaneSums<MB>& b, __m512i xa, __m512i xb,
                                                        const int32_t* qd) {
  if constexpr (kS4) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    const __m512i ea = _mm512_and_si512(xa, nibble), oa = _mm512_and_si512(_mm512_srli_epi32(xa, 4), nibble);
    const __m512i eb = _mm512_and_si512(xb, nibble), ob = _mm512_and_si512(_mm512_srli_epi32(xb, 4), nibble);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      lane_digit_dots2(a, b, i, ea, eb, qd + i * 6, 2);
      lane_digit_dots2(a, b, i, oa, ob, qd + i * 6 + 1, 2);
    }
  } else {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i ua = _mm512_xor_si512(xa, offset), ub = _mm512_xor_si512(xb, offset);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) lane_digit_dots2(a, b, i, ua, ub, qd + i * 3, 1);
  }
}

// Column col + S of the current tile (both halves), and step S of the next tile's (half, chunk) transpose.
template <bool kS4, int MB, bool kNext, int S>
__attribute__((always_inline)) inline void lane_pipe_column(LaneSums<MB>& a, LaneSums<MB>& b, const LaneColumns& cur,
                                                            LaneColumns& next, __m512i* U, size_t col,
                                                            const int32_t* qd, const uint8_t* Kn, size_t ldk, int h,
                                                            size_t chunk) {
  lane_column2<kS4, MB>(a, b, _mm512_load_si512(cur[0][col + S]), _mm512_load_si512(cur[1][col + S]),
                        qd + S * MB * kLaneDwords<kS4>);
  if constexpr (kNext) lane_transpose_step<S>(Kn, ldk, h, chunk, U, next[h]);
}

// The multiply-adds of one tile over its buffered columns (ncols, a multiple of 16), each group of 8 columns
// carrying the 8 steps of one (half, chunk) transpose of the next tile (kNext) at Kn.
template <bool kS4, int MB, bool kNext>
__attribute__((always_inline)) inline void lane_pipe_tile(size_t ncols, size_t nchunks, const LaneQuery& q,
                                                          const LaneColumns& cur, LaneColumns& next, __m512i* U,
                                                          const uint8_t* Kn, size_t ldk, LaneSums<MB>& a,
                                                          LaneSums<MB>& b) {
  const int32_t* qd = q.digits;
  int h = 0;
  size_t chunk = 0;
  for (size_t col = 0; col < ncols; col += 8, qd += 8 * MB * kLaneDwords<kS4>) {
    lane_pipe_column<kS4, MB, kNext, 0>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 1>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 2>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 3>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 4>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 5>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 6>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    lane_pipe_column<kS4, MB, kNext, 7>(a, b, cur, next, U, col, qd, Kn, ldk, h, chunk);
    if (++chunk == nchunks) chunk = 0, ++h;
  }
}

// Keys [0, 32 * tiles) of lane_rows for MB <= kPipeMaxRows where whole 64-byte chunks cover the row; returns how
// many it did.
template <bool kS4, int MB>
__attribute__((noinline)) size_t lane_rows_pipelined(size_t N, size_t H, const LaneQuery& q, const uint8_t* K,
                                                     size_t ldk, float* const* c, size_t ahead) {
  const size_t bytes = kS4 ? H / 2 : H;
  const size_t tiles = N / kPipeKeys;
  if (!lane_pipe_fits(bytes) || tiles == 0) return 0;
  const size_t nchunks = bytes / kLaneChunk, ncols = bytes / 4;
  alignas(64) LaneColumns cols[2];  // the current tile's and the next one's, alternating
  alignas(64) __m512i U[16];        // a transpose between its two halves
  for (int h = 0; h < 2; ++h)
    for (size_t chunk = 0; chunk < nchunks; ++chunk)
      lane_transpose_whole(K, ldk, h, chunk, U, cols[0][h]);
  for (size_t t = 0; t < tiles; ++t) {
    const size_t j = t * kPipeKeys;
    // The next tile is read during this one; ask for the one after it `ahead` rows on, as lane_rows does.
    if (ahead && j + 2 * kPipeKeys + ahead <= N) prefetch_lines(K + (j + kPipeKeys + ahead) * ldk, kPipeKeys * ldk);
    LaneSums<MB> a, b;
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      a.d0[i] = a.d1[i] = a.d2[i] = _mm512_setzero_si512();
      b.d0[i] = b.d1[i] = b.d2[i] = _mm512_setzero_si512();
    }
    LaneColumns& cur = cols[t & 1];
    LaneColumns& next = cols[(t + 1) & 1];
    if (t + 1 < tiles)
      lane_pipe_tile<kS4, MB, true>(ncols, nchunks, q, cur, next, U, K + (j + kPipeKeys) * ldk, ldk, a, b);
    else
      lane_pipe_tile<kS4, MB, false>(ncols, nchunks, q, cur, next, U, nullptr, ldk, a, b);
    lane_store(a, q, c, j, 0xffff);
    lane_store(b, q, c, j + kLaneKeys, 0xffff);
  }
  return tiles * kPipeKeys;
}

template <bool kS4, int MB>
__attribute__((noinline)) void lane_rows(size_t N, size_t H, const LaneQuery& q, const uint8_t* K, size_t ldk,
                                         float* const* c_rows) {
  float* c[MB];
  const size_t ahead = block_prefetch_rows(N, ldk);
  size_t j = 0;
  if constexpr (MB <= kPipeMaxRows) j = lane_rows_pipelined<kS4, MB>(N, H, q, K, ldk, c_rows, ahead);
  for (; j < N; j += kLaneKeys) {
    const size_t kn = std::min(kLaneKeys, N - j);
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    if (ahead && j + ahead + kLaneKeys <= N) prefetch_lines(K + (j + ahead) * ldk, kLaneKeys * ldk);
    if (kn == kLaneKeys) lane_tile<kS4, MB, true>(H, q, K + j * ldk, ldk, kn, c);
    else lane_tile<kS4, MB, false>(H, q, K + j * ldk, ldk, kn, c);
  }
}

// The limbs of elements [0, n) as the three signed bytes vpdpbusd multiplies (struct LaneQuery): d[0] and d[1] with
// hi = 256 d0 + d1, d[2] = lo. Each row of d takes n rounded up to 32 bytes, zero past n. Unaligned stores: the rows
// need not start on a 32-byte boundary, and while optimized builds fold the narrowing into vpmovwb's store, which
// takes any address, an -O0 build's vmovdqa faulted on them.
inline void limb_bytes(const int16_t* hi, const int16_t* lo, size_t n, int8_t* const d[3]) {
  const auto store = [](__m512i x, int8_t* a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a), _mm512_cvtepi16_epi8(x));
  };
  for (size_t e = 0; e < n; e += 32) {
    const __mmask32 m = n - e >= 32 ? ~__mmask32{0} : (__mmask32{1} << (n - e)) - 1;
    const __m512i h = _mm512_maskz_loadu_epi16(m, hi + e);
    const __m512i low = _mm512_srai_epi16(_mm512_slli_epi16(h, 8), 8);  // hi's low byte, signed
    store(_mm512_srai_epi16(_mm512_sub_epi16(h, low), 8), d[0] + e);
    store(low, d[1] + e);
    store(_mm512_maskz_loadu_epi16(m, lo + e), d[2] + e);
  }
}

// Row i of mb: its limbs (int4: even elements at [0, H/2), odd ones from H/2 on; int8: in order) into the
// column-major digits.
template <bool kS4>
inline void pack_lane_digits(const int16_t* hi, const int16_t* lo, size_t H, int i, int mb, int32_t* digits) {
  alignas(64) int8_t d[3][kLimbMaxH + 32];
  int8_t* const rows[3] = {d[0], d[1], d[2]};
  limb_bytes(hi, lo, H, rows);
  constexpr int D = kLaneDwords<kS4> / 3;
  for (size_t c = 0; c < H / (4 * D); ++c)
    for (int k = 0; k < 3; ++k)
      for (int part = 0; part < D; ++part)
        std::memcpy(digits + ((c * mb + i) * 3 + k) * D + part, d[k] + part * H / 2 + 4 * c, 4);
}

// The whole QK: rows the integer path cannot take go to kFallback (the fp32 kernel) one by one.
template <bool kS4, QkGemmFn kFallback>
void qk_key_lanes(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk, float alpha,
                  float* C, size_t ldc) {
  if (H > kLimbMaxH) return kFallback(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  alignas(64) int16_t limbs[kLaneMaxRows][2][kLimbMaxH];
  alignas(64) int32_t digits[kLimbMaxH / 4 * kLaneMaxRows * 3];
  const uint8_t* base = static_cast<const uint8_t*>(K);
  // Passes as even as `most` rows allow (5 rows: 3 + 2, not 4 + 1; 7 in threes: 3 + 2 + 2): one row alone runs at
  // half the multiply-add rate.
  const size_t most = lane_pipe_fits(kS4 ? H / 2 : H) ? kPipeMaxRows : kLaneMaxRows;
  size_t i = 0;
  while (i < M) {
    const size_t rest = M - i, passes = (rest + most - 1) / most, per_pass = (rest + passes - 1) / passes;
    LaneQuery q{digits, {}, {}, {}};
    float* out[kLaneMaxRows];
    int mb = 0;
    for (; i < M && mb < static_cast<int>(per_pass); ++i) {
      const float* row = Q + i * ldq;
      LimbRow limb;
      if (!split_limbs(row, H, kS4, H / 2, H, alpha, limbs[mb][0], limbs[mb][1], &limb)) {
        kFallback(1, N, H, row, ldq, K, ldk, alpha, C + i * ldc, ldc);
        continue;
      }
      q.factor[mb] = limb.factor;
      q.off_hi[mb] = (kS4 ? 8u : 128u) * static_cast<uint32_t>(limb.sum_hi);
      q.off_lo[mb] = (kS4 ? 8u : 128u) * static_cast<uint32_t>(limb.sum_lo);
      out[mb++] = C + i * ldc;
    }
    for (int r = 0; r < mb; ++r) pack_lane_digits<kS4>(limbs[r][0], limbs[r][1], H, r, mb, digits);
    static_assert(kLaneMaxRows == 4, "the switch below dispatches 1 to 4 rows");
    switch (mb) {
      case 1: lane_rows<kS4, 1>(N, H, q, base, ldk, out); break;
      case 2: lane_rows<kS4, 2>(N, H, q, base, ldk, out); break;
      case 3: lane_rows<kS4, 3>(N, H, q, base, ldk, out); break;
      case 4: lane_rows<kS4, 4>(N, H, q, base, ldk, out); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace attnkit
