// attnkit rotary kernel, avx512: rotary_simd_impl.h with Vec512; bit-identical to the scalar kernel.
#include "softmax/x86_vec.h"
#include "rotary/rotary_simd_impl.h"

namespace attnkit {

extern const RotaryKernels kRotary_avx512;
const RotaryKernels kRotary_avx512 = {rotary_simd<Vec512>};

}  // namespace attnkit
