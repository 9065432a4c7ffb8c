// attnkit softmax kernels, avx512: softmax_simd_impl.h with Vec512 (same exp/tanh bits as scalar).
#include "softmax/x86_vec.h"
#include "softmax/softmax_simd_impl.h"

namespace attnkit {

extern const SoftmaxKernels kSoftmax_avx512;
const SoftmaxKernels kSoftmax_avx512 = {reduce_max_simd<Vec512>, exp_sum_simd<Vec512>, scale_simd<Vec512>,
                                        add_simd<Vec512>, softcap_simd<Vec512>};

}  // namespace attnkit
