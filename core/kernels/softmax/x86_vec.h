// attnkit: minimal float-vector wrappers (Vec256 for AVX2, Vec512 for AVX512) so the row kernels
// (softmax, kv_quant, rotary) are written once in x86_*_impl.h headers. Anonymous namespace: each
// ISA file gets its own copy compiled with its own flags.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace attnkit {
namespace {

struct Vec256 {
  using V = __m256;
  using Vi = __m256i;
  using M = __m256;  // comparison masks live in float lanes
  static constexpr size_t W = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V zero() { return _mm256_setzero_ps(); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V round_even(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static M ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M not_lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_NLT_UQ); }  // true for NaN
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  static M is_nan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static V select(M m, V a, V b) { return _mm256_blendv_ps(b, a, m); }  // m ? a : b
  static V zero_unless(M m, V a) { return _mm256_and_ps(m, a); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static V copy_sign_of(V mag, V sgn) {
    return _mm256_or_ps(mag, _mm256_and_ps(sgn, _mm256_set1_ps(-0.0f)));
  }
  static Vi to_int(V a) { return _mm256_cvtps_epi32(a); }  // MXCSR default: nearest even
  static V pow2_of_int_valued(V n) {
    const Vi e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_castsi256_ps(e);
  }
  static V scale_by_pow2(V p, V n) { return mul(p, pow2_of_int_valued(n)); }  // n integer-valued in [-126, 127]
  static float hmax(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
  }
  static float hsum(V v) {
    __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
    m = _mm_add_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
  }
};

struct Vec512 {
  using V = __m512;
  using Vi = __m512i;
  using M = __mmask16;
  static constexpr size_t W = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V zero() { return _mm512_setzero_ps(); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V round_even(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static M ge(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M not_lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_NLT_UQ); }  // true for NaN
  static bool any(M m) { return m != 0; }
  static M is_nan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static V select(M m, V a, V b) { return _mm512_mask_blend_ps(m, b, a); }
  static V zero_unless(M m, V a) { return _mm512_maskz_mov_ps(m, a); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static V copy_sign_of(V mag, V sgn) {
    const Vi s = _mm512_and_si512(_mm512_castps_si512(sgn), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), s));
  }
  static Vi to_int(V a) { return _mm512_cvtps_epi32(a); }
  static V pow2_of_int_valued(V n) {
    const Vi e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_castsi512_ps(e);
  }
  // p * 2^n in one rounding, as mul(p, pow2_of_int_valued(n)) is for n in [-126, 127].
  static V scale_by_pow2(V p, V n) { return _mm512_scalef_ps(p, n); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace
}  // namespace attnkit
