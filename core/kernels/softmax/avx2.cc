// attnkit softmax kernels, avx2: softmax_simd_impl.h with Vec256 (same exp/tanh bits as scalar).
#include "softmax/x86_vec.h"
#include "softmax/softmax_simd_impl.h"

namespace attnkit {

extern const SoftmaxKernels kSoftmax_avx2;
const SoftmaxKernels kSoftmax_avx2 = {reduce_max_simd<Vec256>, exp_sum_simd<Vec256>, scale_simd<Vec256>,
                                      add_simd<Vec256>, softcap_simd<Vec256>};

}  // namespace attnkit
