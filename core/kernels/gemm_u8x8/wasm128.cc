// attnkit gemm_u8x8, WebAssembly SIMD128: i32x4.dot_i16x8_s on int16 operands with the zero points
// already subtracted (|a - za|, |b - zb| <= 255, so each pair sum is exact in int32). Plain SIMD128
// only: relaxed SIMD's i8 dot is unusable with this toolchain (notes/toolchain.md).
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>
#endif

#include "gemm_u8x8/gemm_u8x8_impl.h"

namespace attnkit {
namespace {

constexpr size_t kMr = 4, kNr = 16;

// strip is [K/2][16][2] int16: four v128 of 4 columns x 2 k per k pair.
void micro_dot16(const int16_t* const rows[kMr], size_t kgroups, const int16_t* strip, int32_t* tile) {
  v128_t acc[kMr][4];
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) acc[r][j] = wasm_i32x4_splat(0);
  for (size_t g = 0; g < kgroups; ++g) {
    v128_t b[4];
    for (size_t j = 0; j < 4; ++j) b[j] = wasm_v128_load(strip + g * 32 + j * 8);
    for (size_t r = 0; r < kMr; ++r) {
      int32_t pair;
      std::memcpy(&pair, rows[r] + 2 * g, sizeof(pair));
      const v128_t a = wasm_i32x4_splat(pair);
      for (size_t j = 0; j < 4; ++j) acc[r][j] = wasm_i32x4_add(acc[r][j], wasm_i32x4_dot_i16x8(a, b[j]));
    }
  }
  for (size_t r = 0; r < kMr; ++r)
    for (size_t j = 0; j < 4; ++j) wasm_v128_store(tile + r * kNr + j * 4, acc[r][j]);
}

void gemm_u8x8_wasm128(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                       const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                       size_t ldc, void* workspace) {
  gemm_i16<kMr, kNr, 2>(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc, workspace, micro_dot16);
}

size_t workspace_wasm128(size_t M, size_t N, size_t K) { return workspace_i16(M, K, kNr, 2); }

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_wasm128 = {gemm_u8x8_wasm128, workspace_wasm128, "wasm128-dot16"};

}  // namespace attnkit
