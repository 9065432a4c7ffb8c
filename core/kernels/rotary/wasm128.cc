// attnkit rotary kernel, wasm128: rotary_simd_impl.h with Vec128 on wasm SIMD128 (SIMDe: native under emcc, emulated elsewhere); bit-identical to scalar.
#define ATTNKIT_VEC128_WASM 1
#include "softmax/simd128_vec.h"
#include "rotary/rotary_simd_impl.h"

namespace attnkit {

extern const RotaryKernels kRotary_wasm128;
const RotaryKernels kRotary_wasm128 = {rotary_simd<Vec128>};

}  // namespace attnkit
