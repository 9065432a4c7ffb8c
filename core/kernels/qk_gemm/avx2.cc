// attnkit qk_gemm kernels, avx2: the register-blocked loops of x86_gemm_impl.h instantiated with the
// Avx2 traits. Exact fp32 query times the cache converted in registers (no query quantization).
#include "qk_gemm/x86_gemm_impl.h"
#include "qk_gemm/x86_traits_avx2.h"

namespace attnkit {

extern const QkGemmKernels kQkGemm_avx2;
const QkGemmKernels kQkGemm_avx2 = {
    qk_direct<Avx2, F32>, qk_direct<Avx2, F16>, qk_direct<Avx2, BF16>, qk_direct<Avx2, S8>,
    qk_direct<Avx2, S4>,  pack_x86<F32>,        pack_x86<F16>,        pack_x86<BF16>,
    pack_x86<S8>,         pack_x86<S4>,         qk_packed<Avx2>,      nullptr,
    qk_direct<Avx2, F16>, pack_x86<F16>};

}  // namespace attnkit
