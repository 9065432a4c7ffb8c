// attnkit kv_quant kernels, avx2: x86_kv_quant_impl.h (8-lane bodies; these kernels are bound by
// the row writes, so the wider registers buy nothing) compiled with this ISA's flags.
#include "kv_quant/x86_kv_quant_impl.h"

namespace attnkit {

extern const KvQuantKernels kKvQuant_avx2;
const KvQuantKernels kKvQuant_avx2 = {to_f16_x86,         to_bf16_x86,         from_f16_x86,
                                        from_bf16_x86,      quantize_s8_x86,     quantize_s4_x86,
                                        dequantize_s8_x86,  dequantize_s4_x86,  copy_streaming_x86};

}  // namespace attnkit
