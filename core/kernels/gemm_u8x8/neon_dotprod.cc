// attnkit gemm_u8x8, NEON with the dot-product extension: sdot (vdotq_s32, 4 products per int32 lane).
// sdot is signed x signed, so activations are shifted to s8 (a - 128) and weights to s8 (u8: b - 128)
// with the shifts folded into the zero points. Compiled with +dotprod on aarch64 and used only where
// the CPU reports it (dispatch.cc); on x86 it compiles through SIMDe.
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

using NeonSdot = GemmEntry<Dot4Gemm<kMr, kNr, true, FullTile<micro_sdot>>>;


}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_neon_dotprod = NeonSdot::kernels("neon-sdot", kNr);

}  // namespace attnkit
