// attnkit qk_gemm, NEON with the dot-product extension: the exact int8/int4 limb QK of limb_query.h through sdot.
// The limbs as three signed bytes (hi = 256 d0 + d1, lo = d2, as x86_row_digits.h) meet the cache bytes (int8 as
// stored; int4 nibbles 0..15, whose offset 8 combine_limbs removes), 16 products per sdot. The integer sums are the
// other limb ISAs', so the scores are the same bits as scalar, AVX512-VNNI and wasm. Compiled with +dotprod on
// aarch64 and used only where the CPU reports it (dispatch.cc); on x86 it compiles through SIMDe.
#if defined(__ARM_NEON)
#include <arm_neon.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "qk_gemm/limb_query.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_neon;  // its fp32 kernels take the rows the limbs cannot

namespace {

constexpr size_t kDigitStep = 16;  // cache bytes per sdot

// Three sums per row and key: one row over four keys or two rows over two keep them, the digits and the key bytes
// within NEON's 32 registers.
constexpr int keys_for_rows(int mb) { return mb == 1 ? 4 : 2; }

// R keys' scores of MB rows at c[i][0, R). A row's last partial step reads a zero-padded copy of its bytes: the
// digits past H are zero, but the bytes past the row may lie past the buffer.
template <int MB, int R, bool kS4>
void digit_tile(size_t H, const DigitRow* q, const uint8_t* K, size_t ldk, float* const* c) {
  int32x4_t a[MB][R][3];
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) a[i][r][0] = a[i][r][1] = a[i][r][2] = vdupq_n_s32(0);
  const size_t bytes = kS4 ? H / 2 : H;
  const auto step = [&](size_t b, const uint8_t* const* rows) {
    int8x16_t k[R], odd[R];
    for (int r = 0; r < R; ++r) {
      const uint8x16_t x = vld1q_u8(rows[r]);
      k[r] = vreinterpretq_s8_u8(kS4 ? vandq_u8(x, vdupq_n_u8(0x0f)) : x);
      if (kS4) odd[r] = vreinterpretq_s8_u8(vshrq_n_u8(x, 4));
    }
    for (int i = 0; i < MB; ++i)
      for (int l = 0; l < 3; ++l) {
        const int8x16_t digits = vld1q_s8(q[i].d[l] + b);
        for (int r = 0; r < R; ++r) a[i][r][l] = vdotq_s32(a[i][r][l], k[r], digits);
        if (kS4) {
          const int8x16_t odd_digits = vld1q_s8(q[i].d[l] + q[i].limb.odd + b);
          for (int r = 0; r < R; ++r) a[i][r][l] = vdotq_s32(a[i][r][l], odd[r], odd_digits);
        }
      }
  };
  const uint8_t* rows[R];
  size_t b = 0;
  for (; b + kDigitStep <= bytes; b += kDigitStep) {
    for (int r = 0; r < R; ++r) rows[r] = K + r * ldk + b;
    step(b, rows);
  }
  if (b < bytes) {
    uint8_t tail[R][kDigitStep] = {};
    for (int r = 0; r < R; ++r) {
      std::memcpy(tail[r], K + r * ldk + b, bytes - b);
      rows[r] = tail[r];
    }
    step(b, rows);
  }
  // Lane-wise 256 d0 + d1 stays below 2^31 (limb_query.h bounds the whole sum); the lanes' total is the scalar
  // kernel's integer, and combine_limbs rounds it the same way.
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) {
      const int32_t hi = vaddvq_s32(vaddq_s32(vshlq_n_s32(a[i][r][0], 8), a[i][r][1]));
      c[i][r] = combine_limbs(hi, vaddvq_s32(a[i][r][2]), q[i].limb, kS4);
    }
}

// qk_digits' passes (limb_query.h): up to two rows over K.
struct NeonDigits {
  static constexpr size_t kStep = kDigitStep;
  static constexpr int kMaxRows = 2;
  template <int MB, bool kS4>
  static void rows(size_t N, size_t H, const DigitRow* q, const uint8_t* K, size_t ldk, float* const* c_rows) {
    constexpr int R = keys_for_rows(MB);
    float* c[MB];
    size_t j = 0;
    for (; j + R <= N; j += R) {
      for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
      digit_tile<MB, R, kS4>(H, q, K + j * ldk, ldk, c);
    }
    for (; j < N; ++j) {
      for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
      digit_tile<MB, 1, kS4>(H, q, K + j * ldk, ldk, c);
    }
  }
};

}  // namespace

void qk_gemm_s8_neon_dotprod(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                             float alpha, float* C, size_t ldc) {
  qk_digits<NeonDigits, false>(kQkGemm_neon.s8, M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

void qk_gemm_s4_neon_dotprod(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
                             float alpha, float* C, size_t ldc) {
  qk_digits<NeonDigits, true>(kQkGemm_neon.s4, M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

}  // namespace attnkit
