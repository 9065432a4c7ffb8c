// attnkit rotary kernel, neon: rotary_simd_impl.h with Vec128 on NEON (SIMDe: native on aarch64, emulated on x86); bit-identical to scalar.
#define ATTNKIT_VEC128_NEON 1
#include "softmax/simd128_vec.h"
#include "rotary/rotary_simd_impl.h"

namespace attnkit {

extern const RotaryKernels kRotary_neon;
const RotaryKernels kRotary_neon = {rotary_simd<Vec128>};

}  // namespace attnkit
