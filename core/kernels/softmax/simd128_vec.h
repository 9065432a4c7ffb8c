// attnkit: 4-lane float-vector traits (Vec128) for the NEON and wasm128 kernel files, through SIMDe
// (native intrinsics on aarch64 / under emcc, emulation on x86). The including file defines
// ATTNKIT_VEC128_NEON or ATTNKIT_VEC128_WASM first. Also the cache-row loaders (8 elements as two
// vectors, exact conversions) used by the 4-wide QK/SV loops.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(ATTNKIT_VEC128_NEON)
#include <simde/arm/neon.h>
#elif defined(ATTNKIT_VEC128_WASM)
#include <simde/wasm/simd128.h>
#else
#error "define ATTNKIT_VEC128_NEON or ATTNKIT_VEC128_WASM before including simd128_vec.h"
#endif

#include "qk_gemm/cache_elem.h"

namespace attnkit {
namespace {

using cache_elem::BF16;
using cache_elem::F16;
using cache_elem::F16Finite;
using cache_elem::F32;
using cache_elem::S4;
using cache_elem::S8;

#if defined(ATTNKIT_VEC128_NEON)
struct Vec128 {
  static constexpr int kTileRows = 4, kTileVecs = 4;  // packed QK / SV register tile (32 registers)
  // Direct QK: keys per tile for mb query rows (mb x 4 accumulators fit the 32 registers).
  static constexpr int direct_keys_for_rows(int) { return 4; }
  template <class E>
  static constexpr int direct_max_rows() { return 4; }  // query rows per direct QK pass over K
  // Decode blocks walk adjacent rows in pairs here (wasm's order, below, is unmeasured on ARM).
  static constexpr bool kDecodeKeyByKey = false;
  // int4 SV of 2-4 rows in register tiles (wasm streams it, below; unmeasured on ARM).
  static constexpr bool kS4Streams = false;
  using V = simde_float32x4_t;
  using Vi = simde_int32x4_t;
  using M = simde_uint32x4_t;
  static constexpr size_t W = 4;
  static V load(const float* p) { return simde_vld1q_f32(p); }
  static void store(float* p, V v) { simde_vst1q_f32(p, v); }
  static V set1(float x) { return simde_vdupq_n_f32(x); }
  static V zero() { return simde_vdupq_n_f32(0.0f); }
  static V add(V a, V b) { return simde_vaddq_f32(a, b); }
  static V sub(V a, V b) { return simde_vsubq_f32(a, b); }
  static V mul(V a, V b) { return simde_vmulq_f32(a, b); }
  // SIMDe 0.7.4 has no vdivq_f32: native on aarch64, IEEE lane divides (same bits) elsewhere.
  static V div(V a, V b) {
#if defined(__aarch64__)
    return vdivq_f32(a, b);
#else
    float x[4], y[4];
    simde_vst1q_f32(x, a);
    simde_vst1q_f32(y, b);
    for (int i = 0; i < 4; ++i) x[i] /= y[i];
    return simde_vld1q_f32(x);
#endif
  }
  static V max(V a, V b) { return simde_vmaxq_f32(a, b); }
  static V min(V a, V b) { return simde_vminq_f32(a, b); }
  static V mac(V a, V b, V acc) { return simde_vfmaq_f32(acc, a, b); }
  static V round_even(V a) { return simde_vrndnq_f32(a); }
  // 16 floats holding integers in [-128, 127] stored as int8 (the conversions are exact).
  static simde_int8x16_t narrow16_s8(V a, V b, V c, V d) {
    const auto i16 = [](V x, V y) {
      return simde_vcombine_s16(simde_vmovn_s32(simde_vcvtq_s32_f32(x)), simde_vmovn_s32(simde_vcvtq_s32_f32(y)));
    };
    return simde_vcombine_s8(simde_vmovn_s16(i16(a, b)), simde_vmovn_s16(i16(c, d)));
  }
  static void store16_s8(int8_t* out, V a, V b, V c, V d) { simde_vst1q_s8(out, narrow16_s8(a, b, c, d)); }
  // 16 floats holding integers in [-8, 7] stored as 8 bytes of nibbles + 8, even element in the low nibble: in each
  // 16-bit lane (even | odd << 8), x | x >> 4 holds even | odd << 4 in its low byte.
  static void store16_s4(uint8_t* out, V a, V b, V c, V d) {
    const simde_uint16x8_t pairs = simde_vreinterpretq_u16_u8(
        simde_vaddq_u8(simde_vreinterpretq_u8_s8(narrow16_s8(a, b, c, d)), simde_vdupq_n_u8(8)));
    simde_vst1_u8(out, simde_vmovn_u16(simde_vorrq_u16(pairs, simde_vshrq_n_u16(pairs, 4))));
  }
  static M ge(V a, V b) { return simde_vcgeq_f32(a, b); }
  static M lt(V a, V b) { return simde_vcltq_f32(a, b); }
  static M not_lt(V a, V b) { return simde_vmvnq_u32(simde_vcltq_f32(a, b)); }  // true for NaN
  static bool any(M m) { return simde_vmaxvq_u32(m) != 0; }
  static M is_nan(V a) { return simde_vmvnq_u32(simde_vceqq_f32(a, a)); }
  static V select(M m, V a, V b) { return simde_vbslq_f32(m, a, b); }
  static V zero_unless(M m, V a) {
    return simde_vreinterpretq_f32_u32(simde_vandq_u32(m, simde_vreinterpretq_u32_f32(a)));
  }
  static V abs(V a) { return simde_vabsq_f32(a); }
  static V copy_sign_of(V mag, V sgn) {
    const simde_uint32x4_t s = simde_vandq_u32(simde_vreinterpretq_u32_f32(sgn), simde_vdupq_n_u32(0x80000000u));
    return simde_vreinterpretq_f32_u32(simde_vorrq_u32(simde_vreinterpretq_u32_f32(mag), s));
  }
  static V pow2_of_int_valued(V n) {
    const Vi e = simde_vshlq_n_s32(simde_vaddq_s32(simde_vcvtq_s32_f32(n), simde_vdupq_n_s32(127)), 23);
    return simde_vreinterpretq_f32_s32(e);
  }
  static V scale_by_pow2(V p, V n) { return mul(p, pow2_of_int_valued(n)); }  // n integer-valued in [-126, 127]
  static float hmax(V v) { return simde_vmaxvq_f32(v); }
#if defined(__aarch64__)
  static float hsum(V v) { return vaddvq_f32(v); }
#else
  // ARM's FADDP sums the lane pairs, then the pair sums; SIMDe's vaddvq_f32 adds the lanes in order, which made
  // x86's NEON scores differ from ARM's in the last bit. This gives ARM's.
  static float hsum(V v) {
    const V pairs = simde_vpaddq_f32(v, v);
    return simde_vgetq_lane_f32(pairs, 0) + simde_vgetq_lane_f32(pairs, 1);
  }
#endif
  // Lane k = hsum(v[k]), with its bits.
  static V sums4(const V v[4]) {
    const float s[4] = {hsum(v[0]), hsum(v[1]), hsum(v[2]), hsum(v[3])};
    return simde_vld1q_f32(s);
  }
  static V bits(Vi v) { return simde_vreinterpretq_f32_s32(v); }

  // 8 cache elements [d, d+8) as lo (first 4) and hi.
  static void load8(F32, const uint8_t* row, size_t d, V& lo, V& hi) {
    const float* p = reinterpret_cast<const float*>(row) + d;
    lo = simde_vld1q_f32(p);
    hi = simde_vld1q_f32(p + 4);
  }
  static void load8(BF16, const uint8_t* row, size_t d, V& lo, V& hi) {
    uint16_t h[8];
    std::memcpy(h, row + 2 * d, 16);
    // bf16 h is the float with bits h << 16: zipped under zeros, each element lands in a lane's high half (one ZIP
    // each; vshll_n_u16(x, 16) is the same, but SIMDe refuses a shift of 16 under clang).
    const simde_uint16x8_t v = simde_vld1q_u16(h), zero = simde_vdupq_n_u16(0);
    lo = simde_vreinterpretq_f32_u16(simde_vzip1q_u16(zero, v));
    hi = simde_vreinterpretq_f32_u16(simde_vzip2q_u16(zero, v));
  }
  // f16 -> f32 exactly: (h & 0x7fff) << 13 times 2^112 covers normals and subnormals; exponent 31
  // (inf / NaN) keeps its payload with an all-ones fp32 exponent, as common/half.h does.
  static V f16x4(simde_uint16x4_t h) {
    const simde_uint32x4_t w = simde_vmovl_u16(h);
    const simde_uint32x4_t mag = simde_vshlq_n_u32(simde_vandq_u32(w, simde_vdupq_n_u32(0x7fff)), 13);
    const V scaled = simde_vmulq_f32(simde_vreinterpretq_f32_u32(mag), simde_vdupq_n_f32(0x1p112f));
    const simde_uint32x4_t special = simde_vceqq_u32(simde_vandq_u32(w, simde_vdupq_n_u32(0x7c00)), simde_vdupq_n_u32(0x7c00));
    const simde_uint32x4_t infnan = simde_vorrq_u32(mag, simde_vdupq_n_u32(0x7f800000));
    const simde_uint32x4_t body = simde_vbslq_u32(special, infnan, simde_vreinterpretq_u32_f32(scaled));
    const simde_uint32x4_t sign = simde_vshlq_n_u32(simde_vandq_u32(w, simde_vdupq_n_u32(0x8000)), 16);
    return simde_vreinterpretq_f32_u32(simde_vorrq_u32(body, sign));
  }
  // Storage conversion (kv_quant's rows): every pattern bit for bit, NaN payloads included.
  static void f16_row8(const uint8_t* row, size_t d, V& lo, V& hi) {
    uint16_t h[8];
    std::memcpy(h, row + 2 * d, 16);
    const simde_uint16x8_t v = simde_vld1q_u16(h);
    lo = f16x4(simde_vget_low_u16(v));
    hi = f16x4(simde_vget_high_u16(v));
  }
  // The QK and SV loaders. On aarch64 FCVTL converts 4 lanes in one instruction (f16x4 takes 10): exact for every
  // number and infinity, a NaN stays a NaN (quieted; the result is NaN either way). Unmeasured on ARM hardware here.
  static void load8(F16, const uint8_t* row, size_t d, V& lo, V& hi) {
#if defined(__aarch64__)
    uint16_t h[8];
    std::memcpy(h, row + 2 * d, 16);
    const float16x8_t v = vreinterpretq_f16_u16(vld1q_u16(h));
    lo = vcvt_f32_f16(vget_low_f16(v));
    hi = vcvt_high_f32_f16(v);
#else
    f16_row8(row, d, lo, hi);
#endif
  }
  // fp32 -> fp16 / bf16 bit patterns, common/half.h's integer rules lane by lane (not the FCVT instruction, whose
  // NaN payloads and SIMDe's emulation of it need not match): the same bits on every target.
  static simde_uint32x4_t f16_bits4(V f) {
    const auto k = [](uint32_t x) { return simde_vdupq_n_u32(x); };
    const simde_uint32x4_t u = simde_vreinterpretq_u32_f32(f);
    const simde_uint32x4_t abs = simde_vandq_u32(u, k(0x7fffffffu));
    const simde_uint32x4_t bias = simde_vaddq_u32(simde_vandq_u32(simde_vshrq_n_u32(abs, 13), k(1)), k(0x0fff));
    const simde_uint32x4_t normal = simde_vshrq_n_u32(simde_vsubq_u32(simde_vaddq_u32(abs, bias), k(0x38000000u)), 13);
    // Below 2^-14 the result is subnormal: adding 0.5 rounds |f| to a multiple of 2^-24, half to even.
    const V half_up = simde_vaddq_f32(simde_vreinterpretq_f32_u32(abs), simde_vdupq_n_f32(0.5f));
    const simde_uint32x4_t tiny = simde_vsubq_u32(simde_vreinterpretq_u32_f32(half_up), k(0x3f000000u));
    simde_uint32x4_t r = simde_vbslq_u32(simde_vcltq_u32(abs, k(0x38800000u)), tiny, normal);
    r = simde_vbslq_u32(simde_vcgeq_u32(abs, k(0x477ff000u)), k(0x7c00), r);
    const simde_uint32x4_t nan = simde_vorrq_u32(simde_vandq_u32(simde_vshrq_n_u32(abs, 13), k(0x3ff)), k(0x7e00));
    r = simde_vbslq_u32(simde_vcgtq_u32(abs, k(0x7f800000u)), nan, r);
    return simde_vorrq_u32(r, simde_vandq_u32(simde_vshrq_n_u32(u, 16), k(0x8000)));
  }
  static simde_uint32x4_t bf16_bits4(V f) {
    const simde_uint32x4_t u = simde_vreinterpretq_u32_f32(f);
    const simde_uint32x4_t high = simde_vshrq_n_u32(u, 16);
    const simde_uint32x4_t bias =
        simde_vaddq_u32(simde_vandq_u32(high, simde_vdupq_n_u32(1)), simde_vdupq_n_u32(0x7fff));
    const simde_uint32x4_t rounded = simde_vshrq_n_u32(simde_vaddq_u32(u, bias), 16);
    return simde_vbslq_u32(is_nan(f), simde_vorrq_u32(high, simde_vdupq_n_u32(0x40)), rounded);
  }
  static void store8_f16(uint16_t* out, V lo, V hi) {
    simde_vst1q_u16(out, simde_vcombine_u16(simde_vmovn_u32(f16_bits4(lo)), simde_vmovn_u32(f16_bits4(hi))));
  }
  static void store8_bf16(uint16_t* out, V lo, V hi) {
    simde_vst1q_u16(out, simde_vcombine_u16(simde_vmovn_u32(bf16_bits4(lo)), simde_vmovn_u32(bf16_bits4(hi))));
  }
  static void widen8(simde_int8x8_t b, V& lo, V& hi) {
    const simde_int16x8_t w = simde_vmovl_s8(b);
    lo = simde_vcvtq_f32_s32(simde_vmovl_s16(simde_vget_low_s16(w)));
    hi = simde_vcvtq_f32_s32(simde_vmovl_s16(simde_vget_high_s16(w)));
  }
  static void load8(S8, const uint8_t* row, size_t d, V& lo, V& hi) {
    int8_t b[8];
    std::memcpy(b, row + d, 8);
    widen8(simde_vld1_s8(b), lo, hi);
  }
  static void load8(S4, const uint8_t* row, size_t d, V& lo, V& hi) {
    uint8_t b[8] = {0};
    std::memcpy(b, row + d / 2, 4);
    const simde_uint8x8_t v = simde_vld1_u8(b);
    const simde_uint8x8_t l = simde_vand_u8(v, simde_vdup_n_u8(0x0f)), h = simde_vshr_n_u8(v, 4);
    const simde_uint8x8_t z = simde_vzip_u8(l, h).val[0];
    widen8(simde_vsub_s8(simde_vreinterpret_s8_u8(z), simde_vdup_n_s8(8)), lo, hi);
  }
  // The SV's loads: the exact values (the wasm traits below scale int8).
  template <class E>
  static constexpr float sv_scale(E) { return 1.0f; }
  template <class E>
  static void sv_load8(E e, const uint8_t* row, size_t d, V& lo, V& hi) { load8(e, row, d, lo, hi); }
  // 8 bytes, 16 nibbles: the even elements (low nibbles) and the odd ones (high nibbles), each minus 8.
  static void nibbles16(const uint8_t* p, V (&even)[2], V (&odd)[2]) {
    uint8_t b[8];
    std::memcpy(b, p, 8);
    const simde_uint8x8_t v = simde_vld1_u8(b);
    const simde_int8x8_t eight = simde_vdup_n_s8(8);
    widen8(simde_vsub_s8(simde_vreinterpret_s8_u8(simde_vand_u8(v, simde_vdup_n_u8(0x0f))), eight), even[0], even[1]);
    widen8(simde_vsub_s8(simde_vreinterpret_s8_u8(simde_vshr_n_u8(v, 4)), eight), odd[0], odd[1]);
  }
  // 8 bytes: their 8 low nibbles (the even elements) or their 8 high ones (the odd elements), each minus 8.
  static void nibbles8(const uint8_t* p, bool high, V (&out)[2]) {
    uint8_t b[8];
    std::memcpy(b, p, 8);
    const simde_uint8x8_t v = simde_vld1_u8(b);
    const simde_uint8x8_t n = high ? simde_vshr_n_u8(v, 4) : simde_vand_u8(v, simde_vdup_n_u8(0x0f));
    widen8(simde_vsub_s8(simde_vreinterpret_s8_u8(n), simde_vdup_n_s8(8)), out[0], out[1]);
  }
  // (e0 e1 e2 e3), (o0 o1 o2 o3) <-> (e0 o0 e1 o1), (e2 o2 e3 o3).
  static void interleave(V e, V o, V& a, V& b) {
    const simde_float32x4x2_t z = simde_vzipq_f32(e, o);
    a = z.val[0];
    b = z.val[1];
  }
  static void deinterleave(V a, V b, V& e, V& o) {
    const simde_float32x4x2_t u = simde_vuzpq_f32(a, b);
    e = u.val[0];
    o = u.val[1];
  }
};
#else
struct Vec128 {
  // Packed QK / SV tile: V8's x64 code allocates 15 vector registers and a product needs a temporary
  // (no FMA), so 8 accumulators; 6 x 2 spilled two of them through memory every step.
  static constexpr int kTileRows = 4, kTileVecs = 2;
  // Direct QK: keys per tile for mb query rows; mb x keys accumulators plus the two K halves, a query vector
  // and a product stay within those 15 registers.
  static constexpr int direct_keys_for_rows(int mb) { return mb <= 2 ? 4 : 2; }
  // Query rows per direct QK pass over K. fp32 at 4 rows (2 keys each) spilled: 4 rows x 512 keys, H=128, 18.5-21.8
  // us in one pass, 14.2-15.3 in two passes of 2 rows (the second reads K from L2); decode N=32, Nk=8, T=4096 in
  // place 2.70 -> 2.58 ms. f16/bf16 convert each K row once per pass and keep 4 rows (bf16 2.98 against 3.21 ms).
  template <class E>
  static constexpr int direct_max_rows() { return std::is_same_v<E, F32> ? 2 : 4; }
  // Decode blocks (from DRAM) are read in whole rows, one after the next (top of simd128_gemm_impl.h).
  static constexpr bool kDecodeKeyByKey = true;
  // int4 SV of 2-4 rows streamed in key order (sv128_stream in sv_gemm/simd128_sv_impl.h), at any length.
  static constexpr bool kS4Streams = true;
  using V = simde_v128_t;
  using Vi = simde_v128_t;
  using M = simde_v128_t;
  static constexpr size_t W = 4;
  static V load(const float* p) { return simde_wasm_v128_load(p); }
  static void store(float* p, V v) { simde_wasm_v128_store(p, v); }
  static V set1(float x) { return simde_wasm_f32x4_splat(x); }
  static V zero() { return simde_wasm_f32x4_splat(0.0f); }
  static V add(V a, V b) { return simde_wasm_f32x4_add(a, b); }
  static V sub(V a, V b) { return simde_wasm_f32x4_sub(a, b); }
  static V mul(V a, V b) { return simde_wasm_f32x4_mul(a, b); }
  static V div(V a, V b) { return simde_wasm_f32x4_div(a, b); }
  static V max(V a, V b) { return simde_wasm_f32x4_pmax(a, b); }
  static V min(V a, V b) { return simde_wasm_f32x4_pmin(a, b); }
  static V mac(V a, V b, V acc) { return simde_wasm_f32x4_add(acc, simde_wasm_f32x4_mul(a, b)); }
  static V round_even(V a) { return simde_wasm_f32x4_nearest(a); }
  // 16 floats holding integers in [-128, 127] stored as int8 (the conversions are exact).
  static V narrow16_s8(V a, V b, V c, V d) {
    const auto i16 = [](V x, V y) {
      return simde_wasm_i16x8_narrow_i32x4(simde_wasm_i32x4_trunc_sat_f32x4(x), simde_wasm_i32x4_trunc_sat_f32x4(y));
    };
    return simde_wasm_i8x16_narrow_i16x8(i16(a, b), i16(c, d));
  }
  static void store16_s8(int8_t* out, V a, V b, V c, V d) { simde_wasm_v128_store(out, narrow16_s8(a, b, c, d)); }
  // 16 floats holding integers in [-8, 7] stored as 8 bytes of nibbles + 8, even element in the low nibble: in each
  // 16-bit lane (even | odd << 8), x | x >> 4 holds even | odd << 4 in its low byte, which the mask and the
  // unsigned narrowing keep.
  static void store16_s4(uint8_t* out, V a, V b, V c, V d) {
    const V pairs = simde_wasm_i8x16_add(narrow16_s8(a, b, c, d), simde_wasm_i8x16_splat(8));
    const V low = simde_wasm_v128_and(simde_wasm_v128_or(pairs, simde_wasm_u16x8_shr(pairs, 4)),
                                      simde_wasm_i16x8_splat(0xff));
    simde_wasm_v128_store64_lane(out, simde_wasm_u8x16_narrow_i16x8(low, low), 0);
  }
  static M ge(V a, V b) { return simde_wasm_f32x4_ge(a, b); }
  static M lt(V a, V b) { return simde_wasm_f32x4_lt(a, b); }
  static M not_lt(V a, V b) { return simde_wasm_v128_not(simde_wasm_f32x4_lt(a, b)); }  // true for NaN
  static bool any(M m) { return simde_wasm_v128_any_true(m); }
  static M is_nan(V a) { return simde_wasm_f32x4_ne(a, a); }
  static V select(M m, V a, V b) { return simde_wasm_v128_bitselect(a, b, m); }
  static V zero_unless(M m, V a) { return simde_wasm_v128_and(m, a); }
  static V abs(V a) { return simde_wasm_f32x4_abs(a); }
  static V copy_sign_of(V mag, V sgn) {
    return simde_wasm_v128_or(mag, simde_wasm_v128_and(sgn, simde_wasm_i32x4_splat(INT32_MIN)));
  }
  // 2^n through the magic number 1.5 * 2^23: n + magic holds n + 2^22 in its low mantissa bits, and the shift by
  // 23 keeps only the low 9 bits of (that + 127), which are n + 127 for the exp's n in [-126, 128]. V8 lowers
  // i32x4.trunc_sat_f32x4 to about 8 x64 instructions (NaN and saturation fix-ups); this is 3.
  static V pow2_of_int_valued(V n) {
    const V biased = simde_wasm_f32x4_add(n, simde_wasm_f32x4_splat(12582912.0f));
    return simde_wasm_i32x4_shl(simde_wasm_i32x4_add(biased, simde_wasm_i32x4_splat(127)), 23);
  }
  static V scale_by_pow2(V p, V n) { return mul(p, pow2_of_int_valued(n)); }  // n integer-valued in [-126, 127]
  static float hmax(V v) {
    float l[4];
    store(l, v);
    float m = l[0];
    for (int i = 1; i < 4; ++i) m = l[i] > m ? l[i] : m;
    return m;
  }
  static float hsum(V v) {
    float l[4];
    store(l, v);
    return (l[0] + l[1]) + (l[2] + l[3]);
  }
  // Lane k = hsum(v[k]), in the same order: 6 shuffles and 3 adds for four sums, where each hsum went through
  // memory (a store, four loads, three scalar adds).
  static V sums4(const V v[4]) {
    const auto pairs = [](V a, V b) {  // [a0+a1, a2+a3, b0+b1, b2+b3]
      return simde_wasm_f32x4_add(simde_wasm_i32x4_shuffle(a, b, 0, 2, 4, 6),
                                  simde_wasm_i32x4_shuffle(a, b, 1, 3, 5, 7));
    };
    const V x = pairs(v[0], v[1]), y = pairs(v[2], v[3]);
    return simde_wasm_f32x4_add(simde_wasm_i32x4_shuffle(x, y, 0, 2, 4, 6), simde_wasm_i32x4_shuffle(x, y, 1, 3, 5, 7));
  }

  static void load8(F32, const uint8_t* row, size_t d, V& lo, V& hi) {
    const float* p = reinterpret_cast<const float*>(row) + d;
    lo = simde_wasm_v128_load(p);
    hi = simde_wasm_v128_load(p + 4);
  }
  // One unpack with zeros per 4 lanes (widen and shift took two).
  static void load8(BF16, const uint8_t* row, size_t d, V& lo, V& hi) {
    const V v = simde_wasm_v128_load(row + 2 * d), zero = simde_wasm_i32x4_splat(0);
    lo = simde_wasm_i16x8_shuffle(zero, v, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = simde_wasm_i16x8_shuffle(zero, v, 4, 12, 5, 13, 6, 14, 7, 15);
  }
  // Same exact f16 rule as the NEON traits (see there), in 7 operations instead of 10: w is the half
  // sign-extended, so its sign already sits in bit 31, and exponent 31 (inf / NaN), the only one that scales to
  // 2^16 or more (the largest finite half is 65504), gets its all-ones fp32 exponent from one compare. The same
  // bits: the scaled value's own exponent bits are covered by that or.
  static V f16x4(V w) {
    const V mag = simde_wasm_v128_and(simde_wasm_i32x4_shl(w, 13), simde_wasm_i32x4_splat(0x0FFFE000));
    const V scaled = simde_wasm_f32x4_mul(mag, simde_wasm_f32x4_splat(0x1p112f));
    const V infnan = simde_wasm_v128_and(simde_wasm_f32x4_ge(scaled, simde_wasm_f32x4_splat(65536.0f)),
                                         simde_wasm_i32x4_splat(0x7f800000));
    const V sign = simde_wasm_v128_and(w, simde_wasm_i32x4_splat(INT32_MIN));
    return simde_wasm_v128_or(simde_wasm_v128_or(scaled, infnan), sign);
  }
  // Storage conversion (kv_quant's rows): every pattern bit for bit, NaN payloads included.
  static void f16_row8(const uint8_t* row, size_t d, V& lo, V& hi) {
    const V v = simde_wasm_v128_load(row + 2 * d);
    lo = f16x4(simde_wasm_i32x4_extend_low_i16x8(v));
    hi = f16x4(simde_wasm_i32x4_extend_high_i16x8(v));
  }
  // The QK and SV loaders: exact for every number and infinity, a NaN stays a NaN (its payload may not: the result is
  // NaN either way). The fp32 patterns are built in 16-bit lanes, 8 at a time: the high halves are the half shifted
  // right by 3 with the sign kept (an exponent 31 also gets the three bits above it, so it scales to inf / NaN), the
  // low halves its three lowest bits; one unpack per 4 lanes and the multiply by 2^112 (which also makes subnormals
  // exact) finish them. 12 operations per 8 elements where f16_row8 takes 17: a KvCache decode step with an fp16
  // cache, T=4096, N=16, Nk=8, H=128, one thread, medians of 40 steps: 3.57-3.70 -> 2.16-2.22 ms (fp32 1.48-1.55).
  // Rows known to be finite (F16Finite) skip the exponent-31 widening, 4 of the 12: the same step 2.11 -> 1.67 ms.
  template <bool kSpecials>
  static void f16_load8(const uint8_t* row, size_t d, V& lo, V& hi) {
    const V h = simde_wasm_v128_load(row + 2 * d);
    const V sign_and_low12 = simde_wasm_i16x8_splat(static_cast<int16_t>(0x8FFF));
    V high = simde_wasm_v128_and(simde_wasm_i16x8_shr(h, 3), sign_and_low12);
    if constexpr (kSpecials) {
      const V special = simde_wasm_i16x8_eq(simde_wasm_v128_and(h, simde_wasm_i16x8_splat(0x7c00)),
                                            simde_wasm_i16x8_splat(0x7c00));
      high = simde_wasm_v128_or(high, simde_wasm_v128_and(special, simde_wasm_i16x8_splat(0x7000)));
    }
    const V low = simde_wasm_i16x8_shl(h, 13);
    const V scale = simde_wasm_f32x4_splat(0x1p112f);
    lo = simde_wasm_f32x4_mul(simde_wasm_i16x8_shuffle(low, high, 0, 8, 1, 9, 2, 10, 3, 11), scale);
    hi = simde_wasm_f32x4_mul(simde_wasm_i16x8_shuffle(low, high, 4, 12, 5, 13, 6, 14, 7, 15), scale);
  }
  static void load8(F16, const uint8_t* row, size_t d, V& lo, V& hi) { f16_load8<true>(row, d, lo, hi); }
  static void load8(F16Finite, const uint8_t* row, size_t d, V& lo, V& hi) { f16_load8<false>(row, d, lo, hi); }
  // fp32 -> fp16 / bf16 bit patterns (in int32 lanes), common/half.h's integer rules lane by lane.
  static V f16_bits4(V f) {
    const auto k = [](int32_t x) { return simde_wasm_i32x4_splat(x); };
    const V abs = simde_wasm_v128_and(f, k(0x7fffffff));
    const V odd = simde_wasm_v128_and(simde_wasm_u32x4_shr(abs, 13), k(1));
    const V normal = simde_wasm_u32x4_shr(
        simde_wasm_i32x4_sub(simde_wasm_i32x4_add(abs, simde_wasm_i32x4_add(odd, k(0x0fff))), k(0x38000000)), 13);
    // Below 2^-14 the result is subnormal: adding 0.5 rounds |f| to a multiple of 2^-24, half to even.
    const V tiny = simde_wasm_i32x4_sub(simde_wasm_f32x4_add(abs, simde_wasm_f32x4_splat(0.5f)), k(0x3f000000));
    V r = simde_wasm_v128_bitselect(tiny, normal, simde_wasm_i32x4_lt(abs, k(0x38800000)));
    r = simde_wasm_v128_bitselect(k(0x7c00), r, simde_wasm_i32x4_ge(abs, k(0x477ff000)));
    const V nan = simde_wasm_v128_or(simde_wasm_v128_and(simde_wasm_u32x4_shr(abs, 13), k(0x3ff)), k(0x7e00));
    r = simde_wasm_v128_bitselect(nan, r, simde_wasm_i32x4_gt(abs, k(0x7f800000)));
    return simde_wasm_v128_or(r, simde_wasm_v128_and(simde_wasm_u32x4_shr(f, 16), k(0x8000)));
  }
  static V bf16_bits4(V f) {
    const V high = simde_wasm_u32x4_shr(f, 16);
    const V bias =
        simde_wasm_i32x4_add(simde_wasm_v128_and(high, simde_wasm_i32x4_splat(1)), simde_wasm_i32x4_splat(0x7fff));
    const V rounded = simde_wasm_u32x4_shr(simde_wasm_i32x4_add(f, bias), 16);
    return simde_wasm_v128_bitselect(simde_wasm_v128_or(high, simde_wasm_i32x4_splat(0x40)), rounded, is_nan(f));
  }
  // The patterns are at most 0xffff, so the saturating narrow keeps them as they are.
  static void store8_f16(uint16_t* out, V lo, V hi) {
    simde_wasm_v128_store(out, simde_wasm_u16x8_narrow_i32x4(f16_bits4(lo), f16_bits4(hi)));
  }
  static void store8_bf16(uint16_t* out, V lo, V hi) {
    simde_wasm_v128_store(out, simde_wasm_u16x8_narrow_i32x4(bf16_bits4(lo), bf16_bits4(hi)));
  }
  // Bytes to float through the magic number 1.5 * 2^23: interleaving the zero-extended bytes (int16 lanes) with
  // the magic's upper half builds its bit pattern plus the byte in one unpack, and one subtraction removes the
  // magic and the byte's offset, exactly. LLVM 14 fuses extend + f32x4.convert_i32x4 into an int16->float
  // conversion that it then scalarizes lane by lane; this takes 2 instructions per 4 lanes instead.
  static void bytes_to_float(V u16, float offset, V& lo, V& hi) {
    const V magic = simde_wasm_i16x8_splat(0x4B40);
    const V bias = simde_wasm_f32x4_splat(12582912.0f + offset);
    lo = simde_wasm_f32x4_sub(simde_wasm_i16x8_shuffle(u16, magic, 0, 8, 1, 9, 2, 10, 3, 11), bias);
    hi = simde_wasm_f32x4_sub(simde_wasm_i16x8_shuffle(u16, magic, 4, 12, 5, 13, 6, 14, 7, 15), bias);
  }
  static void load8(S8, const uint8_t* row, size_t d, V& lo, V& hi) {  // int8 + 128 as unsigned bytes
    const V u = simde_wasm_v128_xor(simde_wasm_u16x8_load8x8(row + d), simde_wasm_i16x8_splat(0x80));
    bytes_to_float(u, 128.0f, lo, hi);
  }
  // The SV's loads (sv128_* in sv_gemm/simd128_sv_impl.h) may give each value times sv_scale, a power of two the SV
  // takes back from its sums. int8: each byte swizzled into the top byte of a 32-bit lane and converted, v * 2^24
  // with no float add (the SV's adds bound it): 2 rows x 512 keys, H=128, 9.9-10.3 -> 8.2-8.5 us. The same for
  // int4 (a shift or mask per nibble instead of the magic number) ran no faster.
  template <class E>
  static constexpr float sv_scale(E) { return 1.0f; }
  static constexpr float sv_scale(S8) { return 0x1p24f; }
  template <class E>
  static void sv_load8(E e, const uint8_t* row, size_t d, V& lo, V& hi) { load8(e, row, d, lo, hi); }
  static void sv_load8(S8, const uint8_t* row, size_t d, V& lo, V& hi) {
    const V x = simde_wasm_v128_load64_zero(row + d);  // indices of 0x80 and up give zero bytes
    lo = simde_wasm_f32x4_convert_i32x4(simde_wasm_i8x16_swizzle(
        x, simde_wasm_i8x16_const(-128, -128, -128, 0, -128, -128, -128, 1, -128, -128, -128, 2, -128, -128, -128, 3)));
    hi = simde_wasm_f32x4_convert_i32x4(simde_wasm_i8x16_swizzle(
        x, simde_wasm_i8x16_const(-128, -128, -128, 4, -128, -128, -128, 5, -128, -128, -128, 6, -128, -128, -128, 7)));
  }
  // 8 bytes zero-extended to int16 lanes, which LLVM must not see through: it narrows a shift of zero-extended
  // bytes (the high nibbles) into i8x16.shr_u and a byte shuffle, which V8 lowers to about 8 x64 instructions,
  // constants rebuilt in the loop, where i16x8.shr_u is one.
  static V bytes_u16(const uint8_t* p) {
    V x = simde_wasm_u16x8_load8x8(p);
#if defined(__wasm__)
    __asm__("" : "+r"(x));
#endif
    return x;
  }
  static void load8(S4, const uint8_t* row, size_t d, V& lo, V& hi) {
    const V x = simde_wasm_u16x8_extend_low_u8x16(simde_wasm_v128_load32_zero(row + d / 2));
    const V even = simde_wasm_v128_and(x, simde_wasm_i16x8_splat(0x0f)), odd = simde_wasm_u16x8_shr(x, 4);
    bytes_to_float(simde_wasm_i16x8_shuffle(even, odd, 0, 8, 1, 9, 2, 10, 3, 11), 8.0f, lo, hi);
  }
  // 8 bytes, 16 nibbles: the even elements (low nibbles) and the odd ones (high nibbles), each minus 8; 11
  // instructions where two load8 calls take 18 (no unpack back into element order).
  static void nibbles16(const uint8_t* p, V (&even)[2], V (&odd)[2]) {
    const V x = bytes_u16(p);
    bytes_to_float(simde_wasm_v128_and(x, simde_wasm_i16x8_splat(0x0f)), 8.0f, even[0], even[1]);
    bytes_to_float(simde_wasm_u16x8_shr(x, 4), 8.0f, odd[0], odd[1]);
  }
  // 8 bytes: their 8 low nibbles (the even elements) or their 8 high ones (the odd elements), each minus 8.
  static void nibbles8(const uint8_t* p, bool high, V (&out)[2]) {
    const V x = bytes_u16(p);
    bytes_to_float(high ? simde_wasm_u16x8_shr(x, 4) : simde_wasm_v128_and(x, simde_wasm_i16x8_splat(0x0f)), 8.0f,
                   out[0], out[1]);
  }
  // (e0 e1 e2 e3), (o0 o1 o2 o3) <-> (e0 o0 e1 o1), (e2 o2 e3 o3).
  static void interleave(V e, V o, V& a, V& b) {
    a = simde_wasm_i32x4_shuffle(e, o, 0, 4, 1, 5);
    b = simde_wasm_i32x4_shuffle(e, o, 2, 6, 3, 7);
  }
  static void deinterleave(V a, V b, V& e, V& o) {
    e = simde_wasm_i32x4_shuffle(a, b, 0, 2, 4, 6);
    o = simde_wasm_i32x4_shuffle(a, b, 1, 3, 5, 7);
  }

  // Integer limb QK (Simd128Limbs in qk_gemm/simd128_gemm_impl.h): 8 int16 lanes, int32 sums.
  using I16 = simde_v128_t;
  static I16 i16_load(const int16_t* p) { return simde_wasm_v128_load(p); }
  static I16 i16_widen_s8(const uint8_t* p) { return simde_wasm_i16x8_load8x8(p); }
  static I16 i16_widen_u8(const uint8_t* p) { return simde_wasm_u16x8_load8x8(p); }
  static I16 i16_widen_u8_tail(const uint8_t* p, size_t n) {  // n < 8 bytes, zero-padded
    uint8_t b[8] = {0};
    std::memcpy(b, p, n);
    return simde_wasm_u16x8_load8x8(b);
  }
  static I16 i16_low_nibbles(I16 x) { return simde_wasm_v128_and(x, simde_wasm_i16x8_splat(15)); }
  static I16 i16_high_nibbles(I16 x) { return simde_wasm_u16x8_shr(x, 4); }
  static Vi i32_zero() { return simde_wasm_i32x4_splat(0); }
  static Vi i32_dot(Vi acc, I16 a, I16 b) { return simde_wasm_i32x4_add(acc, simde_wasm_i32x4_dot_i16x8(a, b)); }
  static int32_t i32_hsum(Vi v) {
    const Vi t = simde_wasm_i32x4_add(v, simde_wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    return simde_wasm_i32x4_extract_lane(simde_wasm_i32x4_add(t, simde_wasm_i32x4_shuffle(t, t, 1, 0, 3, 2)), 0);
  }
  // Lane k = the sum of v[k]'s lanes: 6 unpacks and 3 adds for four sums (one hsum each took 4 and an extract).
  static Vi i32_sums4(const Vi v[4]) {
    const auto pairs = [](Vi a, Vi b) {  // [a0+a2, b0+b2, a1+a3, b1+b3]
      return simde_wasm_i32x4_add(simde_wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), simde_wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    };
    const Vi x = pairs(v[0], v[1]), y = pairs(v[2], v[3]);
    return simde_wasm_i32x4_add(simde_wasm_i32x4_shuffle(x, y, 0, 1, 4, 5), simde_wasm_i32x4_shuffle(x, y, 2, 3, 6, 7));
  }
  static Vi i32_sub(Vi a, Vi b) { return simde_wasm_i32x4_sub(a, b); }
  static Vi i32_make(int32_t a, int32_t b, int32_t c, int32_t d) { return simde_wasm_i32x4_make(a, b, c, d); }
  static V f32_make(float a, float b, float c, float d) { return simde_wasm_f32x4_make(a, b, c, d); }
  static V f32_from_i32(Vi v) { return simde_wasm_f32x4_convert_i32x4(v); }
  static void store_low2(float* p, V v) { simde_wasm_v128_store64_lane(p, v, 0); }
  static void store_high2(float* p, V v) { simde_wasm_v128_store64_lane(p, v, 1); }
};
#endif

}  // namespace
}  // namespace attnkit
