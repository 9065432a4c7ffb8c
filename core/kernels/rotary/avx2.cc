// attnkit rotary kernel, avx2: rotary_simd_impl.h with Vec256; bit-identical to the scalar kernel.
#include "softmax/x86_vec.h"
#include "rotary/rotary_simd_impl.h"

namespace attnkit {

extern const RotaryKernels kRotary_avx2;
const RotaryKernels kRotary_avx2 = {rotary_simd<Vec256>};

}  // namespace attnkit
