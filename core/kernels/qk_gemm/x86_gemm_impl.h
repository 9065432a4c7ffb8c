// attnkit: the register-blocked QK and SV loops for x86, written once over an ISA traits type I
// (I::W floats per vector; see the Avx2 / Avx512 structs in avx2.cc / avx512.cc). Direct QK reads each
// K row once for a block of query rows; s4 splits the query into even/odd halves so nibbles need no
// interleaving; SV keeps s4 accumulators de-interleaved and interleaves once per output block.
#pragma once
#include <algorithm>
#include <vector>

#include "qk_gemm/x86_common.h"
#include "sv_gemm/sv_gemm.h"

namespace attnkit {
namespace {

// ---- QK direct ----

// Keys [R0, R1) into one accumulator each, W elements at a time, then the 8-element tail (W = 16 only).
template <class I, class E, int MB, int R, int R0, int R1>
inline void qk_steps(size_t H, const float* const* q, const uint8_t* K, size_t ldk, typename I::V (&acc)[MB][R]) {
  using V = typename I::V;
  size_t d = 0;
  for (; d + I::W <= H; d += I::W)
    ATTNKIT_UNROLL for (int r = R0; r < R1; ++r) {
      const V k = I::load(E{}, K + r * ldk, d);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) acc[i][r] = I::fmadd(I::loadu(q[i] + d), k, acc[i][r]);
    }
  if (d < H)
    ATTNKIT_UNROLL for (int r = R0; r < R1; ++r) {
      const V k = I::load_half(E{}, K + r * ldk, d);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) acc[i][r] = I::fmadd(I::loadu_half(q[i] + d), k, acc[i][r]);
    }
}

// Keys [R0, R0 + 2) of a tile, read together W elements at a time with one accumulator per (row, key), then the next
// pair. ahead (decode blocks only, else null) is the same tile stream_prefetch_rows further on: each pair asks for its
// own rows there, so the requests stay spread out. Both over aligned query rows (AVX512, fp32, H=128, Zen 5): 2 rows
// read 27.7 GB/s from DRAM and 76 from L2 where split chains and one prefetch burst per tile read 25.2 and 53; 4 rows
// 26.5 and 57.5 against 21.9 and 41.3.
template <class I, class E, int MB, int R, int R0>
inline void qk_key_pairs(size_t H, const float* const* q, const uint8_t* K, size_t ldk, const uint8_t* ahead,
                         typename I::V (&acc)[MB][R]) {
  constexpr int R1 = R0 + 2 < R ? R0 + 2 : R;
  if (ahead) prefetch_lines(ahead + R0 * ldk, (R1 - R0) * ldk);
  qk_steps<I, E, MB, R, R0, R1>(H, q, K, ldk, acc);
  if constexpr (R1 < R) qk_key_pairs<I, E, MB, R, R1>(H, q, K, ldk, ahead, acc);
}

// alpha times the lane sums of the tile's MB x R accumulators, into c[i][r]. The reduction tree sums every vector
// the same way whichever of its 8 slots it takes, so the sums are packed 8 to a tree in row-major order: with fewer
// keys than slots, one tree per row left most of them empty (7 rows x 2 keys: 7 trees where 2 hold all 14 sums;
// Qwen2.5-0.5B's decode at H=64 spent half its QK in them).
template <class I, int MB, int R>
__attribute__((always_inline)) inline void store_scores(typename I::V (&acc)[MB][R], float alpha, float* const* c) {
  using V = typename I::V;
  const __m256 a = _mm256_set1_ps(alpha);
  if constexpr (R == 8) {
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) _mm256_storeu_ps(c[i], _mm256_mul_ps(I::reduce8(acc[i]), a));
  } else {
    constexpr int kSums = MB * R;
    ATTNKIT_UNROLL for (int g = 0; g < kSums; g += 8) {
      V pad[8];
      ATTNKIT_UNROLL for (int k = 0; k < 8; ++k) pad[k] = g + k < kSums ? acc[(g + k) / R][(g + k) % R] : I::zero();
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, _mm256_mul_ps(I::reduce8(pad), a));
      ATTNKIT_UNROLL for (int k = 0; k < 8; ++k)
        if (g + k < kSums) c[(g + k) / R][(g + k) % R] = tmp[k];
    }
  }
}

// One block: MB query rows x R keys starting at K; c[i] points at the output of query row i, key 0.
template <class I, class E, int MB, int R>
inline void qk_tile(size_t H, const float* const* q, const uint8_t* K, size_t ldk, const uint8_t* ahead,
                    float alpha, float* const* c) {
  using V = typename I::V;
  V acc[MB][R];
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) acc[i][r] = I::zero();
  if constexpr (std::is_same<E, S8>::value || MB == 1) {
    // All R keys per step: int8 (AVX2 and AVX512 without VNNI) is bound by its conversion, not by memory, and one
    // query row needs every key's chain in flight to cover the FMA latency (key pairs read 4-10% slower there).
    if (ahead) prefetch_lines(ahead, R * ldk);
    qk_steps<I, E, MB, R, 0, R>(H, q, K, ldk, acc);
  } else {
    qk_key_pairs<I, E, MB, R, 0>(H, q, K, ldk, ahead, acc);
  }
  store_scores<I, MB, R>(acc, alpha, c);
}

// s4: q holds, per query row, the even elements then the odd elements, each zero-padded to Hp
// (a multiple of W) so a partial byte load at the row end multiplies zeros. kFull: H/2 is a multiple
// of W, so every byte load is whole (a constant width keeps the accumulators in registers).
template <class I, int MB, int R, bool kFull>
inline void qk_tile_s4(size_t H, size_t Hp, const float* const* q, const uint8_t* K, size_t ldk,
                       float alpha, float* const* c) {
  using V = typename I::V;
  V acc[MB][R];
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = I::zero();
  const size_t bytes = H / 2;
  for (size_t b = 0; b < bytes; b += I::W) {
    const size_t n = kFull ? I::W : std::min(I::W, bytes - b);
    for (int r = 0; r < R; ++r) {
      const auto x = I::nib_bytes(K + r * ldk + b, n);
      const V lo = I::nib_lo(x), hi = I::nib_hi(x);
      for (int i = 0; i < MB; ++i) {
        acc[i][r] = I::fmadd(I::loadu(q[i] + b), lo, acc[i][r]);
        acc[i][r] = I::fmadd(I::loadu(q[i] + Hp + b), hi, acc[i][r]);
      }
    }
  }
  store_scores<I, MB, R>(acc, alpha, c);
}

template <class I, class E, int MB>
void qk_rows(size_t N, size_t H, size_t Hp, const float* const* q, const uint8_t* K, size_t ldk,
             float alpha, float* const* c_rows) {
  constexpr int R = I::keys_for_rows(MB);
  const bool full_bytes = (H / 2) % I::W == 0;
  float* c[MB];
  size_t j = 0;
  const size_t rows_ahead = block_prefetch_rows(N, ldk);
  for (; j + R <= N; j += R) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    const uint8_t* ahead = rows_ahead && j + rows_ahead + R <= N ? K + (j + rows_ahead) * ldk : nullptr;
    if constexpr (std::is_same<E, S4>::value) {
      if (ahead) prefetch_lines(ahead, R * ldk);
      if (full_bytes) qk_tile_s4<I, MB, R, true>(H, Hp, q, K + j * ldk, ldk, alpha, c);
      else qk_tile_s4<I, MB, R, false>(H, Hp, q, K + j * ldk, ldk, alpha, c);
    } else {
      qk_tile<I, E, MB, R>(H, q, K + j * ldk, ldk, ahead, alpha, c);
    }
  }
  for (; j < N; ++j) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    if constexpr (std::is_same<E, S4>::value)
      qk_tile_s4<I, MB, 1, false>(H, Hp, q, K + j * ldk, ldk, alpha, c);
    else
      qk_tile<I, E, MB, 1>(H, q, K + j * ldk, ldk, nullptr, alpha, c);
  }
}

template <class I, class E, int MB>
void qk_rows_dispatch(int mb, size_t N, size_t H, size_t Hp, const float* const* q, const uint8_t* K,
                      size_t ldk, float alpha, float* const* c) {
  if constexpr (MB >= 1) {
    if (mb == MB) return qk_rows<I, E, MB>(N, H, Hp, q, K, ldk, alpha, c);
    qk_rows_dispatch<I, E, MB - 1>(mb, N, H, Hp, q, K, ldk, alpha, c);
  }
}

template <class I, class E>
void qk_direct(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
               float alpha, float* C, size_t ldc) {
  const uint8_t* base = static_cast<const uint8_t*>(K);
  constexpr bool kS4 = std::is_same<E, S4>::value;
  const size_t Hp = (H / 2 + I::W - 1) / I::W * I::W;
  // The query rows are copied to 64-byte aligned rows (s4: split into even and odd halves) that every key reloads:
  // a query at 16 bytes past a line made each zmm load a split load, and 4 rows at H=128 read 12.3 instead of
  // 21.9 GB/s from DRAM (AVX512, Zen 5). Short rows live on the stack, longer ones on the heap.
  const size_t ld = kS4 ? 2 * Hp : (H + 15) / 16 * 16;
  alignas(64) float stack_rows[I::kMaxRows * 512];
  std::vector<float> heap_rows;
  float* rows = stack_rows;
  if (I::kMaxRows * ld > sizeof(stack_rows) / sizeof(float)) {
    heap_rows.resize(I::kMaxRows * ld + 16);
    rows = heap_rows.data() + (64 - reinterpret_cast<uintptr_t>(heap_rows.data()) % 64) % 64 / sizeof(float);
  }
  for (size_t i0 = 0; i0 < M; i0 += I::kMaxRows) {
    const int mb = static_cast<int>(std::min<size_t>(I::kMaxRows, M - i0));
    const float* q[I::kMaxRows];
    float* c[I::kMaxRows];
    for (int i = 0; i < mb; ++i) {
      c[i] = C + (i0 + i) * ldc;
      const float* src = Q + (i0 + i) * ldq;
      float* row = rows + i * ld;
      if (kS4) {
        std::fill(row, row + ld, 0.0f);
        for (size_t k = 0; k < H / 2; ++k) {
          row[k] = src[2 * k];
          row[Hp + k] = src[2 * k + 1];
        }
      } else {
        std::copy(src, src + H, row);
      }
      q[i] = row;
    }
    qk_rows_dispatch<I, E, I::kMaxRows>(mb, N, H, Hp, q, base, ldk, alpha, c);
  }
}

// ---- QK packed: MR query rows x NV vectors of keys per register tile ----

template <class I, int MR, int NV>
inline void qk_packed_tile(size_t H, const float* Q, size_t ldq, const float* panel0, float alpha,
                           float* C, size_t ldc, size_t keys) {
  using V = typename I::V;
  V acc[MR][NV];
  ATTNKIT_UNROLL for (int i = 0; i < MR; ++i)
    ATTNKIT_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] = I::zero();
  // Vector v covers keys [v*W, v*W+W): panel (v*W)/16, offset (v*W)%16 inside it.
  const float* src[NV];
  for (int v = 0; v < NV; ++v)
    src[v] = panel0 + (v * I::W / kQkPanelKeys) * H * kQkPanelKeys + (v * I::W) % kQkPanelKeys;
  for (size_t d = 0; d < H; ++d) {
    V b[NV];
    ATTNKIT_UNROLL for (int v = 0; v < NV; ++v) b[v] = I::loadu(src[v] + d * kQkPanelKeys);
    ATTNKIT_UNROLL for (int i = 0; i < MR; ++i) {
      const V a = I::set1(Q[i * ldq + d]);
      ATTNKIT_UNROLL for (int v = 0; v < NV; ++v) acc[i][v] = I::fmadd(a, b[v], acc[i][v]);
    }
  }
  const V al = I::set1(alpha);
  // Full blocks (all but a row's last) store whole vectors; only the tail needs masked stores.
  if (keys == NV * I::W) {
    ATTNKIT_UNROLL for (int i = 0; i < MR; ++i)
      ATTNKIT_UNROLL for (int v = 0; v < NV; ++v) I::storeu(C + i * ldc + v * I::W, I::mul(acc[i][v], al));
    return;
  }
  ATTNKIT_UNROLL for (int i = 0; i < MR; ++i)
    ATTNKIT_UNROLL for (int v = 0; v < NV; ++v) {
      const size_t first = v * I::W;
      if (first < keys) I::storeu_n(C + i * ldc + first, I::mul(acc[i][v], al), std::min(I::W, keys - first));
    }
}

// A block's last keys: nv = ceil(keys / W) vectors, so no vector reads a panel past the last one.
template <class I, int MR, int NV>
inline void qk_packed_tail(int nv, size_t H, const float* Q, size_t ldq, const float* panel0, float alpha,
                           float* C, size_t ldc, size_t keys) {
  if constexpr (NV >= 1) {
    if (nv == NV) return qk_packed_tile<I, MR, NV>(H, Q, ldq, panel0, alpha, C, ldc, keys);
    qk_packed_tail<I, MR, NV - 1>(nv, H, Q, ldq, panel0, alpha, C, ldc, keys);
  }
}

template <class I, int MR>
void qk_packed_rows(size_t N, size_t H, const float* Q, size_t ldq, const float* panels, float alpha,
                    float* C, size_t ldc) {
  constexpr size_t kBlockKeys = I::kPackedVecs * I::W;
  for (size_t j = 0; j < N; j += kBlockKeys) {
    const size_t keys = std::min(kBlockKeys, N - j);
    const float* panel0 = panels + (j / kQkPanelKeys) * H * kQkPanelKeys;
    if (keys == kBlockKeys)
      qk_packed_tile<I, MR, I::kPackedVecs>(H, Q, ldq, panel0, alpha, C + j, ldc, keys);
    else
      qk_packed_tail<I, MR, I::kPackedVecs>(static_cast<int>((keys + I::W - 1) / I::W), H, Q, ldq, panel0, alpha,
                                            C + j, ldc, keys);
  }
}

template <class I, int MR>
void qk_packed_dispatch(int mr, size_t N, size_t H, const float* Q, size_t ldq, const float* panels,
                        float alpha, float* C, size_t ldc) {
  if constexpr (MR >= 1) {
    if (mr == MR) return qk_packed_rows<I, MR>(N, H, Q, ldq, panels, alpha, C, ldc);
    qk_packed_dispatch<I, MR - 1>(mr, N, H, Q, ldq, panels, alpha, C, ldc);
  }
}

template <class I>
void qk_packed(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const float* panels,
               float alpha, float* C, size_t ldc) {
  for (size_t i0 = 0; i0 < M; i0 += I::kPackedRows) {
    const int mr = static_cast<int>(std::min<size_t>(I::kPackedRows, M - i0));
    qk_packed_dispatch<I, I::kPackedRows>(mr, N, H, Q + i0 * ldq, ldq, panels, alpha, C + i0 * ldc, ldc);
  }
}

// ---- SV: O = beta*O + P*V, MB rows x CB vectors of columns per register tile ----

// rows_ahead (decode streams, else 0): each key asks for the V row that many keys on.
template <class I, class E, int MB, int CB>
inline void sv_tile(size_t N, const float* P, size_t ldp, const uint8_t* V, size_t ldv, size_t d0,
                    float* O, size_t ldo, bool accumulate, size_t rows_ahead = 0) {
  using Vec = typename I::V;
  Vec acc[MB][CB];
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int c = 0; c < CB; ++c)
      acc[i][c] = accumulate ? I::loadu(O + i * ldo + d0 + c * I::W) : I::zero();
  // The V vectors first, then each row's broadcast used at once: holding all MB broadcasts across the
  // column loop needs MB + MB * CB registers, which spilled accumulators (19 of AVX2's 16 at 6 x 2).
  for (size_t j = 0; j < N; ++j) {
    const uint8_t* row = V + j * ldv;
    if (rows_ahead && j + rows_ahead < N) prefetch_lines(row + rows_ahead * ldv, ldv);
    Vec v[CB];
    ATTNKIT_UNROLL for (int c = 0; c < CB; ++c) v[c] = I::load(E{}, row, d0 + c * I::W);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      const Vec p = I::set1(P[i * ldp + j]);
      ATTNKIT_UNROLL for (int c = 0; c < CB; ++c) acc[i][c] = I::fmadd(p, v[c], acc[i][c]);
    }
  }
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int c = 0; c < CB; ++c) I::storeu(O + i * ldo + d0 + c * I::W, acc[i][c]);
}

// An 8-column tail (AVX512 when H % 16 == 8).
template <class I, class E, int MB>
inline void sv_tile_half(size_t N, const float* P, size_t ldp, const uint8_t* V, size_t ldv, size_t d0,
                         float* O, size_t ldo, bool accumulate) {
  using Vec = typename I::V;
  Vec acc[MB];
  for (int i = 0; i < MB; ++i) acc[i] = accumulate ? I::loadu_half(O + i * ldo + d0) : I::zero();
  for (size_t j = 0; j < N; ++j) {
    const Vec v = I::load_half(E{}, V + j * ldv, d0);
    for (int i = 0; i < MB; ++i) acc[i] = I::fmadd(I::set1(P[i * ldp + j]), v, acc[i]);
  }
  for (int i = 0; i < MB; ++i) I::storeu_n(O + i * ldo + d0, acc[i], 8);
}

// s4: CB byte-vectors (2*W columns each) with even/odd accumulators.
// kFull: every byte vector of the tile is whole (a constant load width keeps accumulators in registers).
template <class I, int MB, int CB, bool kFull>
inline void sv_tile_s4(size_t N, const float* P, size_t ldp, const uint8_t* V, size_t ldv, size_t b0,
                       size_t bytes, float* O, size_t ldo, bool accumulate, size_t rows_ahead) {
  using Vec = typename I::V;
  Vec ev[MB][CB], od[MB][CB];
  for (int i = 0; i < MB; ++i)
    for (int c = 0; c < CB; ++c) {
      const size_t b = b0 + c * I::W;
      const size_t n = b < bytes ? std::min(I::W, bytes - b) : 0;
      if (accumulate && n)
        I::deinterleave(O + i * ldo + 2 * b, 2 * n, ev[i][c], od[i][c]);
      else
        ev[i][c] = od[i][c] = I::zero();
    }
  for (size_t j = 0; j < N; ++j) {  // V converted first, broadcasts used at once (as in sv_tile)
    const uint8_t* row = V + j * ldv;
    if (rows_ahead && j + rows_ahead < N) prefetch_lines(row + rows_ahead * ldv, ldv);
    Vec lo[CB], hi[CB];
    for (int c = 0; c < CB; ++c) {
      const size_t b = b0 + c * I::W;
      const auto x = I::nib_bytes(row + b, kFull ? I::W : std::min(I::W, bytes - b));
      if constexpr (MB <= I::kNibbleTableMaxRows) lo[c] = I::nib_lo_table(x);
      else lo[c] = I::nib_lo(x);
      hi[c] = I::nib_hi(x);
    }
    for (int i = 0; i < MB; ++i) {
      const Vec p = I::set1(P[i * ldp + j]);
      for (int c = 0; c < CB; ++c) {
        ev[i][c] = I::fmadd(p, lo[c], ev[i][c]);
        od[i][c] = I::fmadd(p, hi[c], od[i][c]);
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int c = 0; c < CB; ++c) {
      const size_t b = b0 + c * I::W;
      I::interleave_store(O + i * ldo + 2 * b, 2 * std::min(I::W, bytes - b), ev[i][c], od[i][c]);
    }
}

// s4, MB <= I::kNibbleRowMaxRows rows over the 64-byte chunk at b0 of every row (128 columns): one load per row and
// nibble-major accumulators (I::nibbles_by_position), put back in element order once at the end. Every output is the
// same FMA chain over the keys as in sv_tile_s4, so the bits are the same.
template <class I, int MB>
inline void sv_tile_s4_rows(size_t N, const float* P, size_t ldp, const uint8_t* V, size_t ldv, size_t b0, float* O,
                            size_t ldo, bool accumulate, size_t rows_ahead) {
  using Vec = typename I::V;
  Vec acc[MB][8];
  for (int i = 0; i < MB; ++i) {
    if (accumulate) I::nibble_major_load(O + i * ldo + 2 * b0, acc[i]);
    else for (int k = 0; k < 8; ++k) acc[i][k] = I::zero();
  }
  for (size_t j = 0; j < N; ++j) {
    const uint8_t* row = V + j * ldv;
    if (rows_ahead && j + rows_ahead < N) prefetch_lines(row + rows_ahead * ldv, ldv);
    Vec v[8];
    I::nibbles_by_position(row + b0, v);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      const Vec p = I::set1(P[i * ldp + j]);
      ATTNKIT_UNROLL for (int k = 0; k < 8; ++k) acc[i][k] = I::fmadd(p, v[k], acc[i][k]);
    }
  }
  for (int i = 0; i < MB; ++i) I::nibble_major_store(O + i * ldo + 2 * b0, acc[i]);
}

// The whole vectors left after the widest tiles, as one tile of that width (CB - 1 at most): at H = 96 the fp32 and
// int8 tiles of 8 vectors leave 6, and int4's of 4 byte vectors leave 3, which as tiles of one vector each walked
// the keys 6 (3) times with two or one FMA chains per row, too few to cover the FMA latency.
template <class I, class E, int MB, int CB>
void sv_rest(int vecs, size_t N, const float* P, size_t ldp, const uint8_t* V, size_t ldv, size_t d0, size_t bytes,
             float* O, size_t ldo, bool accumulate, size_t rows_ahead) {
  if constexpr (CB >= 1) {
    if (vecs != CB)
      return sv_rest<I, E, MB, CB - 1>(vecs, N, P, ldp, V, ldv, d0, bytes, O, ldo, accumulate, rows_ahead);
    if constexpr (std::is_same<E, S4>::value)
      sv_tile_s4<I, MB, CB, true>(N, P, ldp, V, ldv, d0, bytes, O, ldo, accumulate, rows_ahead);
    else
      sv_tile<I, E, MB, CB>(N, P, ldp, V, ldv, d0, O, ldo, accumulate);
  }
}

template <class I, class E, int MB>
void sv_rows(size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
             size_t ldo, bool accumulate) {
  constexpr int CB = I::sv_vecs_for_rows(MB);
  if constexpr (std::is_same<E, S4>::value) {
    const size_t bytes = H / 2;
    size_t b = 0;
    constexpr int CB4 = CB / 2 > 0 ? CB / 2 : 1;
    // A decode step reads its V block from DRAM in the first column tile (later ones find it in L2): where that tile
    // covers at least half of each row (AVX512 up to 4 rows, AVX2 one row, at H = 128), it asks for whole rows 4 KB
    // ahead, as the streamed SV does. Through DRAM, T=4096: N=16 two threads 181-196 -> 154-177 us; N=32 (two tiles
    // a row) one thread 571-651 -> 535-568. Narrower AVX2 tiles went both ways (4 rows, one thread, 10% slower).
    const size_t ahead = sv_streams(MB, N, ldv) && 2 * CB4 * I::W >= bytes ? stream_prefetch_rows(ldv) : 0;
    if constexpr (MB <= I::kNibbleRowMaxRows)
      for (; b + 64 <= bytes; b += 64)
        sv_tile_s4_rows<I, MB>(N, P, ldp, V, ldv, b, O, ldo, accumulate, b == 0 ? ahead : 0);
    for (; b + CB4 * I::W <= bytes; b += CB4 * I::W)
      sv_tile_s4<I, MB, CB4, true>(N, P, ldp, V, ldv, b, bytes, O, ldo, accumulate, b == 0 ? ahead : 0);
    if (const int rest = static_cast<int>((bytes - b) / I::W); rest > 0) {
      sv_rest<I, E, MB, CB4 - 1>(rest, N, P, ldp, V, ldv, b, bytes, O, ldo, accumulate, b == 0 ? ahead : 0);
      b += rest * I::W;
    }
    if (b < bytes) sv_tile_s4<I, MB, 1, false>(N, P, ldp, V, ldv, b, bytes, O, ldo, accumulate, b == 0 ? ahead : 0);
  } else {
    size_t d = 0;
    for (; d + CB * I::W <= H; d += CB * I::W)
      sv_tile<I, E, MB, CB>(N, P, ldp, V, ldv, d, O, ldo, accumulate);
    if (const int rest = static_cast<int>((H - d) / I::W); rest > 0) {
      sv_rest<I, E, MB, CB - 1>(rest, N, P, ldp, V, ldv, d, 0, O, ldo, accumulate, 0);
      d += rest * I::W;
    }
    if (d < H) sv_tile_half<I, E, MB>(N, P, ldp, V, ldv, d, O, ldo, accumulate);
  }
}

template <class I, class E, int MB>
void sv_rows_dispatch(int mb, size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V,
                      size_t ldv, float* O, size_t ldo, bool accumulate) {
  if constexpr (MB >= 1) {
    if (mb == MB) return sv_rows<I, E, MB>(N, H, P, ldp, V, ldv, O, ldo, accumulate);
    sv_rows_dispatch<I, E, MB - 1>(mb, N, H, P, ldp, V, ldv, O, ldo, accumulate);
  }
}

// A few rows over a long V (a decode step, sv_streams in sv_gemm.h): the column tiles would walk V once per tile,
// each pass reading a slice of every row, and that strided stream nearly halves the DRAM read rate (Zen 3, 4 passes
// over 512-byte rows: 5-6 against 10-12 GB/s). Instead a group of KG V rows is read whole, in key order, and every
// output row is updated in place (it stays in L1) once per group: KG keys per output load and store keep the FMAs,
// not the stores, the bound when V is hot. Each output is the same FMA chain over the keys as in sv_tile, so the
// bits are the same. Same process, 512-key blocks at H=128, 2 rows, V from DRAM: fp32 5.5-6.9 -> 10.2-10.5 GB/s, f16
// 5.3-8.0 -> 10.9-13.6, int8 7.1-7.3 -> 12.1-12.6; from L2 fp32 and f16 gain 10-20%, int8 loses 5%. int4 keeps its
// nibble-interleaved tiles.

template <class I, class E, int MB, int KG>
void sv_stream_keys(size_t j, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
                    size_t ldo) {
  using Vec = typename I::V;
  Vec p[MB][KG];
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int u = 0; u < KG; ++u) p[i][u] = I::set1(P[i * ldp + j + u]);
  for (size_t d = 0; d < H; d += I::W) {
    Vec v[KG];
    ATTNKIT_UNROLL for (int u = 0; u < KG; ++u) v[u] = I::load(E{}, V + (j + u) * ldv, d);
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      float* o = O + i * ldo + d;
      Vec acc = I::loadu(o);
      ATTNKIT_UNROLL for (int u = 0; u < KG; ++u) acc = I::fmadd(p[i][u], v[u], acc);
      I::storeu(o, acc);
    }
  }
}

template <class I, class E, int MB>
void sv_stream(size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O, size_t ldo,
               bool accumulate) {
  constexpr int KG = I::sv_stream_keys(MB);
  if (!accumulate)
    for (int i = 0; i < MB; ++i) std::fill(O + i * ldo, O + i * ldo + H, 0.0f);
  size_t j = 0;
  const size_t rows_ahead = stream_prefetch_rows(ldv);
  for (; j + KG <= N; j += KG) {
    if (j + rows_ahead + KG <= N) prefetch_lines(V + (j + rows_ahead) * ldv, KG * ldv);
    sv_stream_keys<I, E, MB, KG>(j, H, P, ldp, V, ldv, O, ldo);
  }
  for (; j < N; ++j) sv_stream_keys<I, E, MB, 1>(j, H, P, ldp, V, ldv, O, ldo);
}

template <class I, class E, int MB>
void sv_stream_dispatch(int mb, size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv,
                        float* O, size_t ldo, bool accumulate) {
  if constexpr (MB >= 1) {
    if (mb == MB) return sv_stream<I, E, MB>(N, H, P, ldp, V, ldv, O, ldo, accumulate);
    sv_stream_dispatch<I, E, MB - 1>(mb, N, H, P, ldp, V, ldv, O, ldo, accumulate);
  }
}

// A decode step whose rows fit one register tile as wide as the head (AVX512: 1-2 rows at H = 128) keeps the outputs
// in registers over the whole block and reads each V row once, in order: the same FMA chains, so the same bits, without
// the output loads and stores of sv_stream. From L2, 2 rows, 2048 keys: int8 5.50-5.85 -> 4.95-5.15 us (the FMA
// bound is 4.9), fp32 unchanged.
template <class I, class E, int MB>
bool sv_stream_resident(size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
                        size_t ldo, bool accumulate) {
  constexpr int CB = I::sv_vecs_for_rows(MB);
  if (H != CB * I::W) return false;
  sv_tile<I, E, MB, CB>(N, P, ldp, V, ldv, 0, O, ldo, accumulate, stream_prefetch_rows(ldv));
  return true;
}

template <class I, class E>
void sv_gemm_x86(size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V, size_t ldv,
                 float* O, size_t ldo, bool accumulate) {
  if constexpr (!std::is_same<E, S4>::value) {
    const uint8_t* v = static_cast<const uint8_t*>(V);
    if (sv_streams(M, N, ldv)) {
      if (M == 1 && sv_stream_resident<I, E, 1>(N, H, P, ldp, v, ldv, O, ldo, accumulate)) return;
      if (M == 2 && sv_stream_resident<I, E, 2>(N, H, P, ldp, v, ldv, O, ldo, accumulate)) return;
      if (H % I::W == 0)
        return sv_stream_dispatch<I, E, kSvStreamMaxRows>(static_cast<int>(M), N, H, P, ldp, v, ldv, O, ldo,
                                                          accumulate);
    }
  }
  // Row tiles as even as kSvRows allows (7 rows: 4 + 3, not 6 + 1): a tile of one or two rows converts V for them
  // alone, and its few FMA chains leave the pipes half idle. Each row's chain over the keys is the same in any tile.
  const size_t tiles = (M + I::kSvRows - 1) / I::kSvRows;
  for (size_t t = 0, i0 = 0; t < tiles; ++t) {
    const int mb = static_cast<int>(M / tiles + (t < M % tiles ? 1 : 0));
    sv_rows_dispatch<I, E, I::kSvRows>(mb, N, H, P + i0 * ldp, ldp, static_cast<const uint8_t*>(V), ldv,
                                       O + i0 * ldo, ldo, accumulate);
    i0 += mb;
  }
}

}  // namespace
}  // namespace attnkit
