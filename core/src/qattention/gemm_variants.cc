// attnkit: lists the gemm_u8x8 variants compiled in (ATTNKIT_HAVE_GEMM_U8X8_<ISA>) and runnable here.
// Emulated ones (NEON and wasm128 through SIMDe on x86, AMX on scalar tiles) are included: exact, just slow.
#include "qattention/gemm_variants.h"

#include "dispatch.h"

namespace attnkit {

extern const GemmU8X8Kernels kGemmU8X8_scalar;
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
extern const GemmU8X8Kernels kGemmU8X8_avx2;
extern const GemmU8X8Kernels kGemmU8X8_avxvnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
extern const GemmU8X8Kernels kGemmU8X8_avx512vnni;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AMX)
extern const GemmU8X8Kernels kGemmU8X8_amx;
extern const GemmU8X8Kernels kGemmU8X8_amx_emulated;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
extern const GemmU8X8Kernels kGemmU8X8_neon;
extern const GemmU8X8Kernels kGemmU8X8_neon_dotprod;
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
extern const GemmU8X8Kernels kGemmU8X8_wasm128;
#endif

std::vector<GemmU8X8Kernels> gemm_u8x8_variants() {
  std::vector<GemmU8X8Kernels> out{kGemmU8X8_scalar};
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX2)
  if (cpu_has_feature("avx2")) out.push_back(kGemmU8X8_avx2);
  if (cpu_has_feature("avxvnni")) out.push_back(kGemmU8X8_avxvnni);
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AVX512VNNI)
  const bool avx512vnni = cpu_has_feature("avx512bw") && cpu_has_feature("avx512vl") && cpu_has_feature("avx512vnni");
  if (avx512vnni) out.push_back(kGemmU8X8_avx512vnni);
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_AMX)
  // The AMX driver on scalar tiles (its packing and epilogue are AVX512-VNNI's), then on the CPU's own.
  if (avx512vnni) out.push_back(kGemmU8X8_amx_emulated);
  if (cpu_has_feature("amx-int8")) out.push_back(kGemmU8X8_amx);
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_NEON)
  // Where dispatch runs the NEON table (on x86 the emulated files need FMA).
  if (kernel_table_for("neon")) {
    out.push_back(kGemmU8X8_neon);
    // sdot: native where the CPU has the dot-product extension, SIMDe-emulated on other hosts.
#if defined(__aarch64__)
    if (cpu_has_feature("dotprod")) out.push_back(kGemmU8X8_neon_dotprod);
#else
    out.push_back(kGemmU8X8_neon_dotprod);
#endif
  }
#endif
#if defined(ATTNKIT_HAVE_GEMM_U8X8_WASM128)
  out.push_back(kGemmU8X8_wasm128);
#endif
  return out;
}

}  // namespace attnkit
