// attnkit qk_gemm kernels, avx512: the register-blocked loops of x86_gemm_impl.h instantiated with the
// Avx512 traits. Exact fp32 query times the cache converted in registers (no query quantization).
#include "qk_gemm/x86_gemm_impl.h"
#include "qk_gemm/x86_traits_avx512.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_avx512;
const QkGemmKernels kQkGemm_avx512 = {
    qk_direct<Avx512, F32>, qk_direct<Avx512, F16>, qk_direct<Avx512, BF16>, qk_direct<Avx512, S8>,
    qk_direct<Avx512, S4>,  pack_x86<F32>,        pack_x86<F16>,        pack_x86<BF16>,
    pack_x86<S8>,         pack_x86<S4>,         qk_packed<Avx512>,      nullptr,
    qk_direct<Avx512, F16>, pack_x86<F16>};

}  // namespace attnkit
