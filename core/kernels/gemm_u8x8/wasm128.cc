// attnkit gemm_u8x8, WebAssembly SIMD128: i32x4.dot_i16x8_s on int16 operands with the zero points
// already subtracted (|a - za|, |b - zb| <= 255, so each pair sum is exact in int32). Plain SIMD128
// only: relaxed SIMD's i8 dot is unusable with this toolchain (notes/toolchain.md).
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>
#endif

#include <vector>

#include "gemm_u8x8/gemm_u8x8_impl.h"

namespace attnkit {
namespace {

// 4 rows x 8 columns: 8 accumulators + 2 strip vectors + the row pair fit the 16 SIMD registers V8
// has on x64 (a 4 x 16 tile spills accumulators in the inner loop).
constexpr size_t kMr = 4, kNr = 8;
constexpr size_t kColumnVecs = kNr / 4;

// strip is [K/2][8][2] int16: two v128 of 4 columns x 2 k per k pair.
void micro_dot16(const int16_t* const rows[kMr], size_t kgroups, const int16_t* strip, int32_t* tile) {
  v128_t acc[kMr][kColumnVecs];
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < kColumnVecs; ++j) acc[r][j] = wasm_i32x4_splat(0);
  for (size_t g = 0; g < kgroups; ++g) {
    v128_t b[kColumnVecs];
    for (size_t j = 0; j < kColumnVecs; ++j) b[j] = wasm_v128_load(strip + g * 2 * kNr + j * 8);
    for (size_t r = 0; r < kMr; ++r) {
      int32_t pair;
      std::memcpy(&pair, rows[r] + 2 * g, sizeof(pair));
      const v128_t a = wasm_i32x4_splat(pair);
      for (size_t j = 0; j < kColumnVecs; ++j) acc[r][j] = wasm_i32x4_add(acc[r][j], wasm_i32x4_dot_i16x8(a, b[j]));
    }
  }
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < kColumnVecs; ++j) wasm_v128_store(tile + r * kNr + j * 4, acc[r][j]);
}

// Few rows: 16 * G columns at a time down all of K, two weight rows per step, their bytes interleaved into
// (k, k+1) pairs (one byte shuffle per 8 columns, an unpack on x64), widened to int16 and multiplied with
// dot_i16x8 against the splatted pair (a_k - za, a_k+1 - za), computed once per row of A.
// |a - za| <= 255 and b in [-128, 255]: each pair sum fits int32; the zero point is applied once at the
// end as zb * sum_k (a_k - za) (the generic loop's identity).
template <bool kSigned>
v128_t widen(v128_t v, bool high) {
  if (kSigned) return high ? wasm_i16x8_extend_high_i8x16(v) : wasm_i16x8_extend_low_i8x16(v);
  return high ? wasm_u16x8_extend_high_u8x16(v) : wasm_u16x8_extend_low_u8x16(v);
}

// acc[g][0..3] += the columns 16g .. 16g + 15 of rows r0 and r1 (r1 null: zeros) times the pair.
template <bool kSigned, size_t G>
void direct_pair_step(v128_t pair, const uint8_t* r0, const uint8_t* r1, v128_t (&acc)[G][4]) {
  for (size_t g = 0; g < G; ++g) {
    const v128_t x0 = wasm_v128_load(r0 + 16 * g), x1 = r1 ? wasm_v128_load(r1 + 16 * g) : wasm_i32x4_splat(0);
    const v128_t lo = wasm_i8x16_shuffle(x0, x1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const v128_t hi = wasm_i8x16_shuffle(x0, x1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    acc[g][0] = wasm_i32x4_add(acc[g][0], wasm_i32x4_dot_i16x8(pair, widen<kSigned>(lo, false)));
    acc[g][1] = wasm_i32x4_add(acc[g][1], wasm_i32x4_dot_i16x8(pair, widen<kSigned>(lo, true)));
    acc[g][2] = wasm_i32x4_add(acc[g][2], wasm_i32x4_dot_i16x8(pair, widen<kSigned>(hi, false)));
    acc[g][3] = wasm_i32x4_add(acc[g][3], wasm_i32x4_dot_i16x8(pair, widen<kSigned>(hi, true)));
  }
}

template <bool kSigned, size_t G>
void direct_strip(size_t K, const int32_t* pairs, const uint8_t* B, size_t ldb, int32_t rowsum, const int32_t* b_zp,
                  int32_t* c) {
  v128_t acc[G][4];
  for (size_t g = 0; g < G; ++g)
    for (size_t j = 0; j < 4; ++j) acc[g][j] = wasm_i32x4_splat(0);
  size_t k = 0;
  for (; k + 2 <= K; k += 2)
    direct_pair_step<kSigned, G>(wasm_v128_load32_splat(pairs + k / 2), B + k * ldb, B + (k + 1) * ldb, acc);
  if (k < K) direct_pair_step<kSigned, G>(wasm_v128_load32_splat(pairs + k / 2), B + k * ldb, nullptr, acc);
  const v128_t rs = wasm_i32x4_splat(rowsum);
  for (size_t g = 0; g < G; ++g)
    for (size_t j = 0; j < 4; ++j) {
      const size_t n = 16 * g + 4 * j;
      wasm_v128_store(c + n, wasm_i32x4_sub(acc[g][j], wasm_i32x4_mul(wasm_v128_load(b_zp + n), rs)));
    }
}

template <bool kSigned>
void direct_row(size_t N, size_t K, const uint8_t* a, int32_t a_zp, const uint8_t* B, size_t ldb,
                const int32_t* b_zp, int32_t* c) {
  int32_t rowsum = 0;
  for (size_t k = 0; k < K; ++k) rowsum += int32_t(a[k]) - a_zp;
  std::vector<int32_t> pairs((K + 1) / 2);
  for (size_t k = 0; k < K; k += 2) {
    const int32_t a0 = int32_t(a[k]) - a_zp, a1 = k + 1 < K ? int32_t(a[k + 1]) - a_zp : 0;
    pairs[k / 2] = int32_t(uint32_t(uint16_t(a0)) | uint32_t(uint16_t(a1)) << 16);
  }
  size_t n = 0;
  for (; n + 32 <= N; n += 32) direct_strip<kSigned, 2>(K, pairs.data(), B + n, ldb, rowsum, b_zp + n, c + n);
  for (; n + 16 <= N; n += 16) direct_strip<kSigned, 1>(K, pairs.data(), B + n, ldb, rowsum, b_zp + n, c + n);
  for (; n < N; ++n) {
    int32_t sum = 0;
    for (size_t k = 0; k < K; ++k) {
      const uint8_t b = B[k * ldb + n];
      sum += (int32_t(a[k]) - a_zp) * (kSigned ? int32_t(int8_t(b)) : int32_t(b));
    }
    c[n] = sum - b_zp[n] * rowsum;
  }
}

struct DirectDot16 {
  static void run(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B, size_t ldb,
                  bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc) {
    const uint8_t* b = static_cast<const uint8_t*>(B);
    for (size_t m = 0; m < M; ++m) {
      if (b_signed)
        direct_row<true>(N, K, A + m * lda, a_zp, b, ldb, b_zp, C + m * ldc);
      else
        direct_row<false>(N, K, A + m * lda, a_zp, b, ldb, b_zp, C + m * ldc);
    }
  }
};

// Whole 8-column strips: each key pair's two 8-byte rows are interleaved by one shuffle and widened in two
// steps, where the portable loop (which V8 gets as scalar-heavy code) took 0.85 ms of a 7.4 ms QAttention at
// S=128 for the 768 x 2304 weight. Partial strips and an odd last row take the portable packer.
struct StripDot16 {
  template <bool kSigned>
  static void pairs(size_t K, const uint8_t* b, size_t ldb, const int32_t* zp, int16_t* out) {
    const v128_t zlo = wasm_i16x8_make(int16_t(zp[0]), int16_t(zp[0]), int16_t(zp[1]), int16_t(zp[1]),
                                       int16_t(zp[2]), int16_t(zp[2]), int16_t(zp[3]), int16_t(zp[3]));
    const v128_t zhi = wasm_i16x8_make(int16_t(zp[4]), int16_t(zp[4]), int16_t(zp[5]), int16_t(zp[5]),
                                       int16_t(zp[6]), int16_t(zp[6]), int16_t(zp[7]), int16_t(zp[7]));
    for (size_t k = 0; k + 2 <= K; k += 2, out += 2 * kNr) {
      const v128_t row0 = wasm_v128_load64_zero(b + k * ldb), row1 = wasm_v128_load64_zero(b + (k + 1) * ldb);
      const v128_t pair = wasm_i8x16_shuffle(row0, row1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const v128_t lo = kSigned ? wasm_i16x8_extend_low_i8x16(pair) : wasm_u16x8_extend_low_u8x16(pair);
      const v128_t hi = kSigned ? wasm_i16x8_extend_high_i8x16(pair) : wasm_u16x8_extend_high_u8x16(pair);
      wasm_v128_store(out, wasm_i16x8_sub(lo, zlo));
      wasm_v128_store(out + 8, wasm_i16x8_sub(hi, zhi));
    }
  }
  template <size_t NR, size_t KG>
  static void run(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed, const int32_t* b_zp,
                  int16_t* out) {
    static_assert(NR == kNr && KG == 2, "the shuffle interleaves 8 columns of two rows");
    if (nr != NR || K % 2) return pack_strip_i16<NR, KG>(K, nr, B, ldb, n0, b_signed, b_zp, out);
    const uint8_t* b = static_cast<const uint8_t*>(B) + n0;
    if (b_signed) pairs<true>(K, b, ldb, b_zp + n0, out);
    else pairs<false>(K, b, ldb, b_zp + n0, out);
  }
};

using Wasm128 = GemmEntry<I16Gemm<kMr, kNr, 2, FullTile<micro_dot16>, StripDot16>, DirectDot16>;

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_wasm128 = Wasm128::kernels("wasm128-dot16", kNr);

}  // namespace attnkit
