// attnkit gemm_u8x8, NEON: sdot (vdotq_s32, 4 products per int32 lane) where the compiler targets the
// dot-product extension, widening vmlal_s16 otherwise. sdot is signed x signed, so activations are
// shifted to s8 (a - 128) and weights to s8 (u8: b - 128) with the shifts folded into the zero points.
// On x86 this file compiles through SIMDe, so both paths are tested on every CI host.
#if defined(__ARM_NEON)
#include <arm_neon.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>
#endif

#include "gemm_u8x8/gemm_u8x8_impl.h"

#if defined(__ARM_FEATURE_DOTPROD) || !defined(__aarch64__)
#define ATTNKIT_GEMM_U8X8_SDOT 1
#endif

namespace attnkit {
namespace {

constexpr size_t kMr = 4, kNr = 16;

#if defined(ATTNKIT_GEMM_U8X8_SDOT)
// strip is [K/4][16][4] int8: four q registers of 4 columns x 4 k per group.
void micro_sdot(const uint8_t* const rows[kMr], size_t kgroups, const int8_t* strip, int32_t* tile) {
  int32x4_t acc[kMr][4];
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) acc[r][j] = vdupq_n_s32(0);
  for (size_t g = 0; g < kgroups; ++g) {
    int8x16_t b[4];
    for (size_t j = 0; j < 4; ++j) b[j] = vld1q_s8(strip + g * 64 + j * 16);
    for (size_t r = 0; r < kMr; ++r) {
      int32_t quad;
      std::memcpy(&quad, rows[r] + 4 * g, sizeof(quad));
      const int8x16_t a = vreinterpretq_s8_s32(vdupq_n_s32(quad));
      for (size_t j = 0; j < 4; ++j) acc[r][j] = vdotq_s32(acc[r][j], b[j], a);
    }
  }
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) vst1q_s32(tile + r * kNr + j * 4, acc[r][j]);
}

void gemm_u8x8_neon_sdot(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                         const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                         size_t ldc, void* workspace) {
  gemm_dot4<kMr, kNr, true>(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc, workspace, micro_sdot);
}

size_t workspace_neon_sdot(size_t M, size_t N, size_t K) { return workspace_dot4(M, K, kNr); }
#endif

// strip is [K][16] int16 of (b - zb); rows hold (a - za) in int16; products (<= 65025) are exact in
// the int32 lanes of vmlal_s16.
void micro_widen(const int16_t* const rows[kMr], size_t kgroups, const int16_t* strip, int32_t* tile) {
  int32x4_t acc[kMr][4];
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) acc[r][j] = vdupq_n_s32(0);
  for (size_t k = 0; k < kgroups; ++k) {
    const int16x8_t b0 = vld1q_s16(strip + k * 16);
    const int16x8_t b1 = vld1q_s16(strip + k * 16 + 8);
    for (size_t r = 0; r < kMr; ++r) {
      const int16_t a = rows[r][k];
      acc[r][0] = vmlal_n_s16(acc[r][0], vget_low_s16(b0), a);
      acc[r][1] = vmlal_n_s16(acc[r][1], vget_high_s16(b0), a);
      acc[r][2] = vmlal_n_s16(acc[r][2], vget_low_s16(b1), a);
      acc[r][3] = vmlal_n_s16(acc[r][3], vget_high_s16(b1), a);
    }
  }
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) vst1q_s32(tile + r * kNr + j * 4, acc[r][j]);
}

void gemm_u8x8_neon_widen(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                          const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                          size_t ldc, void* workspace) {
  gemm_i16<kMr, kNr, 1>(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc, workspace, micro_widen);
}

size_t workspace_neon_widen(size_t M, size_t N, size_t K) { return workspace_i16(M, K, kNr, 1); }

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_neon_widen = {gemm_u8x8_neon_widen, workspace_neon_widen,
                                                     "neon-widen"};
// kGemmU8X8_neon is the one dispatch uses; kGemmU8X8_neon_sdot exists for the tests (it is the
// widening kernel where the target has no dot-product instructions, and its variant name says so).
#if defined(ATTNKIT_GEMM_U8X8_SDOT)
extern const GemmU8X8Kernels kGemmU8X8_neon = {gemm_u8x8_neon_sdot, workspace_neon_sdot, "neon-sdot"};
extern const GemmU8X8Kernels kGemmU8X8_neon_sdot = {gemm_u8x8_neon_sdot, workspace_neon_sdot, "neon-sdot"};
#else
extern const GemmU8X8Kernels kGemmU8X8_neon = {gemm_u8x8_neon_widen, workspace_neon_widen, "neon-widen"};
extern const GemmU8X8Kernels kGemmU8X8_neon_sdot = {gemm_u8x8_neon_widen, workspace_neon_widen,
                                                    "neon-widen"};
#endif

}  // namespace attnkit
