// attnkit gemm_u8x8, AVX512-VNNI: vpdpbusd multiplies u8 x s8 and adds groups of 4 into int32 with no
// intermediate saturation, 64 products per instruction. u8 weights are shifted to s8 while packing
// (see gemm_u8x8_impl.h); zero points are corrected with row and column sums.
#include <immintrin.h>

#include "gemm_u8x8/gemm_u8x8_impl.h"

namespace attnkit {
namespace {

constexpr size_t kMr = 8, kNr = 16;

// strip is [K/4][16][4] int8: one zmm per k group; 8 rows share each load.
void micro_vnni512(const uint8_t* const rows[kMr], size_t kgroups, const int8_t* strip, int32_t* tile) {
  __m512i acc[kMr];
  for (size_t r = 0; r < kMr; ++r) acc[r] = _mm512_setzero_si512();
  for (size_t g = 0; g < kgroups; ++g) {
    const __m512i b = _mm512_loadu_si512(strip + g * 64);
    for (size_t r = 0; r < kMr; ++r) {
      int32_t quad;
      std::memcpy(&quad, rows[r] + 4 * g, sizeof(quad));
      acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(quad), b);
    }
  }
  for (size_t r = 0; r < kMr; ++r) _mm512_store_si512(tile + r * kNr, acc[r]);
}

void gemm_u8x8_avx512vnni(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                          const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                          size_t ldc, void* workspace) {
  gemm_dot4<kMr, kNr, false>(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc, workspace, micro_vnni512);
}

size_t workspace_avx512vnni(size_t M, size_t N, size_t K) { return workspace_dot4(M, K, kNr); }

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_avx512vnni = {gemm_u8x8_avx512vnni, workspace_avx512vnni,
                                                     "avx512vnni"};

}  // namespace attnkit
