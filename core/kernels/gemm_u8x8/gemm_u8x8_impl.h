// attnkit gemm_u8x8: packing and tiling shared by the ISA files (included only by them).
// Everything here has internal linkage on purpose: each ISA file compiles it with its own flags, and a
// shared inline symbol could let the linker pick an AVX512 copy for a scalar caller.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gemm_u8x8/gemm_u8x8.h"

namespace attnkit {
namespace {

// The packers assemble interleaved bytes in wider words; every target attnkit builds for is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "gemm_u8x8 packing assumes little-endian");

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// ---- int8 "dot4" layout (VNNI, NEON sdot): strip [K/4][NR][4] of b' = b (s8) or b - 128 (u8) ----
// The u8 -> s8 shift keeps the product instructions' signed operand in range; the shift moves into the
// zero point (b - zp == b' - zp'), so the correction below is unchanged. b - 128 is b ^ 0x80 in int8 bits.
// Rows are read whole (NR contiguous bytes): the inner loops have fixed trip counts so they vectorize;
// padded rows/columns hold the byte that maps to b' = 0.
// Group g (rows 4g..4g+3) of the strip of nr columns starting at `base`; adds the packed bytes' int8
// values to colsum.
template <size_t NR>
void pack_group_dot4(size_t g, size_t K, size_t nr, const uint8_t* base, size_t ldb, uint8_t flip, int8_t* out,
                     int32_t* colsum) {
  uint8_t pad[4][NR];
  const uint8_t* rows[4];
  for (size_t t = 0; t < 4; ++t) {
    const size_t k = 4 * g + t;
    if (k < K && nr == NR) {
      rows[t] = base + k * ldb;
    } else {
      std::memset(pad[t], flip, NR);
      if (k < K) std::memcpy(pad[t], base + k * ldb, nr);
      rows[t] = pad[t];
    }
  }
  // Four bytes per column assembled in a 32-bit lane and the column sums in the same pass: plain
  // widening, shifts and adds over a fixed trip count, which compilers vectorize (a byte-wise
  // interleave they do not).
  uint32_t words[NR];
  for (size_t c = 0; c < NR; ++c) {
    const uint8_t b0 = uint8_t(rows[0][c] ^ flip), b1 = uint8_t(rows[1][c] ^ flip);
    const uint8_t b2 = uint8_t(rows[2][c] ^ flip), b3 = uint8_t(rows[3][c] ^ flip);
    words[c] = uint32_t(b0) | uint32_t(b1) << 8 | uint32_t(b2) << 16 | uint32_t(b3) << 24;
    colsum[c] += int32_t(int8_t(b0)) + int32_t(int8_t(b1)) + int32_t(int8_t(b2)) + int32_t(int8_t(b3));
  }
  std::memcpy(out + g * NR * 4, words, sizeof(words));  // little-endian: byte t of column c at c*4 + t
}

// The natural dot4 packer: pack_group_dot4, column sums already in column order.
template <size_t NR>
struct Dot4Packer {
  static void group(size_t g, size_t K, size_t nr, const uint8_t* base, size_t ldb, uint8_t flip, int8_t* out,
                    int32_t* colsum) {
    pack_group_dot4<NR>(g, K, nr, base, ldb, flip, out, colsum);
  }
  static void finish(int32_t*) {}
};

// A copied with K padded to a multiple of 4 (zeros), and its row sums. With kSignedA (NEON sdot has
// no u8 x s8 form) the copy holds a - 128 as int8 bits; the caller shifts a_zp by the same 128.
template <bool kSignedA>
void prep_a_u8(size_t M, size_t K, const uint8_t* A, size_t lda, size_t kpad, uint8_t* out,
               int32_t* rowsum) {
  for (size_t m = 0; m < M; ++m) {
    const uint8_t* src = A + m * lda;
    uint8_t* dst = out + m * kpad;
    int32_t s = 0;
    for (size_t k = 0; k < K; ++k) {
      dst[k] = kSignedA ? uint8_t(src[k] ^ 0x80) : src[k];
      s += int32_t(src[k]) - (kSignedA ? 128 : 0);
    }
    std::memset(dst + K, 0, kpad - K);
    rowsum[m] = s;
  }
}

// ---- int16 "pair" layout (AVX2 madd, wasm dot_i16x8, NEON widening): strip [K/KG][NR][KG] of
// (b - zp) in int16, and A as (a - a_zp) in int16. |a - za|, |b - zb| <= 255, so a pair of products
// (<= 130050) fits the int32 lanes exactly and no correction is needed.
template <size_t NR, size_t KG, typename BElem>
void pack_strip_i16_typed(size_t K, size_t nr, const BElem* base, size_t ldb, const int32_t* zp, int16_t* out) {
  const size_t kg = round_up(K, KG) / KG;
  int16_t zpr[NR];
  for (size_t c = 0; c < NR; ++c) zpr[c] = int16_t(c < nr ? zp[c] : 0);
  BElem pad[KG][NR];
  for (size_t g = 0; g < kg; ++g) {
    const BElem* rows[KG];
    for (size_t t = 0; t < KG; ++t) {
      const size_t k = g * KG + t;
      if (k < K && nr == NR) {
        rows[t] = base + k * ldb;
      } else {
        // Padding holds the zero point, so (b - zp) is 0 there.
        for (size_t c = 0; c < NR; ++c) pad[t][c] = BElem(zpr[c]);
        if (k < K) std::memcpy(pad[t], base + k * ldb, nr * sizeof(BElem));
        rows[t] = pad[t];
      }
    }
    int16_t* d = out + g * NR * KG;
    if constexpr (KG == 2) {
      // The pair assembled in a 32-bit lane: a fixed-trip loop of widen, subtract, shift and or that
      // compilers vectorize (the element-wise interleave below they do not).
      uint32_t words[NR];
      for (size_t c = 0; c < NR; ++c)
        words[c] = uint32_t(uint16_t(int16_t(rows[0][c]) - zpr[c])) |
                   uint32_t(uint16_t(int16_t(rows[1][c]) - zpr[c])) << 16;
      std::memcpy(d, words, sizeof(words));  // little-endian: (k, k+1) of column c at 2c, 2c+1
    } else {
      for (size_t c = 0; c < NR; ++c)
        for (size_t t = 0; t < KG; ++t) d[c * KG + t] = int16_t(int16_t(rows[t][c]) - zpr[c]);
    }
  }
}

template <size_t NR, size_t KG>
void pack_strip_i16(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed,
                    const int32_t* b_zp, int16_t* out) {
  if (b_signed)
    pack_strip_i16_typed<NR, KG>(K, nr, static_cast<const int8_t*>(B) + n0, ldb, b_zp + n0, out);
  else
    pack_strip_i16_typed<NR, KG>(K, nr, static_cast<const uint8_t*>(B) + n0, ldb, b_zp + n0, out);
}

inline void prep_a_i16(size_t M, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, size_t kpad,
                       int16_t* out) {
  for (size_t m = 0; m < M; ++m) {
    const uint8_t* src = A + m * lda;
    int16_t* dst = out + m * kpad;
    for (size_t k = 0; k < K; ++k) dst[k] = int16_t(int32_t(src[k]) - a_zp);
    for (size_t k = K; k < kpad; ++k) dst[k] = 0;
  }
}

// Row pointers for an MR-row micro-tile; rows past the end repeat row 0 (a micro-kernel that ignores
// the live row count computes them and the results are discarded), so no micro-kernel reads past A.
template <typename T, size_t MR>
void tile_rows(const T* A, size_t lda, size_t m0, size_t mr, const T* rows[MR]) {
  for (size_t r = 0; r < MR; ++r) rows[r] = A + (m0 + (r < mr ? r : 0)) * lda;
}

// Adapts a micro-kernel that always computes MR rows to the drivers' run(mr, ...) interface.
template <auto kMicro>
struct FullTile {
  template <typename Row, typename Strip>
  static void run(size_t /*mr*/, const Row* const* rows, size_t kgroups, const Strip* strip, int32_t* tile) {
    kMicro(rows, kgroups, strip, tile);
  }
};

// Stores the first nr of NR int32 results of one row at dst, or, with dequant, float(v) * scale + bias
// (scale/bias: this strip's NR values, zero-padded). Fixed trip counts so the loops vectorize.
// A full row is copied with a constant size (plain vector stores; a variable-size memcpy of 256 bytes
// compiles to rep movs, which dominated the store). Not inlined with GCC: inlined into compute's row loop,
// GCC 12 scalarized the dequantize (vcvtsi2ss per element, 3-4% of QAttention S=512 on AVX2); clang (the
// wasm build) vectorizes it inlined.
template <size_t NR>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((noinline))
#endif
void store_row(const int32_t* v, size_t nr, const float* scale, const float* bias, bool dequant, int32_t* dst) {
  if (!dequant) {
    if (nr == NR)
      std::memcpy(dst, v, NR * sizeof(int32_t));
    else
      std::memcpy(dst, v, nr * sizeof(int32_t));
    return;
  }
  float out[NR];
  for (size_t c = 0; c < NR; ++c) out[c] = static_cast<float>(v[c]) * scale[c] + bias[c];
  if (nr == NR)
    std::memcpy(dst, out, NR * sizeof(float));
  else
    std::memcpy(dst, out, nr * sizeof(float));
}

// A strip's dequantization constants, zero-padded to NR.
template <size_t NR>
inline void strip_dequant(const GemmU8X8Dequant* dq, size_t n, size_t nr, float* scale, float* bias) {
  for (size_t c = 0; c < NR; ++c) {
    scale[c] = dq && c < nr ? dq->scale[n + c] : 0.0f;
    bias[c] = dq && c < nr ? dq->bias[n + c] : 0.0f;
  }
}

// A full strip's dequantization, for a micro-kernel that finishes rows in registers: with dequant,
// C = float(acc) * scale[c] + bias[c], else the int32 sums. The int16 driver's whole epilogue.
template <size_t NR>
struct StripDequant {
  alignas(64) float scale[NR];
  alignas(64) float bias[NR];
  bool dequant;
};

// The dot4 driver's epilogue, in column order: first C[r, c] = acc + zp_neg[c] * rowsum[r] + col_term[c]
// (uint32 arithmetic), then the dequantization.
template <size_t NR>
struct Dot4Epilogue : StripDequant<NR> {
  alignas(64) uint32_t col_term[NR];
  alignas(64) uint32_t zp_neg[NR];
};

// Whether Micro has store_rows(mr, rows, kgroups, strip, epilogue, rowsum, C, ldc), which writes finished
// rows of a full strip straight to C (the tile round trip through memory cost a fifth of the projection).
template <typename Micro, typename = void>
struct StoresRows : std::false_type {};
template <typename Micro>
struct StoresRows<Micro, std::void_t<decltype(&Micro::store_rows)>> : std::true_type {};

// ---- dot4 driver. Micro::run(mr, rows, kgroups, strip, tile) computes tile[r*NR + c] = dot(a_r, b'_c)
// for r < mr (a_r as u8, or as s8 = a - 128 with kSignedA). Packed A: [M][kpad] bytes, then rowsum[M].
// Packed B: one block per NR-column strip: [kpad/4][NR][4] int8, colsum[NR], zp'[NR].
// Packer::group packs one row group of a strip (and adds to its column sums); Packer::finish puts a
// strip's column sums into column order. An ISA may pack in its own column order as long as its
// micro-kernel stores the tile in column order.
// K is padded (zero bytes of A, b' = 0 groups of B) to a multiple of KPad: 4, or a tile's depth for AMX.
template <size_t MR, size_t NR, bool kSignedA, typename Micro, typename Packer = Dot4Packer<NR>, size_t KPad = 4>
struct Dot4Gemm {
  static size_t kpad(size_t K) { return round_up(K, KPad); }
  static size_t a_bytes(size_t M, size_t K) { return round_up(M * kpad(K), 64) + M * sizeof(int32_t); }
  static size_t strip_bytes(size_t K) { return kpad(K) * NR + 2 * NR * sizeof(int32_t); }
  static size_t b_bytes(size_t K, size_t N) { return round_up(N, NR) / NR * strip_bytes(K); }

  static void pack_a(size_t M, size_t K, const uint8_t* A, size_t lda, int32_t, void* packed_a) {
    uint8_t* a = static_cast<uint8_t*>(packed_a);
    prep_a_u8<kSignedA>(M, K, A, lda, kpad(K), a,
                        reinterpret_cast<int32_t*>(a + round_up(M * kpad(K), 64)));
  }

  // Row groups outer, strips inner: the weight is read row by row across the whole column range (one
  // contiguous run per row), not one narrow column strip at a time.
  static void pack_b(size_t K, size_t N, size_t n0, size_t n1, const void* B, size_t ldb, bool b_signed,
                     const int32_t* b_zp, void* packed_b) {
    const uint8_t flip = b_signed ? 0 : 0x80;
    const int32_t shift = b_signed ? 0 : 128;
    const size_t s0 = n0 / NR, s1 = (n1 + NR - 1) / NR;
    auto strip_at = [&](size_t s) { return static_cast<uint8_t*>(packed_b) + s * strip_bytes(K); };
    auto sums_at = [&](size_t s) { return reinterpret_cast<int32_t*>(strip_at(s) + kpad(K) * NR); };
    for (size_t s = s0; s < s1; ++s) {
      int32_t* colsum = sums_at(s);
      for (size_t c = 0; c < NR; ++c) {
        colsum[c] = 0;
        colsum[NR + c] = s * NR + c < N ? b_zp[s * NR + c] - shift : 0;  // zp' of b' = b ^ flip
      }
    }
    // The weight is read once per call, usually from beyond L2: prefetch the rows a few groups ahead.
    constexpr size_t kPrefetchRows = 16;
    const uint8_t* first = static_cast<const uint8_t*>(B) + n0;
    for (size_t g = 0; g < kpad(K) / 4; ++g) {
      for (size_t k = 4 * g + kPrefetchRows; k < 4 * g + 4 + kPrefetchRows && k < K; ++k) {
        for (size_t c = 0; c < n1 - n0; c += 64) __builtin_prefetch(first + k * ldb + c);
      }
      for (size_t s = s0; s < s1; ++s) {
        const size_t nr = N - s * NR < NR ? N - s * NR : NR;
        Packer::group(g, K, nr, static_cast<const uint8_t*>(B) + s * NR, ldb, flip,
                      reinterpret_cast<int8_t*>(strip_at(s)), sums_at(s));
      }
    }
    for (size_t s = s0; s < s1; ++s) Packer::finish(sums_at(s));
  }

  static const int32_t* row_sums(size_t M, size_t K, const void* packed_a) {
    return reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(packed_a) + round_up(M * kpad(K), 64));
  }

  // sum (a - za)(b' - zb') = dot(a, b') - zb' * rowsum(a) - za * colsum(b') + K * za * zb', in uint32
  // arithmetic: exact modulo 2^32, hence exact when the true value fits int32. The row-invariant terms of
  // strip s go to ep (with its dequantization constants); returns the strip.
  static const uint8_t* strip_epilogue(size_t N, size_t K, size_t s, const void* packed_b, int32_t a_zp,
                                       const GemmU8X8Dequant* dequant, Dot4Epilogue<NR>* ep) {
    const uint32_t za = uint32_t(kSignedA ? a_zp - 128 : a_zp);
    const uint8_t* strip = static_cast<const uint8_t*>(packed_b) + s * strip_bytes(K);
    const int32_t* colsum = reinterpret_cast<const int32_t*>(strip + kpad(K) * NR);
    const int32_t* zp = colsum + NR;
    for (size_t c = 0; c < NR; ++c) {
      ep->col_term[c] = uint32_t(K) * za * uint32_t(zp[c]) - za * uint32_t(colsum[c]);
      ep->zp_neg[c] = 0u - uint32_t(zp[c]);
    }
    ep->dequant = dequant != nullptr;
    const size_t nr = N - s * NR < NR ? N - s * NR : NR;
    strip_dequant<NR>(dequant, s * NR, nr, ep->scale, ep->bias);
    return strip;
  }

  // Rows [0, mr) of a tile of raw sums (row stride NR, column order), finished: the per-element loop has a fixed trip
  // count and vectorizes.
  static void store_tile(size_t mr, const int32_t* tile, size_t nr, const Dot4Epilogue<NR>& ep, const int32_t* rowsum,
                         int32_t* C, size_t ldc) {
    for (size_t r = 0; r < mr; ++r) {
      const uint32_t rs = uint32_t(rowsum[r]);
      int32_t fixed[NR];
      for (size_t c = 0; c < NR; ++c)
        fixed[c] = int32_t(uint32_t(tile[r * NR + c]) + ep.zp_neg[c] * rs + ep.col_term[c]);
      store_row<NR>(fixed, nr, ep.scale, ep.bias, ep.dequant, C + r * ldc);
    }
  }

  static void compute(size_t M, size_t N, size_t K, size_t n0, size_t n1, const void* packed_a, int32_t a_zp,
                      const void* packed_b, int32_t* C, size_t ldc, const GemmU8X8Dequant* dequant) {
    compute_rows(0, M, N, K, n0, n1, packed_a, a_zp, packed_b, C, ldc, dequant);
  }

  // compute for rows [m_begin, M) only (a driver with a bigger tile for the rows before).
  static void compute_rows(size_t m_begin, size_t M, size_t N, size_t K, size_t n0, size_t n1, const void* packed_a,
                           int32_t a_zp, const void* packed_b, int32_t* C, size_t ldc, const GemmU8X8Dequant* dequant) {
    const size_t kp = kpad(K);
    const uint8_t* a = static_cast<const uint8_t*>(packed_a);
    const int32_t* rowsum = row_sums(M, K, packed_a);
    alignas(64) int32_t tile[MR * NR];
    Dot4Epilogue<NR> ep;
    for (size_t s = n0 / NR; s * NR < n1 && m_begin < M; ++s) {
      const uint8_t* strip = strip_epilogue(N, K, s, packed_b, a_zp, dequant, &ep);
      const size_t nr = N - s * NR < NR ? N - s * NR : NR;
      for (size_t m0 = m_begin; m0 < M; m0 += MR) {
        const size_t mr = M - m0 < MR ? M - m0 : MR;
        const uint8_t* rows[MR];
        tile_rows<uint8_t, MR>(a, kp, m0, mr, rows);
        if constexpr (StoresRows<Micro>::value) {
          if (nr == NR) {
            Micro::store_rows(mr, rows, kp / 4, reinterpret_cast<const int8_t*>(strip), ep, rowsum + m0,
                              C + m0 * ldc + s * NR, ldc);
            continue;
          }
        }
        Micro::run(mr, rows, kp / 4, reinterpret_cast<const int8_t*>(strip), tile);
        store_tile(mr, tile, nr, ep, rowsum + m0, C + m0 * ldc + s * NR, ldc);
      }
    }
  }
};

// ---- int16 driver: Micro::run(mr, rows, kgroups, strip, tile) computes exact tile sums; a Micro with
// store_rows(mr, rows, kgroups, strip, StripDequant, C, ldc) writes a full strip's finished rows to C itself.
// Packed A: [M][kpad] int16 of (a - a_zp). Packed B: per strip [kpad/KG][NR][KG] int16 of (b - zb).
// The portable strip packer; an ISA file may pass its own with the same run() to I16Gemm.
struct GenericStripI16 {
  template <size_t NR, size_t KG>
  static void run(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed, const int32_t* b_zp,
                  int16_t* out) {
    pack_strip_i16<NR, KG>(K, nr, B, ldb, n0, b_signed, b_zp, out);
  }
};

template <size_t MR, size_t NR, size_t KG, typename Micro, typename StripPacker = GenericStripI16>
struct I16Gemm {
  static size_t kpad(size_t K) { return round_up(K, KG); }
  static size_t a_bytes(size_t M, size_t K) { return M * kpad(K) * sizeof(int16_t); }
  static size_t strip_bytes(size_t K) { return kpad(K) * NR * sizeof(int16_t); }
  static size_t b_bytes(size_t K, size_t N) { return round_up(N, NR) / NR * strip_bytes(K); }

  static void pack_a(size_t M, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, void* packed_a) {
    prep_a_i16(M, K, A, lda, a_zp, kpad(K), static_cast<int16_t*>(packed_a));
  }

  static void pack_b(size_t K, size_t N, size_t n0, size_t n1, const void* B, size_t ldb, bool b_signed,
                     const int32_t* b_zp, void* packed_b) {
    for (size_t s = n0 / NR; s * NR < n1; ++s) {
      const size_t nr = N - s * NR < NR ? N - s * NR : NR;
      StripPacker::template run<NR, KG>(
          K, nr, B, ldb, s * NR, b_signed, b_zp,
          reinterpret_cast<int16_t*>(static_cast<uint8_t*>(packed_b) + s * strip_bytes(K)));
    }
  }

  static void compute(size_t M, size_t N, size_t K, size_t n0, size_t n1, const void* packed_a, int32_t,
                      const void* packed_b, int32_t* C, size_t ldc, const GemmU8X8Dequant* dequant) {
    const size_t kp = kpad(K);
    const int16_t* a = static_cast<const int16_t*>(packed_a);
    alignas(64) int32_t tile[MR * NR];
    StripDequant<NR> ep;
    ep.dequant = dequant != nullptr;
    for (size_t s = n0 / NR; s * NR < n1; ++s) {
      const int16_t* strip =
          reinterpret_cast<const int16_t*>(static_cast<const uint8_t*>(packed_b) + s * strip_bytes(K));
      const size_t nr = N - s * NR < NR ? N - s * NR : NR;
      strip_dequant<NR>(dequant, s * NR, nr, ep.scale, ep.bias);
      for (size_t m0 = 0; m0 < M; m0 += MR) {
        const size_t mr = M - m0 < MR ? M - m0 : MR;
        const int16_t* rows[MR];
        tile_rows<int16_t, MR>(a, kp, m0, mr, rows);
        if constexpr (StoresRows<Micro>::value) {
          if (nr == NR) {
            Micro::store_rows(mr, rows, kp / KG, strip, ep, C + m0 * ldc + s * NR, ldc);
            continue;
          }
        }
        Micro::run(mr, rows, kp / KG, strip, tile);
        for (size_t r = 0; r < mr; ++r)
          store_row<NR>(tile + r * NR, nr, ep.scale, ep.bias, ep.dequant, C + (m0 + r) * ldc + s * NR);
      }
    }
  }
};

// Few rows (a decode step): packing B would cost more than the product, so stream B's rows once.
// sum_k (a - za)(b - zb) = sum_k (a - za) b - zb * sum_k (a - za); partial sums stay within
// 255 * 255 * K < 2^31 (K <= kGemmU8X8MaxK), so int32 never overflows. Plain loops over n with int32
// widening: the compiler vectorizes them for the ISA the including file is built for.

template <typename BElem>
void gemm_direct_typed(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const BElem* B,
                       size_t ldb, const int32_t* b_zp, int32_t* C, size_t ldc) {
  for (size_t m = 0; m < M; ++m) {
    int32_t* c = C + m * ldc;
    const uint8_t* a = A + m * lda;
    for (size_t n = 0; n < N; ++n) c[n] = 0;
    int32_t rowsum = 0;
    size_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const int32_t a0 = int32_t(a[k]) - a_zp, a1 = int32_t(a[k + 1]) - a_zp;
      const int32_t a2 = int32_t(a[k + 2]) - a_zp, a3 = int32_t(a[k + 3]) - a_zp;
      rowsum += a0 + a1 + a2 + a3;
      const BElem* b0 = B + k * ldb;
      const BElem* b1 = b0 + ldb;
      const BElem* b2 = b1 + ldb;
      const BElem* b3 = b2 + ldb;
      for (size_t n = 0; n < N; ++n)
        c[n] += a0 * int32_t(b0[n]) + a1 * int32_t(b1[n]) + a2 * int32_t(b2[n]) + a3 * int32_t(b3[n]);
    }
    for (; k < K; ++k) {
      const int32_t a0 = int32_t(a[k]) - a_zp;
      rowsum += a0;
      const BElem* b0 = B + k * ldb;
      for (size_t n = 0; n < N; ++n) c[n] += a0 * int32_t(b0[n]);
    }
    for (size_t n = 0; n < N; ++n) c[n] -= b_zp[n] * rowsum;
  }
}

// The one-shot gemm and the packed entry points of a driver (Dot4Gemm or I16Gemm); the one-shot form
// is the direct loop for a few rows, else the packed form run over the whole matrix.
// The portable few-rows loop; an ISA file may pass its own Direct with the same run() to GemmEntry.
struct GenericDirect {
  static void run(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B, size_t ldb,
                  bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc) {
    if (b_signed)
      gemm_direct_typed(M, N, K, A, lda, a_zp, static_cast<const int8_t*>(B), ldb, b_zp, C, ldc);
    else
      gemm_direct_typed(M, N, K, A, lda, a_zp, static_cast<const uint8_t*>(B), ldb, b_zp, C, ldc);
  }
};

template <typename Driver, typename Direct = GenericDirect>
struct GemmEntry {
  static size_t workspace(size_t M, size_t N, size_t K) {
    return round_up(Driver::a_bytes(M, K), 64) + Driver::b_bytes(K, N) + 64;
  }
  static void gemm(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B,
                   size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc, void* workspace) {
    if (M <= kGemmDirectMaxRows) {
      Direct::run(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc);
      return;
    }
    uint8_t* base = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(workspace), 64));
    uint8_t* packed_b = base + round_up(Driver::a_bytes(M, K), 64);
    Driver::pack_a(M, K, A, lda, a_zp, base);
    Driver::pack_b(K, N, 0, N, B, ldb, b_signed, b_zp, packed_b);
    Driver::compute(M, N, K, 0, N, base, a_zp, packed_b, C, ldc, nullptr);
  }
  static constexpr GemmU8X8Kernels kernels(const char* variant, size_t column_granule) {
    return GemmU8X8Kernels{gemm,           workspace,       variant,          column_granule,
                           Driver::a_bytes, Driver::b_bytes, Driver::pack_a, Driver::pack_b,
                           Driver::compute};
  }
};

}  // namespace
}  // namespace attnkit
