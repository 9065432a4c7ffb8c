// attnkit softmax kernels, wasm128: softmax_simd_impl.h with Vec128 on wasm SIMD128 (SIMDe: native under emcc, emulated elsewhere); same exp/tanh bits as scalar.
#define ATTNKIT_VEC128_WASM 1
#include "softmax/simd128_vec.h"
#include "softmax/softmax_simd_impl.h"

namespace attnkit {

extern const SoftmaxKernels kSoftmax_wasm128;
const SoftmaxKernels kSoftmax_wasm128 = {reduce_max_simd<Vec128>, exp_sum_simd<Vec128>, scale_simd<Vec128>,
                                         add_simd<Vec128>, softcap_simd<Vec128>};

}  // namespace attnkit
