// attnkit gemm_u8x8, 512-bit VNNI pieces shared by avx512vnni.cc and amx.cc (included only by them): the packer
// of B strips (64 columns, groups of 4 k bytes per column: also the B tile layout of AMX), the 4-row vpdpbusd
// micro-kernel, the epilogue that puts a finished row into column order and applies the zero points, and the
// zmm traits of the few-rows kernel (x86_direct_impl.h).
#pragma once
#include <immintrin.h>

#include "gemm_u8x8/gemm_u8x8_impl.h"
#include "unroll.h"
#include "x86_vnni.h"

namespace attnkit {
namespace {

// 4 rows x 64 columns: 16 accumulators, and per k group 4 strip loads + 4 broadcasts feed 16 vpdpbusd
// (an 8 x 16 tile needs 9 loads for 8). Six rows (24 accumulators) would halve the broadcasts, but
// GCC then spills accumulators inside the k loop.
constexpr size_t kMr = 4, kNr = 64;

// The packer's column order (what byte/word unpacks produce): register j of a row group holds, in its
// 128-bit lane l, columns 16l + 4j .. 16l + 4j + 3. This 4 x 4 transpose of 128-bit lanes puts x0..x3
// into column order (y[i] = columns 16i .. 16i + 15). Operands by value: an accumulator whose address is
// taken gets spilled in the k loop.
__attribute__((always_inline)) inline void to_column_order(__m512i x0, __m512i x1, __m512i x2, __m512i x3,
                                                          __m512i y[4]) {
  const __m512i t0 = _mm512_shuffle_i32x4(x0, x1, 0x44), t1 = _mm512_shuffle_i32x4(x0, x1, 0xEE);
  const __m512i t2 = _mm512_shuffle_i32x4(x2, x3, 0x44), t3 = _mm512_shuffle_i32x4(x2, x3, 0xEE);
  y[0] = _mm512_shuffle_i32x4(t0, t2, 0x88);
  y[1] = _mm512_shuffle_i32x4(t0, t2, 0xDD);
  y[2] = _mm512_shuffle_i32x4(t1, t3, 0x88);
  y[3] = _mm512_shuffle_i32x4(t1, t3, 0xDD);
}

__attribute__((always_inline)) inline void store_in_column_order(int32_t* dst, __m512i x0, __m512i x1, __m512i x2,
                                                                 __m512i x3) {
  __m512i y[4];
  to_column_order(x0, x1, x2, x3, y);
  for (size_t i = 0; i < 4; ++i) _mm512_storeu_si512(dst + 16 * i, y[i]);
}

// One row of a full strip, finished: the packer's order undone, then the dot4 epilogue (zero-point terms and the
// optional dequantization, the same operations as the driver's) stored to dst.
__attribute__((always_inline)) inline void store_finished_row(__m512i x0, __m512i x1, __m512i x2, __m512i x3,
                                                              const Dot4Epilogue<kNr>& ep, int32_t rowsum,
                                                              int32_t* dst) {
  __m512i y[4];
  to_column_order(x0, x1, x2, x3, y);
  const __m512i rs = _mm512_set1_epi32(rowsum);
  ATTNKIT_UNROLL for (size_t i = 0; i < 4; ++i) {
    const __m512i zp_neg = _mm512_load_si512(ep.zp_neg + 16 * i);
    const __m512i fixed = _mm512_add_epi32(_mm512_add_epi32(y[i], _mm512_mullo_epi32(zp_neg, rs)),
                                           _mm512_load_si512(ep.col_term + 16 * i));
    if (ep.dequant) {
      const __m512 f = _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(fixed), _mm512_load_ps(ep.scale + 16 * i)),
                                     _mm512_load_ps(ep.bias + 16 * i));
      _mm512_storeu_ps(dst + 16 * i, f);
    } else {
      _mm512_storeu_si512(dst + 16 * i, fixed);
    }
  }
}

// Packs a row group with two levels of unpacks (8 shuffles per 256 bytes) and sums the columns with
// vpdpbusd against ones; both stay in the unpack order, undone by store_in_column_order.
struct PackVnni512 {
  static void group(size_t g, size_t K, size_t nr, const uint8_t* base, size_t ldb, uint8_t flip, int8_t* out,
                    int32_t* colsum) {
    alignas(64) uint8_t pad[4][kNr];
    const __m512i flips = _mm512_set1_epi8(static_cast<char>(flip));
    __m512i r[4];
    for (size_t t = 0; t < 4; ++t) {
      const size_t k = 4 * g + t;
      const uint8_t* row = base + k * ldb;
      if (!(k < K && nr == kNr)) {
        std::memset(pad[t], flip, kNr);  // maps to b' = 0 after the xor
        if (k < K) std::memcpy(pad[t], row, nr);
        row = pad[t];
      }
      r[t] = _mm512_xor_si512(_mm512_loadu_si512(row), flips);
    }
    const __m512i lo01 = _mm512_unpacklo_epi8(r[0], r[1]), hi01 = _mm512_unpackhi_epi8(r[0], r[1]);
    const __m512i lo23 = _mm512_unpacklo_epi8(r[2], r[3]), hi23 = _mm512_unpackhi_epi8(r[2], r[3]);
    const __m512i x[4] = {_mm512_unpacklo_epi16(lo01, lo23), _mm512_unpackhi_epi16(lo01, lo23),
                          _mm512_unpacklo_epi16(hi01, hi23), _mm512_unpackhi_epi16(hi01, hi23)};
    const __m512i ones = _mm512_set1_epi8(1);
    int8_t* dst = out + g * kNr * 4;
    for (size_t j = 0; j < 4; ++j) {
      _mm512_storeu_si512(dst + 64 * j, x[j]);
      __m512i* sum = reinterpret_cast<__m512i*>(colsum + 16 * j);
      _mm512_storeu_si512(sum, _mm512_dpbusd_epi32(_mm512_loadu_si512(sum), ones, x[j]));
    }
  }
  static void finish(int32_t* colsum) {
    store_in_column_order(colsum, _mm512_loadu_si512(colsum), _mm512_loadu_si512(colsum + 16),
                          _mm512_loadu_si512(colsum + 32), _mm512_loadu_si512(colsum + 48));
  }
};

// R rows of one strip. Without an epilogue the raw sums go to tile (R x kNr); with one, each finished row
// (zero-point terms, then the optional dequantization, same operations as the driver's) goes to C.
template <size_t R>
void micro_rows(const uint8_t* const* rows, size_t kgroups, const int8_t* strip, int32_t* tile,
                const Dot4Epilogue<kNr>* ep = nullptr, const int32_t* rowsum = nullptr, int32_t* C = nullptr,
                size_t ldc = 0) {
  __m512i acc[R][4];
  ATTNKIT_UNROLL for (size_t r = 0; r < R; ++r)
    ATTNKIT_UNROLL for (size_t j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_si512();
  for (size_t g = 0; g < kgroups; ++g) {
    const int8_t* b = strip + g * 256;
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
    const __m512i b2 = _mm512_loadu_si512(b + 128), b3 = _mm512_loadu_si512(b + 192);
    ATTNKIT_UNROLL for (size_t r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, rows[r] + 4 * g, sizeof(quad));
      const __m512i a = _mm512_set1_epi32(quad);
      dpbusd_into(acc[r][0], a, b0);
      dpbusd_into(acc[r][1], a, b1);
      dpbusd_into(acc[r][2], a, b2);
      dpbusd_into(acc[r][3], a, b3);
    }
  }
  ATTNKIT_UNROLL for (size_t r = 0; r < R; ++r) {
    if (!ep) {
      store_in_column_order(tile + r * kNr, acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
      continue;
    }
    store_finished_row(acc[r][0], acc[r][1], acc[r][2], acc[r][3], *ep, rowsum[r], C + r * ldc);
  }
}

// Tail tiles run only their live rows (decode's single row would otherwise pay for four).
struct MicroVnni512 {
  template <typename... Out>
  static void dispatch(size_t mr, const uint8_t* const* rows, size_t kgroups, const int8_t* strip, Out... out) {
    switch (mr) {
      case 1: return micro_rows<1>(rows, kgroups, strip, out...);
      case 2: return micro_rows<2>(rows, kgroups, strip, out...);
      case 3: return micro_rows<3>(rows, kgroups, strip, out...);
      default: return micro_rows<kMr>(rows, kgroups, strip, out...);
    }
  }
  static void run(size_t mr, const uint8_t* const* rows, size_t kgroups, const int8_t* strip, int32_t* tile) {
    dispatch(mr, rows, kgroups, strip, tile);
  }
  static void store_rows(size_t mr, const uint8_t* const* rows, size_t kgroups, const int8_t* strip,
                         const Dot4Epilogue<kNr>& ep, const int32_t* rowsum, int32_t* C, size_t ldc) {
    dispatch(mr, rows, kgroups, strip, static_cast<int32_t*>(nullptr), &ep, rowsum, C, ldc);
  }
};

// X86Direct's zmm traits (see x86_direct_impl.h): 32 columns per group. The unpacks work within 128-bit lanes, so
// the pairs hold columns 0-7 and 16-23 in lo, 8-15 and 24-31 in hi until finish puts them back in order.
struct DirectAvx512 {
  using V = __m512i;
  static constexpr size_t W = 16;
  static V broadcast(int32_t x) { return _mm512_set1_epi32(x); }
  template <bool kSigned>
  static void pairs(const uint8_t* row0, const uint8_t* row1, V& lo, V& hi) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row0));
    const __m256i x1 = row1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row1)) : _mm256_setzero_si256();
    const __m256i l = _mm256_unpacklo_epi8(x0, x1), h = _mm256_unpackhi_epi8(x0, x1);
    lo = kSigned ? _mm512_cvtepi8_epi16(l) : _mm512_cvtepu8_epi16(l);
    hi = kSigned ? _mm512_cvtepi8_epi16(h) : _mm512_cvtepu8_epi16(h);
  }
  static V madd(V acc, V b, V a) { return _mm512_dpwssd_epi32(acc, b, a); }
  static V load(const int32_t* p) { return _mm512_loadu_si512(p); }
  static void store(int32_t* p, V v) { _mm512_storeu_si512(p, v); }
  static void finish(int32_t* c, int32_t rowsum, const int32_t* zp) {
    const V lo = load(c), hi = load(c + W), rs = _mm512_set1_epi32(rowsum);
    const V c0 = _mm512_shuffle_i32x4(lo, hi, 0x44), c1 = _mm512_shuffle_i32x4(lo, hi, 0xEE);
    store(c, _mm512_sub_epi32(c0, _mm512_mullo_epi32(load(zp), rs)));
    store(c + W, _mm512_sub_epi32(c1, _mm512_mullo_epi32(load(zp + W), rs)));
  }
};

}  // namespace
}  // namespace attnkit
