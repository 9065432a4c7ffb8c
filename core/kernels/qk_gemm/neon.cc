// attnkit qk_gemm kernels, neon: the 4-lane loops of simd128_gemm_impl.h on NEON (SIMDe: native on aarch64, emulated on x86).
#define ATTNKIT_VEC128_NEON 1
#include "softmax/simd128_vec.h"
#include "qk_gemm/simd128_gemm_impl.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_neon;
const QkGemmKernels kQkGemm_neon = {
    qk128_direct<Vec128, F32>, qk128_direct<Vec128, F16>, qk128_direct<Vec128, BF16>,
    qk128_direct<Vec128, S8>,  qk128_direct<Vec128, S4>,  qk128_pack<Vec128, F32>,
    qk128_pack<Vec128, F16>,   qk128_pack<Vec128, BF16>,  qk128_pack<Vec128, S8>,
    qk128_pack<Vec128, S4>,    qk128_packed<Vec128>,      nullptr,
    qk128_direct<Vec128, F16>, qk128_pack<Vec128, F16>};

}  // namespace attnkit
