// attnkit qk_gemm kernels, wasm128: the 4-lane loops of simd128_gemm_impl.h on wasm SIMD128 (SIMDe: native under emcc, emulated elsewhere).
#define ATTNKIT_VEC128_WASM 1
#include "softmax/simd128_vec.h"
#include "qk_gemm/simd128_gemm_impl.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_wasm128;
const QkGemmKernels kQkGemm_wasm128 = {
    qk128_direct<Vec128, F32>, qk128_direct<Vec128, F16>, qk128_direct<Vec128, BF16>,
    qk_limbs<Simd128Limbs<Vec128>, false, qk128_direct<Vec128, S8>>,
    qk_limbs<Simd128Limbs<Vec128>, true, qk128_direct<Vec128, S4>>,  qk128_pack<Vec128, F32>,
    qk128_pack<Vec128, F16>,   qk128_pack<Vec128, BF16>,  qk128_pack<Vec128, S8>,
    qk128_pack<Vec128, S4>,    qk128_packed<Vec128>,      nullptr,
    qk128_direct<Vec128, F16Finite>, qk128_pack<Vec128, F16Finite>};

}  // namespace attnkit
