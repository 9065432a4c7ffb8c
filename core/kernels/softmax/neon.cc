// attnkit softmax kernels, neon: softmax_simd_impl.h with Vec128 on NEON (SIMDe: native on aarch64, emulated on x86); same exp/tanh bits as scalar.
#define ATTNKIT_VEC128_NEON 1
#include "softmax/simd128_vec.h"
#include "softmax/softmax_simd_impl.h"

namespace attnkit {

extern const SoftmaxKernels kSoftmax_neon;
const SoftmaxKernels kSoftmax_neon = {reduce_max_simd<Vec128>, exp_sum_simd<Vec128>, scale_simd<Vec128>,
                                      add_simd<Vec128>, softcap_simd<Vec128>};

}  // namespace attnkit
