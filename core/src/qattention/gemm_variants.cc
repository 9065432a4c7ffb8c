// attnkit: lists the gemm_u8x8 variants compiled in (ATTNKIT_HAVE_GEMM_U8X8_<ISA>) and runnable here.
// Emulated ones (NEON and wasm128 through SIMDe on x86) are included: they are exact, just slow.
#include "qattention/gemm_variants.h"

namespace attnkit {

extern const GemmU8X8Kernels kGemmU8X8_scalar;
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
extern const GemmU8X8Kernels kGemmU8X8_avx2;
extern const GemmU8X8Kernels kGemmU8X8_avxvnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
extern const GemmU8X8Kernels kGemmU8X8_avx512vnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
extern const GemmU8X8Kernels kGemmU8X8_neon_widen;
extern const GemmU8X8Kernels kGemmU8X8_neon_sdot;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
extern const GemmU8X8Kernels kGemmU8X8_wasm128;
#endif

std::vector<GemmU8X8Kernels> gemm_u8x8_variants() {
  std::vector<GemmU8X8Kernels> out{kGemmU8X8_scalar};
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) out.push_back(kGemmU8X8_avx2);
  if (__builtin_cpu_supports("avxvnni")) out.push_back(kGemmU8X8_avxvnni);
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    out.push_back(kGemmU8X8_avx512vnni);
  }
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
  out.push_back(kGemmU8X8_neon_widen);
  if (kGemmU8X8_neon_sdot.gemm != kGemmU8X8_neon_widen.gemm) out.push_back(kGemmU8X8_neon_sdot);
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
  out.push_back(kGemmU8X8_wasm128);
#endif
  return out;
}

}  // namespace attnkit
