// attnkit sv_gemm kernels, avx512: axpy-form O = beta*O + P*V with the V rows converted in registers
// (fused dequantize-and-accumulate), register-blocked over rows and columns (x86_gemm_impl.h).
#include "qk_gemm/x86_gemm_impl.h"
#include "qk_gemm/x86_traits_avx512.h"

namespace attnkit {

extern const SvGemmKernels kSvGemm_avx512;
const SvGemmKernels kSvGemm_avx512 = {sv_gemm_x86<Avx512, F32>, sv_gemm_x86<Avx512, F16>,
                                      sv_gemm_x86<Avx512, BF16>, sv_gemm_x86<Avx512, S8>,
                                      sv_gemm_x86<Avx512, S4>, sv_gemm_x86<Avx512, F16>,
                                      nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace attnkit
