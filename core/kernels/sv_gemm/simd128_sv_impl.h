// attnkit: 4-lane SV loops for the NEON and wasm128 files over Vec128 (softmax/simd128_vec.h): register tiles for
// prompts, V streamed in key order for decode steps, int4 as even and odd elements, and the V blocks a prompt widens
// once. The decode walk and the interleaved probabilities are shared with the QK loops (qk_gemm/simd128_gemm_impl.h).
#pragma once
#include <algorithm>
#include <type_traits>

#include "qk_gemm/simd128_gemm_impl.h"
#include "sv_gemm/sv_gemm.h"
#include "unroll.h"

namespace attnkit {
namespace {

// The SV sums in the units of T::sv_load8 (values times T::sv_scale, a power of two), and the outputs are scaled in
// and out of them exactly (|O| stays far below 2^104: |v| <= 128, p <= 1). Every product and sum then rounds as
// with the values themselves, so the bits are theirs, for probabilities of at least 2^-126: the softmax's exp gives
// 0 below that, and only a normalized probability can be smaller, where a product may round once more (2^-149).
template <class T, class E>
typename T::V sv_units(typename T::V x, bool into) {
  constexpr float s = T::sv_scale(E{});
  if constexpr (s == 1.0f) return x;
  else return T::mul(x, T::set1(into ? s : 1.0f / s));
}
template <class T, class E>
void sv_rows_units(int rows, size_t H, float* O, size_t ldo, bool into) {
  if constexpr (T::sv_scale(E{}) != 1.0f)
    for (int i = 0; i < rows; ++i)
      for (size_t d = 0; d < H; d += 4) T::store(O + i * ldo + d, sv_units<T, E>(T::load(O + i * ldo + d), into));
}

// SV: MB rows x (CB x 8) columns over keys [0, N) of interleaved probabilities Pi; each V row chunk
// converted once for all MB rows.
template <class T, class E, int MB, int CB>
inline void sv128_tile(size_t N, const float* Pi, const uint8_t* Vc, size_t ldv, size_t d0, float* O, size_t ldo,
                       bool accumulate) {
  using V = typename T::V;
  V acc[MB][2 * CB];
  for (int i = 0; i < MB; ++i)
    for (int c = 0; c < 2 * CB; ++c)
      acc[i][c] = accumulate ? sv_units<T, E>(T::load(O + i * ldo + d0 + 4 * c), true) : T::zero();
  const float* pj = Pi;
  const uint8_t* vj = Vc;
  for (size_t j = 0; j < N; ++j, pj += T::kTileRows, vj += ldv) {
    V p[MB];
    for (int i = 0; i < MB; ++i) p[i] = T::set1(pj[i]);
    for (int c = 0; c < CB; ++c) {
      V lo, hi;
      T::sv_load8(E{}, vj, d0 + 8 * c, lo, hi);
      for (int i = 0; i < MB; ++i) {
        acc[i][2 * c] = T::mac(p[i], lo, acc[i][2 * c]);
        acc[i][2 * c + 1] = T::mac(p[i], hi, acc[i][2 * c + 1]);
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int c = 0; c < 2 * CB; ++c) T::store(O + i * ldo + d0 + 4 * c, sv_units<T, E>(acc[i][c], false));
}

// int4, 16 columns of MB rows: two passes over the keys, the first over the low nibbles of 8 bytes per row (the
// even elements), the second over the high ones (the odd elements), each converted by T::nibbles8. A pass holds
// 2 accumulators per row; the outputs are interleaved once, at the end. Every output is the same mac chain over the
// keys as in sv128_tile, so the bits are the same. wasm, 2048 keys, H=128: 4 rows 109-124 -> 86-91 us, 2 rows 50-52
// -> 48-50 (6 SIMD128 instructions convert 8 values where load8 takes 9); 32 columns a pass spilled (2 rows 50-80).
template <class T, int MB>
inline void sv128_s4_tile16(size_t N, const float* Pi, const uint8_t* V, size_t ldv, size_t d0, float* O, size_t ldo,
                            bool accumulate) {
  using Vec = typename T::V;
  Vec sums[2][MB][2];  // [even, odd][row][elements 0-7, 8-15 of that parity]
  for (int half = 0; half < 2; ++half) {
    Vec acc[MB][2];
    for (int i = 0; i < MB; ++i)
      for (int h = 0; h < 2; ++h) {
        Vec e, o;
        if (accumulate) T::deinterleave(T::load(O + i * ldo + d0 + 8 * h), T::load(O + i * ldo + d0 + 8 * h + 4), e, o);
        else e = o = T::zero();
        acc[i][h] = half ? o : e;
      }
    const float* pj = Pi;
    const uint8_t* vj = V + d0 / 2;
    for (size_t j = 0; j < N; ++j, pj += T::kTileRows, vj += ldv) {
      Vec x[2];
      T::nibbles8(vj, half == 1, x);
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
        const Vec p = T::set1(pj[i]);
        acc[i][0] = T::mac(p, x[0], acc[i][0]);
        acc[i][1] = T::mac(p, x[1], acc[i][1]);
      }
    }
    for (int i = 0; i < MB; ++i)
      for (int h = 0; h < 2; ++h) sums[half][i][h] = acc[i][h];
  }
  for (int i = 0; i < MB; ++i)
    for (int h = 0; h < 2; ++h) {
      Vec a, b;
      T::interleave(sums[0][i][h], sums[1][i][h], a, b);
      T::store(O + i * ldo + d0 + 8 * h, a);
      T::store(O + i * ldo + d0 + 8 * h + 4, b);
    }
}

template <class T, class E, int MB>
void sv128_rows(size_t N, size_t H, const float* Pi, const uint8_t* V, size_t ldv, float* O, size_t ldo,
                bool accumulate) {
  if constexpr (std::is_same_v<E, S4>) {
    if (H % 16 == 0) {
      for (size_t d = 0; d < H; d += 16) sv128_s4_tile16<T, MB>(N, Pi, V, ldv, d, O, ldo, accumulate);
      return;
    }
  }
  constexpr int CB = T::kTileVecs / 2;  // 8 columns per step
  size_t d = 0;
  for (; d + 8 * CB <= H; d += 8 * CB) sv128_tile<T, E, MB, CB>(N, Pi, V, ldv, d, O, ldo, accumulate);
  for (; d < H; d += 8) sv128_tile<T, E, MB, 1>(N, Pi, V, ldv, d, O, ldo, accumulate);
}

template <class T, class E, int MB = T::kTileRows>
void sv128_dispatch(int mb, size_t N, size_t H, const float* Pi, const uint8_t* V, size_t ldv, float* O,
                    size_t ldo, bool accumulate) {
  if constexpr (MB >= 1) {
    if (mb == MB) return sv128_rows<T, E, MB>(N, H, Pi, V, ldv, O, ldo, accumulate);
    sv128_dispatch<T, E, MB - 1>(mb, N, H, Pi, V, ldv, O, ldo, accumulate);
  }
}

// A few rows over a long V (a decode step, sv_streams in sv_gemm.h): the register tiles would walk each chunk of V
// once per 8 columns, a slice of every row per pass, a strided pattern that reads from DRAM at about half the rate
// of one forward pass (measured on x86, x86_gemm_impl.h). Instead V rows are read whole, in key order, and the
// output rows are updated in place (they stay in L1). Each output is the same mac chain over the keys as in
// sv128_tile, so the bits are the same. Two keys per output load and store, or, where sv_key_by_key
// (qk_gemm/simd128_gemm_impl.h) says so, one key at a time over 16 columns per step where H allows.
//
// int4 streams too where T::kS4Streams, at any length, 2-4 rows (1 row: sv128_s4_row): the even and the odd
// elements of each 16 columns are converted apart (T::nibbles8) and summed into outputs held as those 8 even then
// 8 odd elements (sv_stream_form), put back in element order at the end; the same chains as sv128_s4_tile16's.
// wasm, H=128, tiles then stream: 512 keys, 2 rows 10.7 -> 9.9 us, 3 rows 14.3 -> 13.3, 4 rows 20.0 -> 16.7; 2048
// keys, 4 rows 82 -> 68; 32 keys, 4 rows 1.22 -> 1.12. Converting by byte shuffles (as sv_load8's int8) was slower
// there: 2 rows 10.5-11.5, 4 rows 17.6-18.6.

// Each 16 columns of `rows` output rows between element order and 8 even then 8 odd elements.
template <class T>
void s4_even_odd_order(int rows, size_t H, float* O, size_t ldo, bool to_even_odd) {
  using Vec = typename T::V;
  for (int i = 0; i < rows; ++i)
    for (float* o = O + i * ldo; o < O + i * ldo + H; o += 16) {
      Vec a, b, c, e;
      if (to_even_odd) {
        T::deinterleave(T::load(o), T::load(o + 4), a, c);
        T::deinterleave(T::load(o + 8), T::load(o + 12), b, e);
      } else {
        T::interleave(T::load(o), T::load(o + 8), a, b);
        T::interleave(T::load(o + 4), T::load(o + 12), c, e);
      }
      T::store(o, a);
      T::store(o + 4, b);
      T::store(o + 8, c);
      T::store(o + 12, e);
    }
}

// Output rows into (and out of) the form the stream sums in: T::sv_scale's units; int4's even and odd elements.
template <class T, class E>
void sv_stream_form(int rows, size_t H, float* O, size_t ldo, bool into) {
  if constexpr (std::is_same_v<E, S4>) s4_even_odd_order<T>(rows, H, O, ldo, into);
  else sv_rows_units<T, E>(rows, H, O, ldo, into);
}

// The values of output columns [d + h, d + h + 8) in the stream's form, from one V row; d steps by 16 for int4,
// whose h = 0 and 8 are then the even and the odd elements.
template <class T, class E>
inline void sv_stream_load8(const uint8_t* row, size_t d, size_t h, typename T::V (&x)[2]) {
  if constexpr (std::is_same_v<E, S4>) T::nibbles8(row + d / 2, h == 8, x);
  else T::sv_load8(E{}, row, d + h, x[0], x[1]);
}

template <class T, class E, int MB, int KG>
void sv128_stream_keys(size_t j, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
                       size_t ldo) {
  using Vec = typename T::V;
  Vec p[MB][KG];
  for (int i = 0; i < MB; ++i)
    for (int u = 0; u < KG; ++u) p[i][u] = T::set1(P[i * ldp + j + u]);
  constexpr size_t kStep = std::is_same_v<E, S4> ? 16 : 8;
  for (size_t d = 0; d < H; d += kStep)
    for (size_t h = 0; h < kStep; h += 8) {
      Vec x[KG][2];
      for (int u = 0; u < KG; ++u) sv_stream_load8<T, E>(V + (j + u) * ldv, d, h, x[u]);
      for (int i = 0; i < MB; ++i) {
        float* o = O + i * ldo + d + h;
        Vec a = T::load(o), b = T::load(o + 4);
        for (int u = 0; u < KG; ++u) {
          a = T::mac(p[i][u], x[u][0], a);
          b = T::mac(p[i][u], x[u][1], b);
        }
        T::store(o, a);
        T::store(o + 4, b);
      }
    }
}

// One key over 8 * C columns per step.
template <class T, class E, int MB, int C>
void sv128_stream_key(size_t j, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
                      size_t ldo) {
  using Vec = typename T::V;
  Vec p[MB];
  for (int i = 0; i < MB; ++i) p[i] = T::set1(P[i * ldp + j]);
  const uint8_t* row = V + j * ldv;
  for (size_t d = 0; d < H; d += 8 * C) {
    Vec v[2 * C];
    for (int c = 0; c < C; ++c) T::sv_load8(E{}, row, d + 8 * c, v[2 * c], v[2 * c + 1]);
    for (int i = 0; i < MB; ++i) {
      float* o = O + i * ldo + d;
      for (int u = 0; u < 2 * C; ++u) T::store(o + 4 * u, T::mac(p[i], v[u], T::load(o + 4 * u)));
    }
  }
}

template <class T, class E, int MB = kSvStreamMaxRows>
void sv128_stream(int mb, size_t N, size_t H, const float* P, size_t ldp, const uint8_t* V, size_t ldv, float* O,
                  size_t ldo, bool accumulate) {
  if constexpr (MB >= 1) {
    if (mb != MB) return sv128_stream<T, E, MB - 1>(mb, N, H, P, ldp, V, ldv, O, ldo, accumulate);
    if (!accumulate)
      for (int i = 0; i < MB; ++i) std::fill(O + i * ldo, O + i * ldo + H, 0.0f);
    else
      sv_stream_form<T, E>(MB, H, O, ldo, true);
    size_t j = 0;
    if constexpr (sv_key_by_key<T, E>()) {
      for (; j < N; ++j) {
        if (H % 16 == 0) sv128_stream_key<T, E, MB, 2>(j, H, P, ldp, V, ldv, O, ldo);
        else sv128_stream_key<T, E, MB, 1>(j, H, P, ldp, V, ldv, O, ldo);
      }
    }
    for (; j + 2 <= N; j += 2) sv128_stream_keys<T, E, MB, 2>(j, H, P, ldp, V, ldv, O, ldo);
    if (j < N) sv128_stream_keys<T, E, MB, 1>(j, H, P, ldp, V, ldv, O, ldo);
    sv_stream_form<T, E>(MB, H, O, ldo, false);
  }
}

// int4 with one query row (a decode step of one query head per KV head): 16 columns per step from 8 bytes of each V
// row, held as even and odd accumulators (the low and high nibbles), so no step unpacks them back into element order;
// the outputs are interleaved once, at the end. Every output is the same mac chain over the keys as in sv128_tile,
// so the bits are the same. wasm, 2048 keys, H=128: 34.6-37.2 -> 25.4-26.4 us. Two rows were no faster (53-55 us
// either way: 8 accumulators and the 4 converted vectors are more than V8 keeps in its 15 registers).
template <class T>
void sv128_s4_row(size_t N, size_t H, const float* P, const uint8_t* V, size_t ldv, float* O, bool accumulate) {
  using Vec = typename T::V;
  for (size_t d0 = 0; d0 < H; d0 += 16) {
    Vec ev[2], od[2];
    for (int h = 0; h < 2; ++h) {
      if (accumulate) T::deinterleave(T::load(O + d0 + 8 * h), T::load(O + d0 + 8 * h + 4), ev[h], od[h]);
      else ev[h] = od[h] = T::zero();
    }
    const uint8_t* vj = V + d0 / 2;
    for (size_t j = 0; j < N; ++j, vj += ldv) {
      Vec e[2], o[2];
      T::nibbles16(vj, e, o);
      const Vec p = T::set1(P[j]);
      for (int h = 0; h < 2; ++h) {
        ev[h] = T::mac(p, e[h], ev[h]);
        od[h] = T::mac(p, o[h], od[h]);
      }
    }
    for (int h = 0; h < 2; ++h) {
      Vec a, b;
      T::interleave(ev[h], od[h], a, b);
      T::store(O + d0 + 8 * h, a);
      T::store(O + d0 + 8 * h + 4, b);
    }
  }
}

template <class T, class E>
void widen128(size_t N, size_t H, const void* V, size_t ldv, float* out) {
  const uint8_t* rows = static_cast<const uint8_t*>(V);
  for (size_t j = 0; j < N; ++j)
    for (size_t d = 0; d < H; d += 8) {
      typename T::V lo, hi;
      T::load8(E{}, rows + j * ldv, d, lo, hi);
      T::store(out + j * H + d, lo);
      T::store(out + j * H + d + 4, hi);
    }
}

// Keys go in chunks (probabilities interleaved on the stack); the output rows carry the sum from one
// chunk to the next, stored and reloaded exactly, so the bits do not depend on the chunking.
// A converted V (f16, bf16, s8, s4) read by several row tiles is converted once per chunk into a small
// fp32 slice on the stack that every row tile then reads: the conversion cost SIMD128 twice the
// multiply-adds of a 4-row tile. Converting is exact, so the bits are those of the fused loop.
template <class T, class E>
void sv128(size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V, size_t ldv, float* O,
           size_t ldo, bool accumulate) {
  if constexpr (!std::is_same_v<E, S4>) {
    if (sv_streams(M, N, ldv) && H % 8 == 0)
      return sv128_stream<T, E>(static_cast<int>(M), N, H, P, ldp, static_cast<const uint8_t*>(V), ldv, O, ldo,
                                accumulate);
  } else if (M == 1 && H % 16 == 0) {
    return sv128_s4_row<T>(N, H, P, static_cast<const uint8_t*>(V), ldv, O, accumulate);
  } else if (T::kS4Streams && M <= kSvStreamMaxRows && H % 16 == 0) {
    return sv128_stream<T, S4>(static_cast<int>(M), N, H, P, ldp, static_cast<const uint8_t*>(V), ldv, O, ldo,
                               accumulate);
  }
  constexpr size_t kSliceFloats = 4096;  // 16 KB: 32 keys of H = 128
  const bool convert = !std::is_same_v<E, F32> && M > static_cast<size_t>(T::kTileRows) && H <= kSliceFloats / 8;
  const size_t chunk = convert ? std::min(kSliceFloats / H, kInterleavedMax) : kInterleavedMax;
  alignas(16) float pi[kInterleavedMax * T::kTileRows];
  alignas(16) float slice[kSliceFloats];
  for (size_t j0 = 0; j0 == 0 || j0 < N; j0 += chunk) {
    const size_t n = std::min(chunk, N - j0);
    const uint8_t* rows = static_cast<const uint8_t*>(V) + j0 * ldv;
    if (convert) widen128<T, E>(n, H, rows, ldv, slice);
    for (size_t i0 = 0; i0 < M; i0 += T::kTileRows) {
      const int mb = static_cast<int>(std::min<size_t>(T::kTileRows, M - i0));
      interleave_rows<T>(mb, n, P + i0 * ldp + j0, ldp, pi);
      float* o = O + i0 * ldo;
      if (convert)
        sv128_dispatch<T, F32>(mb, n, H, pi, reinterpret_cast<const uint8_t*>(slice), H * sizeof(float), o, ldo,
                               accumulate || j0 > 0);
      else
        sv128_dispatch<T, E>(mb, n, H, pi, rows, ldv, o, ldo, accumulate || j0 > 0);
    }
  }
}

}  // namespace
}  // namespace attnkit
