// attnkit sv_gemm kernels, avx2: axpy-form O = beta*O + P*V with the V rows converted in registers
// (fused dequantize-and-accumulate), register-blocked over rows and columns (x86_gemm_impl.h).
#include "qk_gemm/x86_gemm_impl.h"
#include "qk_gemm/x86_traits_avx2.h"

namespace attnkit {

extern const SvGemmKernels kSvGemm_avx2;
const SvGemmKernels kSvGemm_avx2 = {sv_gemm_x86<Avx2, F32>, sv_gemm_x86<Avx2, F16>,
                                      sv_gemm_x86<Avx2, BF16>, sv_gemm_x86<Avx2, S8>,
                                      sv_gemm_x86<Avx2, S4>, sv_gemm_x86<Avx2, F16>,
                                      nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace attnkit
