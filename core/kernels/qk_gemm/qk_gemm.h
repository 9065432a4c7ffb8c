// attnkit kernel family qk_gemm: attention scores C = alpha * Q * K^T against a KV-cache block.
// Two forms: "direct" reads the cache rows in their stored dtype (decode: few query rows, K read once
// for all query heads sharing a kv head); "packed" multiplies by a K block first unpacked to fp32
// panels (prefill: the pack is amortized over a block of query rows and the micro-kernel runs at FMA peak).
#pragma once
#include <cstddef>
#include <cstdint>

namespace attnkit {

// Width of one packed panel: 16 keys. Fixed for every ISA so packing is ISA-independent.
constexpr size_t kQkPanelKeys = 16;

// Direct form. For i < M, j < N:
//   C[i*ldc + j] = alpha * sum_{d<H} Q[i*ldq + d] * k(j, d)
// k(j, d) is element d of cache row j, the row starting at (const uint8_t*)K + j*ldk (ldk in BYTES):
//   f32/f16/bf16: the stored value as float; s8: the int8 value; s4: the nibble of byte d/2 (low nibble
//   for even d) minus 8. Quantization scales are not applied here: per-tensor scales are folded into
//   alpha and per-channel scales into Q by the caller, so the integer-to-float step is exact.
// H is a multiple of 8. f32/f16/bf16: fp32 accumulation; the summation order may differ per ISA.
// s8/s4: the exact integer limb products of limb_query.h on scalar, AVX512-VNNI, AVX2 with AVX-VNNI, NEON with
// sdot and wasm128 (the same bits on all; rows it cannot hold take the fp32 path); fp32 conversion on AVX2
// without AVX-VNNI, AVX512 without VNNI and NEON without sdot. No reads outside [0, H) of any row.
using QkGemmFn = void (*)(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                          size_t ldk, float alpha, float* C, size_t ldc);

// Packing: converts N cache rows (same element rule as above) into ceil(N/16) panels; panel p holds
// keys [16p, 16p+16) as H rows of 16 floats: panel[p*H*16 + d*16 + t] = k(16p + t, d); keys >= N are 0.
using QkPackFn = void (*)(size_t N, size_t H, const void* K, size_t ldk, float* panels);

// Packed form: C[i*ldc + j] = alpha * sum_d Q[i*ldq + d] * panels(j, d), i < M, j < N.
using QkPackedGemmFn = void (*)(size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                                const float* panels, float alpha, float* C, size_t ldc);

// Approximate int8 per-tensor QK (opt-in, AVX512-VNNI): the query row is quantized to int8 before the
// dot product, which changes the numeric contract. nullptr where the ISA has no such kernel.
using QkGemmApproxFn = QkGemmFn;

struct QkGemmKernels {
  QkGemmFn f32, f16, bf16, s8, s4;
  QkPackFn pack_f32, pack_f16, pack_bf16, pack_s8, pack_s4;
  QkPackedGemmFn packed;
  QkGemmApproxFn s8_approx_vnni;
  // f16 rows known to hold no inf or NaN (cache_elem::F16Finite): f16's bits on such rows, anything on others.
  // The f16 kernels themselves where the ISA converts every pattern at the same cost.
  QkGemmFn f16_finite;
  QkPackFn pack_f16_finite;
  // From this many query rows on, a tile scores an int8/int4 cache by pack_s8/pack_s4 and packed instead of s8/s4:
  // packing a block costs what 16-32 rows of fp32 products do, so it pays only beyond the rows where the direct
  // kernel keeps pace (measured per table: dispatch.cc).
  int quantized_packed_min_rows = 12;
};

}  // namespace attnkit
