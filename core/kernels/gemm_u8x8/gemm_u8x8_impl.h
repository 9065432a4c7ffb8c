// attnkit gemm_u8x8: packing and tiling shared by the ISA files (included only by them).
// Everything here has internal linkage on purpose: each ISA file compiles it with its own flags, and a
// shared inline symbol could let the linker pick an AVX512 copy for a scalar caller.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gemm_u8x8/gemm_u8x8.h"

namespace attnkit {
namespace {

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// Bump allocator over the caller's workspace, 64-byte aligned slices.
struct WorkspaceCursor {
  uint8_t* p;
  template <typename T>
  T* take(size_t count) {
    uintptr_t a = (reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63);
    T* out = reinterpret_cast<T*>(a);
    p = reinterpret_cast<uint8_t*>(a + count * sizeof(T));
    return out;
  }
};
constexpr size_t kWorkspaceSlack = 64 * 8;

// ---- int8 "dot4" layout (VNNI, NEON sdot): strip [K/4][NR][4] of b' = b (s8) or b - 128 (u8) ----
// The u8 -> s8 shift keeps the product instructions' signed operand in range; the shift moves into the
// zero point (b - zp == b' - zp'), so the correction below is unchanged. b - 128 is b ^ 0x80 in int8 bits.
// Rows are read whole (NR contiguous bytes): the inner loops have fixed trip counts so they vectorize;
// padded rows/columns hold the byte that maps to b' = 0.
template <size_t NR>
void pack_strip_dot4(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed,
                     const int32_t* b_zp, int8_t* out, int32_t* colsum, int32_t* zp_out) {
  const size_t kg = round_up(K, 4) / 4;
  const uint8_t flip = b_signed ? 0 : 0x80;
  const uint8_t* base = static_cast<const uint8_t*>(B) + n0;
  uint8_t pad[4][NR];
  uint8_t* dst = reinterpret_cast<uint8_t*>(out);
  for (size_t g = 0; g < kg; ++g) {
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
    uint8_t* d = dst + g * NR * 4;
    for (size_t c = 0; c < NR; ++c) {
      d[c * 4 + 0] = uint8_t(rows[0][c] ^ flip);
      d[c * 4 + 1] = uint8_t(rows[1][c] ^ flip);
      d[c * 4 + 2] = uint8_t(rows[2][c] ^ flip);
      d[c * 4 + 3] = uint8_t(rows[3][c] ^ flip);
    }
  }
  int32_t sums[NR] = {};
  for (size_t g = 0; g < kg; ++g) {
    const int8_t* d = out + g * NR * 4;
    for (size_t c = 0; c < NR; ++c) sums[c] += int32_t(d[c * 4]) + d[c * 4 + 1] + d[c * 4 + 2] + d[c * 4 + 3];
  }
  const int32_t shift = b_signed ? 0 : 128;
  for (size_t c = 0; c < NR; ++c) {
    colsum[c] = sums[c];
    zp_out[c] = c < nr ? b_zp[n0 + c] - shift : 0;
  }
}

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

// sum (a - za)(b' - zb') = dot(a, b') - zb' * rowsum(a) - za * colsum(b') + K * za * zb', in uint32
// arithmetic: exact modulo 2^32, hence exact when the true value fits int32.
inline void store_corrected_dot4(size_t mr, size_t nr, const int32_t* tile, size_t tile_ld,
                                 const int32_t* rowsum, const int32_t* colsum, const int32_t* zp,
                                 int32_t a_zp, size_t K, int32_t* C, size_t ldc) {
  for (size_t r = 0; r < mr; ++r) {
    for (size_t c = 0; c < nr; ++c) {
      uint32_t v = uint32_t(tile[r * tile_ld + c]) - uint32_t(zp[c]) * uint32_t(rowsum[r]) -
                   uint32_t(a_zp) * uint32_t(colsum[c]) +
                   uint32_t(K) * uint32_t(a_zp) * uint32_t(zp[c]);
      C[r * ldc + c] = int32_t(v);
    }
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
  BElem pad[NR] = {};
  for (size_t g = 0; g < kg; ++g) {
    for (size_t t = 0; t < KG; ++t) {
      const size_t k = g * KG + t;
      int16_t* d = out + g * NR * KG + t;
      if (k < K && nr == NR) {
        const BElem* row = base + k * ldb;
        for (size_t c = 0; c < NR; ++c) d[c * KG] = int16_t(int16_t(row[c]) - zpr[c]);
      } else if (k < K) {
        std::memcpy(pad, base + k * ldb, nr * sizeof(BElem));
        for (size_t c = 0; c < NR; ++c) d[c * KG] = c < nr ? int16_t(int16_t(pad[c]) - zpr[c]) : int16_t(0);
      } else {
        for (size_t c = 0; c < NR; ++c) d[c * KG] = 0;
      }
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

inline void store_tile(size_t mr, size_t nr, const int32_t* tile, size_t tile_ld, int32_t* C,
                       size_t ldc) {
  for (size_t r = 0; r < mr; ++r) std::memcpy(C + r * ldc, tile + r * tile_ld, nr * sizeof(int32_t));
}

// Row pointers for an MR-row micro-tile; rows past the end repeat row 0 (results discarded), so the
// micro-kernels never branch on the row count.
template <typename T, size_t MR>
void tile_rows(const T* A, size_t lda, size_t m0, size_t mr, const T* rows[MR]) {
  for (size_t r = 0; r < MR; ++r) rows[r] = A + (m0 + (r < mr ? r : 0)) * lda;
}

// The driver for the dot4 layout. Micro(rows, kgroups, strip, tile) computes tile[r][c] = dot(a_r, b'_c)
// for MR rows and NR columns (a_r as u8, or as s8 = a - 128 with kSignedA).
template <size_t MR, size_t NR, bool kSignedA, typename Micro>
void gemm_dot4(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B,
               size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc, void* workspace,
               Micro micro) {
  const size_t kpad = round_up(K, 4);
  WorkspaceCursor ws{static_cast<uint8_t*>(workspace)};
  uint8_t* a = ws.take<uint8_t>(M * kpad);
  int32_t* rowsum = ws.take<int32_t>(M);
  int8_t* strip = ws.take<int8_t>(kpad * NR);
  int32_t* colsum = ws.take<int32_t>(NR);
  int32_t* zp = ws.take<int32_t>(NR);
  alignas(64) int32_t tile[MR * NR];
  prep_a_u8<kSignedA>(M, K, A, lda, kpad, a, rowsum);
  const int32_t a_zp_eff = kSignedA ? a_zp - 128 : a_zp;
  for (size_t n0 = 0; n0 < N; n0 += NR) {
    const size_t nr = N - n0 < NR ? N - n0 : NR;
    pack_strip_dot4<NR>(K, nr, B, ldb, n0, b_signed, b_zp, strip, colsum, zp);
    for (size_t m0 = 0; m0 < M; m0 += MR) {
      const size_t mr = M - m0 < MR ? M - m0 : MR;
      const uint8_t* rows[MR];
      tile_rows<uint8_t, MR>(a, kpad, m0, mr, rows);
      micro(rows, kpad / 4, strip, tile);
      store_corrected_dot4(mr, nr, tile, NR, rowsum + m0, colsum, zp, a_zp_eff, K, C + m0 * ldc + n0, ldc);
    }
  }
}

inline size_t workspace_dot4(size_t M, size_t K, size_t NR) {
  const size_t kpad = round_up(K, 4);
  return M * kpad + M * 4 + kpad * NR + NR * 8 + kWorkspaceSlack;
}

// The driver for the int16 layout: Micro(rows, kgroups, strip, tile) computes exact tile sums.
template <size_t MR, size_t NR, size_t KG, typename Micro>
void gemm_i16(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B,
              size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc, void* workspace,
              Micro micro) {
  const size_t kpad = round_up(K, KG);
  WorkspaceCursor ws{static_cast<uint8_t*>(workspace)};
  int16_t* a = ws.take<int16_t>(M * kpad);
  int16_t* strip = ws.take<int16_t>(kpad * NR);
  alignas(64) int32_t tile[MR * NR];
  prep_a_i16(M, K, A, lda, a_zp, kpad, a);
  for (size_t n0 = 0; n0 < N; n0 += NR) {
    const size_t nr = N - n0 < NR ? N - n0 : NR;
    pack_strip_i16<NR, KG>(K, nr, B, ldb, n0, b_signed, b_zp, strip);
    for (size_t m0 = 0; m0 < M; m0 += MR) {
      const size_t mr = M - m0 < MR ? M - m0 : MR;
      const int16_t* rows[MR];
      tile_rows<int16_t, MR>(a, kpad, m0, mr, rows);
      micro(rows, kpad / KG, strip, tile);
      store_tile(mr, nr, tile, NR, C + m0 * ldc + n0, ldc);
    }
  }
}

inline size_t workspace_i16(size_t M, size_t K, size_t NR, size_t KG) {
  const size_t kpad = round_up(K, KG);
  return (M * kpad + kpad * NR) * sizeof(int16_t) + kWorkspaceSlack;
}

}  // namespace
}  // namespace attnkit
