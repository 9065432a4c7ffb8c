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

inline int32_t b_value(const void* B, size_t index, bool b_signed) {
  return b_signed ? int32_t(static_cast<const int8_t*>(B)[index])
                  : int32_t(static_cast<const uint8_t*>(B)[index]);
}

// ---- int8 "dot4" layout (VNNI, NEON sdot): strip [K/4][NR][4] of b' = b (s8) or b - 128 (u8) ----
// The u8 -> s8 shift keeps the product instructions' signed operand in range; the shift moves into the
// zero point (b - zp == b' - zp'), so the correction below is unchanged.
template <size_t NR>
void pack_strip_dot4(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed,
                     const int32_t* b_zp, int8_t* out, int32_t* colsum, int32_t* zp_out) {
  const size_t kg = round_up(K, 4) / 4;
  std::memset(out, 0, kg * NR * 4);
  const int32_t shift = b_signed ? 0 : 128;
  for (size_t c = 0; c < NR; ++c) {
    colsum[c] = 0;
    zp_out[c] = c < nr ? b_zp[n0 + c] - shift : 0;
  }
  for (size_t k = 0; k < K; ++k) {
    int8_t* dst = out + (k / 4) * NR * 4 + (k % 4);
    const size_t row = k * ldb + n0;
    for (size_t c = 0; c < nr; ++c) {
      int32_t v = b_value(B, row + c, b_signed) - shift;
      dst[c * 4] = int8_t(v);
      colsum[c] += v;
    }
  }
}

// A copied with K padded to a multiple of 4 (zeros), and its row sums.
inline void prep_a_u8(size_t M, size_t K, const uint8_t* A, size_t lda, size_t kpad, uint8_t* out,
                      int32_t* rowsum) {
  for (size_t m = 0; m < M; ++m) {
    const uint8_t* src = A + m * lda;
    uint8_t* dst = out + m * kpad;
    std::memcpy(dst, src, K);
    std::memset(dst + K, 0, kpad - K);
    int32_t s = 0;
    for (size_t k = 0; k < K; ++k) s += src[k];
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
template <size_t NR, size_t KG>
void pack_strip_i16(size_t K, size_t nr, const void* B, size_t ldb, size_t n0, bool b_signed,
                    const int32_t* b_zp, int16_t* out) {
  const size_t kg = round_up(K, KG) / KG;
  std::memset(out, 0, kg * NR * KG * sizeof(int16_t));
  for (size_t k = 0; k < K; ++k) {
    int16_t* dst = out + (k / KG) * NR * KG + (k % KG);
    const size_t row = k * ldb + n0;
    for (size_t c = 0; c < nr; ++c) dst[c * KG] = int16_t(b_value(B, row + c, b_signed) - b_zp[n0 + c]);
  }
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
// for MR rows and NR columns.
template <size_t MR, size_t NR, typename Micro>
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
  prep_a_u8(M, K, A, lda, kpad, a, rowsum);
  for (size_t n0 = 0; n0 < N; n0 += NR) {
    const size_t nr = N - n0 < NR ? N - n0 : NR;
    pack_strip_dot4<NR>(K, nr, B, ldb, n0, b_signed, b_zp, strip, colsum, zp);
    for (size_t m0 = 0; m0 < M; m0 += MR) {
      const size_t mr = M - m0 < MR ? M - m0 : MR;
      const uint8_t* rows[MR];
      tile_rows<uint8_t, MR>(a, kpad, m0, mr, rows);
      micro(rows, kpad / 4, strip, tile);
      store_corrected_dot4(mr, nr, tile, NR, rowsum + m0, colsum, zp, a_zp, K, C + m0 * ldc + n0, ldc);
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
