// attnkit kernel family gemm_u8x8: the exact integer projection of QAttention, uint8 activations times
// an int8 or uint8 weight with zero points, accumulated in int32 (ORT's QGEMM contract).
// Every ISA returns the same bits: the result is an exact integer, not a rounded float.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnkit {

// For m < M, n < N:
//   C[m*ldc + n] = sum_{k<K} (A[m*lda + k] - a_zp) * (B[k*ldb + n] - b_zp[n])
// A: uint8, row-major. B: int8 when b_signed, else uint8; row-major K x N (ORT's weight layout, so a
// column slice is B + n0 with the same ldb). b_zp: N values in B's dtype range (the caller expands a
// per-tensor zero point). a_zp in [0, 255].
// Arithmetic is int32 modulo 2^32 (no saturation anywhere, in particular not AVX2 maddubs'), so C is
// exact whenever the true sum fits int32, which K <= 33025 guarantees (255 * 255 * K < 2^31).
// workspace: at least workspace_bytes(M, N, K) bytes, any alignment; one per concurrent caller.
using GemmU8X8Fn = void (*)(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                            const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                            size_t ldc, void* workspace);
using GemmU8X8WorkspaceFn = size_t (*)(size_t M, size_t N, size_t K);

// Largest reduction length for which the int32 result is exact for every input.
constexpr size_t kGemmU8X8MaxK = 33025;

struct GemmU8X8Kernels {
  GemmU8X8Fn gemm;
  GemmU8X8WorkspaceFn workspace_bytes;
  const char* variant;  // e.g. "avx512vnni", "avx2-madd16", "neon-sdot": which instruction path runs
};

}  // namespace attnkit
