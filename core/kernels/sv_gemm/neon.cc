// attnkit sv_gemm kernels, neon: fused dequantize-and-accumulate SV (simd128_sv_impl.h) on NEON (SIMDe: native
// on aarch64, emulated on x86).
#define ATTNKIT_VEC128_NEON 1
#include "softmax/simd128_vec.h"
#include "sv_gemm/simd128_sv_impl.h"

namespace attnkit {

extern const SvGemmKernels kSvGemm_neon;
const SvGemmKernels kSvGemm_neon = {sv128<Vec128, F32>, sv128<Vec128, F16>, sv128<Vec128, BF16>,
                                      sv128<Vec128, S8>, sv128<Vec128, S4>, sv128<Vec128, F16>,
                                      nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace attnkit
