// attnkit: 4-lane QK loops for the NEON and wasm128 files over Vec128 (softmax/simd128_vec.h), and what the SV's
// (sv_gemm/simd128_sv_impl.h) share with them. H is a multiple of 8, so every row is walked in 8-element steps with
// no tails: direct QK blocks 4 query rows x 4 keys (each K row converted once); packed QK uses the register tile.
#pragma once
#include <algorithm>
#include <type_traits>
#include <vector>

#include "qk_gemm/limb_query.h"
#include "qk_gemm/qk_gemm.h"
#include "sv_gemm/sv_gemm.h"
#include "unroll.h"

namespace attnkit {
namespace {

// A decode block streams from DRAM, and wasm on Zen 5 read it there at half the rate when two adjacent rows were
// walked side by side (key pairs, as in the tiles below and in sv128_stream_keys): each load then jumps from one
// row's end to the row after next, and the hardware prefetchers fell behind; volatile loads 8 KB ahead (wasm has no
// prefetch) only partly made up for it. Where T::kDecodeKeyByKey, rows are walked one after the other, so every
// load's stride stays constant:
// - the direct QK pairs key j with key j + N/2: two streams of whole rows sharing the query loads;
// - the streamed SV goes one key at a time, fp32 only (sv_key_by_key).
// Kernels, 2 query rows x 512 keys at H=128, fp32: from DRAM QK 20-27 -> 8.1-8.5 us and SV 13-15 -> 9-9.4 us (a
// plain SIMD128 sum 6-7); from L2 QK 8.4 -> 6.0 and SV 6.8 -> 8.1. Decode in place T=4096: bf16 1.96-1.99 ->
// 1.89-1.90 ms and f16 3.66-3.85 -> 3.65-3.78 with the QK alone. Each score and each output keeps its chain of
// multiply-adds, so the bits are those of the tiles.
// The other dtypes' SV is bound by its conversions, and key by key cost it the shared output loads and stores
// (in place T=4096, bf16 2.49 -> 2.72 ms, int8 1.45 -> 1.51).
template <class T, class E>
constexpr bool sv_key_by_key() {
  return T::kDecodeKeyByKey && std::is_same_v<E, F32>;
}

// Keys [R0, R0 + 2) of a tile read together, 8 elements at a time with one accumulator per (row, key), then the
// next pair: the shape of qk_key_pairs in x86_gemm_impl.h. Against split (lo/hi) accumulators, wasm decode at T=512
// got 1.26x faster (T=4096 unchanged).
template <class T, class E, int MB, int R, int R0>
inline void qk128_key_pairs(size_t H, const float* const* q, const uint8_t* K, size_t ldk,
                            typename T::V (&acc)[MB][R]) {
  using V = typename T::V;
  constexpr int R1 = R0 + 2 < R ? R0 + 2 : R;
  for (size_t d = 0; d < H; d += 8)
    ATTNKIT_UNROLL for (int r = R0; r < R1; ++r) {
      V lo, hi;
      T::load8(E{}, K + r * ldk, d, lo, hi);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
        acc[i][r] = T::mac(T::load(q[i] + d + 4), hi, T::mac(T::load(q[i] + d), lo, acc[i][r]));
    }
  if constexpr (R1 < R) qk128_key_pairs<T, E, MB, R, R1>(H, q, K, ldk, acc);
}

// *out[k] = alpha * the lane sum of acc[k], k < n, four sums at a time (T::sums4 keeps T::hsum's bits).
template <class T, int n>
inline void qk128_store_scores(const typename T::V* acc, float alpha, float* const* out) {
  using V = typename T::V;
  ATTNKIT_UNROLL for (int g = 0; g < n; g += 4) {
    V v[4];
    ATTNKIT_UNROLL for (int k = 0; k < 4; ++k) v[k] = g + k < n ? acc[g + k] : T::zero();
    float s[4];
    T::store(s, T::mul(T::sums4(v), T::set1(alpha)));
    ATTNKIT_UNROLL for (int k = 0; k < 4; ++k)
      if (g + k < n) *out[g + k] = s[k];
  }
}

template <class T, class E, int MB, int R>
inline void qk128_tile(size_t H, const float* const* q, const uint8_t* K, size_t ldk, float alpha,
                       float* const* c) {
  using V = typename T::V;
  V acc[MB][R];
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) acc[i][r] = T::zero();
  qk128_key_pairs<T, E, MB, R, 0>(H, q, K, ldk, acc);
  float* out[MB * R];
  ATTNKIT_UNROLL for (int i = 0; i < MB; ++i)
    ATTNKIT_UNROLL for (int r = 0; r < R; ++r) out[i * R + r] = c[i] + r;
  qk128_store_scores<T, MB * R>(&acc[0][0], alpha, out);
}

template <class T, class E, int MB>
void qk128_rows(size_t N, size_t H, const float* const* q, const uint8_t* K, size_t ldk, float alpha,
                float* const* c_rows) {
  float* c[MB];
  size_t j = 0;
  // A block this large comes from DRAM in a decode step (the stream threshold of sv_gemm.h): two streams (above).
  if (T::kDecodeKeyByKey && N * ldk >= kStreamMinBytes) {
    const size_t half = N / 2;
    for (; j < half; ++j) {
      typename T::V acc[MB][2];
      for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = T::zero();
      qk128_key_pairs<T, E, MB, 2, 0>(H, q, K + j * ldk, half * ldk, acc);
      float* out[2 * MB];
      for (int i = 0; i < MB; ++i) {
        out[2 * i] = c_rows[i] + j;
        out[2 * i + 1] = c_rows[i] + j + half;
      }
      qk128_store_scores<T, 2 * MB>(&acc[0][0], alpha, out);
    }
    j = 2 * half;
  }
  constexpr int R = T::direct_keys_for_rows(MB);
  for (; j + R <= N; j += R) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    qk128_tile<T, E, MB, R>(H, q, K + j * ldk, ldk, alpha, c);
  }
  for (; j < N; ++j) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    qk128_tile<T, E, MB, 1>(H, q, K + j * ldk, ldk, alpha, c);
  }
}

template <class T, class E>
void qk128_direct(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                  float alpha, float* C, size_t ldc) {
  const uint8_t* base = static_cast<const uint8_t*>(K);
  constexpr size_t kRows = T::template direct_max_rows<E>();
  for (size_t i0 = 0; i0 < M; i0 += kRows) {
    const size_t mb = std::min(kRows, M - i0);
    const float* q[4];
    float* c[4];
    for (size_t i = 0; i < mb; ++i) {
      q[i] = Q + (i0 + i) * ldq;
      c[i] = C + (i0 + i) * ldc;
    }
    switch (mb) {
      case 1: qk128_rows<T, E, 1>(N, H, q, base, ldk, alpha, c); break;
      case 2: qk128_rows<T, E, 2>(N, H, q, base, ldk, alpha, c); break;
      case 3: qk128_rows<T, E, 3>(N, H, q, base, ldk, alpha, c); break;
      default: qk128_rows<T, E, 4>(N, H, q, base, ldk, alpha, c); break;
    }
  }
}

// The integer limb QK tile of limb_query.h (wasm128: i32x4.dot_i16x8 beats its fp32 path, which lacks
// FMA; NEON's smlal would not, and its sdot takes byte digits in neon_dotprod.cc): each K row widened to
// int16 once (8 lanes) for both limbs of every query row; the int32 lanes are summed per key.
template <class T>
struct Simd128Limbs {
  using Vi = typename T::Vi;
  // Two rows per pass over K: 4 rows' 16 accumulators spilled. 4 rows x 512 int8 keys, H=128: 27.7-29.3 us in one
  // pass, 17.4-18.3 in two passes of 2 rows.
  static constexpr int kMaxRows = 2;
  static constexpr size_t kStep = 8;
  // Compute-bound in wasm (from DRAM within 10-25% of from L2): touching lines ahead did not help.
  static size_t prefetch_rows(size_t, size_t) { return 0; }
  static void prefetch(const uint8_t*, size_t) {}
  static constexpr int keys_for_rows(int mb) { return mb == 1 ? 4 : 2; }

  template <int MB, int R, bool S4>
  static void tile(size_t H, const LimbRow* q, const uint8_t* K, size_t ldk, float* const* c) {
    Vi ah[MB][R], al[MB][R];
    for (int i = 0; i < MB; ++i)
      for (int r = 0; r < R; ++r) ah[i][r] = al[i][r] = T::i32_zero();
    if constexpr (S4) {
      const size_t bytes = H / 2;
      const auto nibbles = [&](size_t b, int r, typename T::I16 x) {
        const auto even = T::i16_low_nibbles(x), odd = T::i16_high_nibbles(x);
        for (int i = 0; i < MB; ++i) {
          ah[i][r] = T::i32_dot(T::i32_dot(ah[i][r], even, T::i16_load(q[i].hi + b)), odd,
                                T::i16_load(q[i].hi + q[i].odd + b));
          al[i][r] = T::i32_dot(T::i32_dot(al[i][r], even, T::i16_load(q[i].lo + b)), odd,
                                T::i16_load(q[i].lo + q[i].odd + b));
        }
      };
      // Whole 8-byte loads in the loop; a row's last 4 bytes (H = 8 mod 16) go through a padded copy. With that
      // branch inside the loop, LLVM kept a stack buffer live across it: the loop ran 1.5x slower.
      size_t b = 0;
      for (; b + kStep <= bytes; b += kStep)
        for (int r = 0; r < R; ++r) nibbles(b, r, T::i16_widen_u8(K + r * ldk + b));
      if (b < bytes)
        for (int r = 0; r < R; ++r) nibbles(b, r, T::i16_widen_u8_tail(K + r * ldk + b, bytes - b));
    } else {
      for (size_t d = 0; d < H; d += kStep)
        for (int r = 0; r < R; ++r) {
          const auto k = T::i16_widen_s8(K + r * ldk + d);
          for (int i = 0; i < MB; ++i) {
            ah[i][r] = T::i32_dot(ah[i][r], k, T::i16_load(q[i].hi + d));
            al[i][r] = T::i32_dot(al[i][r], k, T::i16_load(q[i].lo + d));
          }
        }
    }
    if constexpr (MB * R == 4) {
      // The whole tiles (1 row x 4 keys, 2 x 2): four scores at once through combine_limbs' formula lane-wise
      // (the same roundings, so the same bits).
      Vi h[4], l[4];
      for (int s = 0; s < 4; ++s) {
        h[s] = ah[s / R][s % R];
        l[s] = al[s / R][s % R];
      }
      const auto off = [&](int s, bool hi) { return S4 ? 8 * (hi ? q[s / R].sum_hi : q[s / R].sum_lo) : 0; };
      const Vi hs = T::i32_sub(T::i32_sums4(h), T::i32_make(off(0, true), off(1, true), off(2, true), off(3, true)));
      const Vi ls = T::i32_sub(T::i32_sums4(l), T::i32_make(off(0, false), off(1, false), off(2, false), off(3, false)));
      const auto out = T::mul(T::add(T::mul(T::f32_from_i32(hs), T::set1(kLimbBase)), T::f32_from_i32(ls)),
                              T::f32_make(q[0].factor, q[1 / R].factor, q[2 / R].factor, q[3 / R].factor));
      if constexpr (R == 4) {
        T::store(c[0], out);
      } else {
        T::store_low2(c[0], out);
        T::store_high2(c[1], out);
      }
    } else {
      for (int i = 0; i < MB; ++i)
        for (int r = 0; r < R; ++r) c[i][r] = combine_limbs(T::i32_hsum(ah[i][r]), T::i32_hsum(al[i][r]), q[i], S4);
    }
  }
};

template <class T, class E>
void qk128_pack(size_t N, size_t H, const void* K, size_t ldk, float* panels) {
  const uint8_t* base = static_cast<const uint8_t*>(K);
  const size_t panel_count = (N + kQkPanelKeys - 1) / kQkPanelKeys;
  for (size_t p = 0; p < panel_count; ++p) {
    float* panel = panels + p * H * kQkPanelKeys;
    for (size_t t = 0; t < kQkPanelKeys; ++t) {
      const size_t j = p * kQkPanelKeys + t;
      for (size_t d = 0; d < H; d += 8) {
        alignas(16) float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (j < N) {
          typename T::V lo, hi;
          T::load8(E{}, base + j * ldk, d, lo, hi);
          T::store(v, lo);
          T::store(v + 4, hi);
        }
        for (size_t k = 0; k < 8; ++k) panel[(d + k) * kQkPanelKeys + t] = v[k];
      }
    }
  }
}

// Register tiles come from T: kTileRows x kTileVecs 4-lane accumulators (wasm's x64 lowering has only
// 16 vector registers and no FMA, so a product needs a temporary: its tile is 4 x 2; NEON's 32 hold
// 4 x 4). The tiles read their left operand interleaved, element d of row i at [d * kTileRows + i], so
// every broadcast of a step comes from one address plus a constant (V8 recomputed each row's index,
// a third of the loop's instructions).
constexpr size_t kInterleavedMax = 256;  // elements of an interleaved tile row kept on the stack

template <class T>
inline void interleave_rows(int mr, size_t n, const float* src, size_t ld, float* dst) {
  for (size_t d = 0; d < n; ++d)
    for (int i = 0; i < mr; ++i) dst[d * T::kTileRows + i] = src[i * ld + d];
}

template <class T, int MR>
inline void qk128_packed_tile(size_t H, const float* Qi, const float* panel, float alpha, float* C, size_t ldc,
                              size_t keys) {
  using V = typename T::V;
  constexpr int NV = T::kTileVecs;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = T::zero();
  // Bumped pointers with constant element offsets: LLVM then folds the offsets into the wasm loads.
  const float* qd = Qi;
  const float* bd = panel;
  for (size_t d = 0; d < H; ++d, qd += T::kTileRows, bd += kQkPanelKeys) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = T::load(bd + 4 * v);
    for (int i = 0; i < MR; ++i) {
      const V a = T::set1(qd[i]);
      for (int v = 0; v < NV; ++v) acc[i][v] = T::mac(a, b[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    alignas(16) float out[4 * NV];
    for (int v = 0; v < NV; ++v) T::store(out + 4 * v, T::mul(acc[i][v], T::set1(alpha)));
    for (size_t t = 0; t < keys; ++t) C[i * ldc + t] = out[t];
  }
}

template <class T, int MR = T::kTileRows>
void qk128_packed_rows(int mr, size_t H, const float* Qi, const float* panel, float alpha, float* C, size_t ldc,
                       size_t keys) {
  if constexpr (MR >= 1) {
    if (mr == MR) return qk128_packed_tile<T, MR>(H, Qi, panel, alpha, C, ldc, keys);
    qk128_packed_rows<T, MR - 1>(mr, H, Qi, panel, alpha, C, ldc, keys);
  }
}

template <class T>
void qk128_packed(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const float* panels,
                  float alpha, float* C, size_t ldc) {
  constexpr size_t kKeys = 4 * T::kTileVecs;  // divides the 16-key panel
  alignas(16) float stack_rows[kInterleavedMax * T::kTileRows];
  std::vector<float> heap_rows;  // head sizes above kInterleavedMax
  if (H > kInterleavedMax) heap_rows.resize(H * T::kTileRows);
  float* qi = heap_rows.empty() ? stack_rows : heap_rows.data();
  for (size_t i0 = 0; i0 < M; i0 += T::kTileRows) {
    const int mr = static_cast<int>(std::min<size_t>(T::kTileRows, M - i0));
    interleave_rows<T>(mr, H, Q + i0 * ldq, ldq, qi);
    for (size_t j = 0; j < N; j += kKeys) {
      const float* panel = panels + (j / kQkPanelKeys) * H * kQkPanelKeys + j % kQkPanelKeys;
      qk128_packed_rows<T>(mr, H, qi, panel, alpha, C + i0 * ldc + j, ldc, std::min(kKeys, N - j));
    }
  }
}

}  // namespace
}  // namespace attnkit
