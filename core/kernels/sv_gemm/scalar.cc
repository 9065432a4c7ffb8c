// attnkit sv_gemm kernels, scalar: O = beta*O + P*V in axpy form (one V row at a time added into every
// output row), the order the SIMD files follow, with the V element converted on the fly.
#include "qk_gemm/cache_elem.h"
#include "sv_gemm/sv_gemm.h"

namespace attnkit {
namespace {

template <typename Elem>
void sv(size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V, size_t ldv,
        float* O, size_t ldo, bool accumulate) {
  const uint8_t* base = static_cast<const uint8_t*>(V);
  for (size_t i = 0; i < M; ++i) {
    float* o = O + i * ldo;
    if (!accumulate)
      for (size_t d = 0; d < H; ++d) o[d] = 0.0f;
    const float* p = P + i * ldp;
    for (size_t j = 0; j < N; ++j) {
      const uint8_t* row = base + j * ldv;
      const float pj = p[j];
      for (size_t d = 0; d < H; ++d) o[d] += pj * Elem::at(row, d);
    }
  }
}

}  // namespace

extern const SvGemmKernels kSvGemm_scalar;
const SvGemmKernels kSvGemm_scalar = {sv<cache_elem::F32>, sv<cache_elem::F16>,
                                      sv<cache_elem::BF16>, sv<cache_elem::S8>,
                                      sv<cache_elem::S4>, sv<cache_elem::F16>,
                                      nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace attnkit
