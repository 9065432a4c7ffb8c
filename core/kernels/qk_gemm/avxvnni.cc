// attnkit qk_gemm, AVX2 with AVX-VNNI (Intel's client cores from Alder Lake on, which lack AVX512): the exact
// int8/int4 limb QK of limb_query.h on 256-bit vpdpbusd. The limbs as three signed bytes meet the cache bytes + 128
// (int8) or the nibbles (int4), 32 products an instruction, and each key's sums are reduced four keys at a time. The
// integer sums are the other limb ISAs', so the scores are the same bits as scalar, AVX512-VNNI, NEON's sdot and
// wasm. VEX-encoded; the avx2 table takes it where the CPU reports AVX-VNNI (dispatch.cc).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "qk_gemm/limb_query.h"
#include "qk_gemm/x86_common.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_avx2;  // its fp32 kernels take the rows the limbs cannot

namespace {

constexpr size_t kDigitStep = 32;  // cache bytes per vpdpbusd

// acc += u8 . (the 32 signed bytes at s8), in place (the load folds into vpdpbusd). GCC compiled the intrinsic in a
// register tile into a fresh destination and a copy back each step (as for AVX512-VNNI, x86_vnni.h); an in-out asm
// operand keeps each sum in its register. VEX encoding: ymm0-15 ("x").
inline void dpbusd_into(__m256i& acc, __m256i u8, const int8_t* s8) {
  const __m256i digits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s8));
#if defined(__GNUC__) && !defined(__clang__)
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "xm"(digits));
#else
  acc = _mm256_dpbusd_avx_epi32(acc, u8, digits);
#endif
}

// Lane r of the result = the sum of v[r]'s eight lanes.
inline __m256i reduce8i(const __m256i v[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// One step of 32 cache bytes (int4: 64 elements) of R keys into MB rows' three sums each (row i, key r at
// i * R + r). Each key's bytes are loaded and converted just before their products, so only one key's are live.
template <int MB, int R, bool kS4, bool kMasked>
__attribute__((always_inline)) inline void digit_step(const DigitRow* q, const uint8_t* K, size_t ldk, size_t b,
                                                      __m256i mask, __m256i (&a0)[MB * R], __m256i (&a1)[MB * R],
                                                      __m256i (&a2)[MB * R]) {
  ATTNKIT_UNROLL for (int r = 0; r < R; ++r) {
    const uint8_t* row = K + r * ldk + b;
    const __m256i x = kMasked ? _mm256_maskload_epi32(reinterpret_cast<const int*>(row), mask)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
    const __m256i k = kS4 ? _mm256_and_si256(x, _mm256_set1_epi8(0x0f))
                          : _mm256_xor_si256(x, _mm256_set1_epi8(static_cast<char>(0x80)));
    ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
      dpbusd_into(a0[i * R + r], k, q[i].d[0] + b);
      dpbusd_into(a1[i * R + r], k, q[i].d[1] + b);
      dpbusd_into(a2[i * R + r], k, q[i].d[2] + b);
    }
    if (kS4) {
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(0x0f));
      ATTNKIT_UNROLL for (int i = 0; i < MB; ++i) {
        const size_t o = q[i].limb.odd + b;
        dpbusd_into(a0[i * R + r], odd, q[i].d[0] + o);
        dpbusd_into(a1[i * R + r], odd, q[i].d[1] + o);
        dpbusd_into(a2[i * R + r], odd, q[i].d[2] + o);
      }
    }
  }
}

// The scores of MB rows x R keys (MB R <= 4) at c[i][0, R). A row's last partial step loads its bytes masked (whole
// dwords: H is a multiple of 8), the digits past H being zero.
template <int MB, int R, bool kS4>
__attribute__((always_inline)) inline void digit_tile(size_t H, const DigitRow* q, const uint8_t* K, size_t ldk,
                                                      __m256i off, __m128 factor, float* const* c) {
  static_assert(MB * R <= 4, "one reduction per tile");
  const size_t bytes = kS4 ? H / 2 : H;
  __m256i a0[MB * R], a1[MB * R], a2[MB * R];
  ATTNKIT_UNROLL for (int s = 0; s < MB * R; ++s) a0[s] = a1[s] = a2[s] = _mm256_setzero_si256();
  const __m256i none = _mm256_setzero_si256();
  size_t b = 0;
  for (; b + kDigitStep <= bytes; b += kDigitStep) digit_step<MB, R, kS4, false>(q, K, ldk, b, none, a0, a1, a2);
  if (b < bytes) {
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>((bytes - b) / 4)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    digit_step<MB, R, kS4, true>(q, K, ldk, b, mask, a0, a1, a2);
  }
  // combine_limbs' formula lane-wise, score s = i R + r: its hi sum in lane s and its lo sum in lane 4 + s, less
  // the offsets of the unsigned bytes (off; mod 2^32, as the sums wrap). The same integers (lane-wise 256 d0 + d1
  // stays below 2^31) and the same roundings, so the same bits as the scalar kernel.
  __m256i p[8];
  ATTNKIT_UNROLL for (int s = 0; s < 4; ++s) {
    p[s] = s < MB * R ? _mm256_add_epi32(_mm256_slli_epi32(a0[s], 8), a1[s]) : _mm256_setzero_si256();
    p[4 + s] = s < MB * R ? a2[s] : _mm256_setzero_si256();
  }
  const __m256i sums = _mm256_sub_epi32(reduce8i(p), off);
  const __m128 h = _mm_cvtepi32_ps(_mm256_castsi256_si128(sums));
  const __m128 l = _mm_cvtepi32_ps(_mm256_extracti128_si256(sums, 1));
  const __m128 out = _mm_mul_ps(_mm_add_ps(_mm_mul_ps(h, _mm_set1_ps(kLimbBase)), l), factor);
  if (MB * R == 4) {
    if (MB == 1) {
      _mm_storeu_ps(c[0], out);
    } else {
      _mm_storel_pi(reinterpret_cast<__m64*>(c[0]), out);
      _mm_storeh_pi(reinterpret_cast<__m64*>(c[1]), out);
    }
  } else {
    alignas(16) float o[4];
    _mm_store_ps(o, out);
    ATTNKIT_UNROLL for (int s = 0; s < MB * R; ++s) c[s / R][s % R] = o[s];
  }
}

// Per lane of a tile's reduction (digit_tile): the offsets to remove and the factors of its scores' rows.
template <int MB, int R, bool kS4>
void tile_constants(const DigitRow* q, __m256i* off, __m128* factor) {
  alignas(32) int32_t o[8] = {};
  alignas(16) float f[4] = {};
  const uint32_t unit = kS4 ? 8u : 128u;
  for (int s = 0; s < MB * R; ++s) {
    const LimbRow& limb = q[s / R].limb;
    o[s] = static_cast<int32_t>(unit * static_cast<uint32_t>(limb.sum_hi));
    o[4 + s] = static_cast<int32_t>(unit * static_cast<uint32_t>(limb.sum_lo));
    f[s] = limb.factor;
  }
  *off = _mm256_load_si256(reinterpret_cast<const __m256i*>(o));
  *factor = _mm_load_ps(f);
}

// Keys per tile: four scores share one reduction, and three sums per score, one key's bytes and a constant fit the
// 16 registers (the digits come from memory).
constexpr int keys_per_tile(int mb) { return 4 / mb; }

// qk_digits' passes (limb_query.h): up to two rows over K, in a function of their own (as row_digit_keys on
// AVX512-VNNI): inlined into the driver, whose limb and digit buffers fill the frame, the tiles' sums went to the
// stack. Not limb_rows' per-tile interface: its tiles would rebuild the lane constants each tile or be calls of
// their own, and both ran 1.3-2.8x slower (2048 keys, H=128: int8 one row 9.0-9.6 against 5.7-6.8 us).
struct AvxVnniDigits {
  static constexpr size_t kStep = kDigitStep;
  static constexpr int kMaxRows = 2;
  template <int MB, bool kS4>
  __attribute__((noinline)) static void rows(size_t N, size_t H, const DigitRow* q, const uint8_t* K, size_t ldk,
                                             float* const* c_rows) {
    constexpr int R = keys_per_tile(MB);
    const size_t ahead = block_prefetch_rows(N, ldk);
    __m256i off, off1;
    __m128 factor, factor1;
    tile_constants<MB, R, kS4>(q, &off, &factor);
    tile_constants<MB, 1, kS4>(q, &off1, &factor1);
    float* c[MB];
    size_t j = 0;
    for (; j + R <= N; j += R) {
      for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
      if (ahead && j + ahead + R <= N) prefetch_lines(K + (j + ahead) * ldk, R * ldk);
      digit_tile<MB, R, kS4>(H, q, K + j * ldk, ldk, off, factor, c);
    }
    for (; j < N; ++j) {
      for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
      digit_tile<MB, 1, kS4>(H, q, K + j * ldk, ldk, off1, factor1, c);
    }
  }
};

}  // namespace

void qk_gemm_s8_avxvnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                        float alpha, float* C, size_t ldc) {
  qk_digits<AvxVnniDigits, false>(kQkGemm_avx2.s8, M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

void qk_gemm_s4_avxvnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                        float alpha, float* C, size_t ldc) {
  qk_digits<AvxVnniDigits, true>(kQkGemm_avx2.s4, M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

}  // namespace attnkit
