// attnkit sv_gemm kernels, wasm128: fused dequantize-and-accumulate SV (simd128_sv_impl.h) on wasm SIMD128 (SIMDe:
// native under emcc, emulated elsewhere).
#define ATTNKIT_VEC128_WASM 1
#include "softmax/simd128_vec.h"
#include "sv_gemm/simd128_sv_impl.h"

namespace attnkit {

extern const SvGemmKernels kSvGemm_wasm128;
const SvGemmKernels kSvGemm_wasm128 = {sv128<Vec128, F32>, sv128<Vec128, F16>, sv128<Vec128, BF16>,
                                      sv128<Vec128, S8>, sv128<Vec128, S4>,
                                      sv128<Vec128, F16Finite>,
                                      widen128<Vec128, F16>, widen128<Vec128, BF16>, widen128<Vec128, S8>,
                                      widen128<Vec128, S4>, widen128<Vec128, F16Finite>};

}  // namespace attnkit
