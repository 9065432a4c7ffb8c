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
// workspace: at least workspace_bytes(M, N, K) bytes, any alignment; one per concurrent caller. Up to
// kGemmDirectMaxRows rows (a decode step) B is streamed once, unpacked, and the workspace is not used (may be null).
// Read in address order, B streams fastest when it is whole rows (N == ldb): a caller splitting the work for
// threads should split K (partial sums add up exactly), not the columns.
using GemmU8X8Fn = void (*)(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp,
                            const void* B, size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C,
                            size_t ldc, void* workspace);
using GemmU8X8WorkspaceFn = size_t (*)(size_t M, size_t N, size_t K);

// The few-rows form (above): a decode step's batch x sequence rows.
constexpr size_t kGemmDirectMaxRows = 4;

// Largest reduction length for which the int32 result is exact for every input.
constexpr size_t kGemmU8X8MaxK = 33025;

// Packed form, for a caller that splits one product over threads: A is packed once, B once (by column
// ranges, so its packing can be split too), then column ranges of C are computed from the two packs.
// Same bits as `gemm` (without dequant). Packed buffers are 64-byte aligned, a_bytes(M, K) and b_bytes(K, N) long; column
// ranges [n0, n1) start at a multiple of column_granule. Columns of C outside [n0, n1) are not written.
using GemmU8X8PackABytesFn = size_t (*)(size_t M, size_t K);
using GemmU8X8PackBBytesFn = size_t (*)(size_t K, size_t N);
using GemmU8X8PackAFn = void (*)(size_t M, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, void* packed_a);
using GemmU8X8PackBFn = void (*)(size_t K, size_t N, size_t n0, size_t n1, const void* B, size_t ldb,
                                 bool b_signed, const int32_t* b_zp, void* packed_b);
// Optional epilogue of compute: C[m, n] = float(acc) * scale[n] + bias[n] (a float multiply, then a float
// add, as QAttention dequantizes), written as float into C's 4-byte slots; scale/bias hold N values.
struct GemmU8X8Dequant {
  const float* scale;
  const float* bias;
};
using GemmU8X8ComputeFn = void (*)(size_t M, size_t N, size_t K, size_t n0, size_t n1, const void* packed_a,
                                   int32_t a_zp, const void* packed_b, int32_t* C, size_t ldc,
                                   const GemmU8X8Dequant* dequant);

struct GemmU8X8Kernels {
  GemmU8X8Fn gemm;
  GemmU8X8WorkspaceFn workspace_bytes;
  const char* variant;  // e.g. "avx512vnni", "avx2-madd16", "neon-sdot": which instruction path runs
  // The packed form; column_granule == 0 (and null functions) where the variant has none (scalar).
  size_t column_granule;
  GemmU8X8PackABytesFn packed_a_bytes;
  GemmU8X8PackBBytesFn packed_b_bytes;
  GemmU8X8PackAFn pack_a;
  GemmU8X8PackBFn pack_b;
  GemmU8X8ComputeFn compute;
};

}  // namespace attnkit
