// attnkit gemm_u8x8, scalar: the portable exact projection and every ISA's fallback.
// Subtract-then-multiply straight from ORT's row-major weight (no packing); uint32 accumulation makes
// the int32 wrap-around defined, so the result is exact whenever the true sum fits. No packed form:
// the driver calls gemm per column block.
#include "gemm_u8x8/gemm_u8x8.h"

namespace attnkit {
namespace {

template <typename BElem>
void gemm_rows(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
               const BElem* B, size_t ldb, const int32_t* b_zp, int32_t* C, size_t ldc) {
  for (size_t m = 0; m < M; ++m) {
    int32_t* c = C + m * ldc;
    for (size_t n = 0; n < N; ++n) c[n] = 0;
    for (size_t k = 0; k < K; ++k) {
      const uint32_t a = uint32_t(int32_t(A[m * lda + k]) - a_zp);
      const BElem* b = B + k * ldb;
      for (size_t n = 0; n < N; ++n)
        c[n] = int32_t(uint32_t(c[n]) + a * uint32_t(int32_t(b[n]) - b_zp[n]));
    }
  }
}

void gemm_u8x8_scalar(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                      const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                      size_t ldc, void* workspace) {
  if (b_signed)
    gemm_rows(M, N, K, A, lda, a_zp, static_cast<const int8_t*>(B), ldb, b_zp, C, ldc);
  else
    gemm_rows(M, N, K, A, lda, a_zp, static_cast<const uint8_t*>(B), ldb, b_zp, C, ldc);
}

size_t workspace_scalar(size_t, size_t, size_t) { return 0; }

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_scalar = {gemm_u8x8_scalar, workspace_scalar, "scalar", 0, nullptr,
                                               nullptr,          nullptr,          nullptr,  nullptr};

}  // namespace attnkit
