// attnkit kv_quant kernels, neon: simd128_kv_quant_impl.h with Vec128 on NEON (SIMDe: native on aarch64, emulated on x86).
#define ATTNKIT_VEC128_NEON 1
#include "softmax/simd128_vec.h"
#include "kv_quant/simd128_kv_quant_impl.h"

namespace attnkit {

extern const KvQuantKernels kKvQuant_neon;
const KvQuantKernels kKvQuant_neon = {
    to_f16_128<Vec128>,        to_bf16_128<Vec128>,     from_16bit_128<Vec128, F16>, from_16bit_128<Vec128, BF16>,
    quantize_s8_128<Vec128>,   quantize_s4_128<Vec128>, dequantize_s8_128<Vec128>,   dequantize_s4_128,
    copy_streaming_memcpy};

}  // namespace attnkit
