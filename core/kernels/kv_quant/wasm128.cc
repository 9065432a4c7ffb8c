// attnkit kv_quant kernels, wasm128: simd128_kv_quant_impl.h with Vec128 on wasm SIMD128 (SIMDe: native under emcc, emulated elsewhere).
#define ATTNKIT_VEC128_WASM 1
#include "softmax/simd128_vec.h"
#include "kv_quant/simd128_kv_quant_impl.h"

namespace attnkit {

extern const KvQuantKernels kKvQuant_wasm128;
const KvQuantKernels kKvQuant_wasm128 = {
    to_f16_128<Vec128>,        to_bf16_128<Vec128>,     from_16bit_128<Vec128, F16>, from_16bit_128<Vec128, BF16>,
    quantize_s8_128<Vec128>,   quantize_s4_128<Vec128>, dequantize_s8_128<Vec128>,   dequantize_s4_128,
    copy_streaming_memcpy};

}  // namespace attnkit
