// attnkit kernel family sv_gemm: probabilities times a V-cache block, O = beta*O + P * V.
// V rows are read in their stored dtype and converted on the fly (fused dequantize-and-accumulate); only
// where the table has widen_* kernels does a prompt convert each V block once into fp32 scratch.
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnkit {

// For i < M, d < H:
//   O[i*ldo + d] = (accumulate ? O[i*ldo + d] : 0) + sum_{j<N} P[i*ldp + j] * v(j, d)
// v(j, d) follows the qk_gemm element rule (f32/f16/bf16 value, s8 value, s4 nibble - 8; no scales:
// the caller applies V scales to the finished output row). H is a multiple of 8. fp32 accumulation.
// N may be 0 (then O is zeroed or left as is).
using SvGemmFn = void (*)(size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V,
                          size_t ldv, float* O, size_t ldo, bool accumulate);

// out[j*H + d] = v(j, d) for j < N, d < H: rows of a V block in fp32, exactly (the element rule above).
using SvWidenFn = void (*)(size_t N, size_t H, const void* V, size_t ldv, float* out);

struct SvGemmKernels {
  SvGemmFn f32, f16, bf16, s8, s4;
  SvGemmFn f16_finite;  // f16 rows known to hold no inf or NaN, as QkGemmKernels::f16_finite
  // Set where a prompt's SV over a block converted once (then f32) beats the fused kernels, which convert the
  // block again in every call: on SIMD128 the conversion costs as much as a 4-row tile's multiply-adds, and on the
  // causal diagonal each call has only 12 rows. Null where conversion rides in spare slots (x86, scalar, NEON).
  SvWidenFn widen_f16, widen_bf16, widen_s8, widen_s4, widen_f16_finite;
};

// When the SIMD kernels stream V in key order instead of walking it in column tiles: a decode step (at most
// this many rows: the query heads of one KV head) over a block of at least this many bytes, which it reads
// once, usually from DRAM (512-key blocks since split-KV decoding). The x86 direct QK prefetches ahead from
// the same size on. Column tiles re-read each row once per tile, a strided pattern that read from DRAM at
// about half the rate of one forward pass (measured figures at each ISA's sv_stream).
constexpr size_t kSvStreamMaxRows = 4;
constexpr size_t kStreamMinBytes = 64 << 10;
inline bool sv_streams(size_t M, size_t N, size_t ldv) {
  return M <= kSvStreamMaxRows && N * ldv >= kStreamMinBytes;
}

}  // namespace attnkit
