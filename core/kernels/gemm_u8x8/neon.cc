// attnkit gemm_u8x8, NEON without the dot-product extension: widening vmlal_s16, exact in int32 lanes.
// Runs on every ARMv8 core; neon_dotprod.cc holds the sdot kernel, chosen at run time where the CPU
// has it. On x86 this file compiles through SIMDe, so it is tested on every CI host.
#if defined(__ARM_NEON)
#include <arm_neon.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>
#endif

#include "gemm_u8x8/gemm_u8x8_impl.h"

namespace attnkit {
namespace {

constexpr size_t kMr = 4, kNr = 16;

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

using NeonWiden = GemmEntry<I16Gemm<kMr, kNr, 1, FullTile<micro_widen>>>;

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_neon = NeonWiden::kernels("neon-widen", kNr);

}  // namespace attnkit
