// attnkit: double-precision reference loops for every kernel family (the oracle of the kernel tests
// and benches). Element and quantization rules are the ones in the family headers; these loops are
// written for obviousness, not speed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace attnkit {
namespace ref {

// The stored dtype of a KV-cache row, as the qk_gemm / sv_gemm element rule reads it.
enum class CacheElem { kF32, kF16, kBF16, kS8, kS4 };
const char* cache_elem_name(CacheElem e);
// Bytes of one cache row of H elements.
size_t cache_row_bytes(CacheElem e, size_t H);
// Element d of a cache row as a double (no scale; s4 is nibble - 8).
double cache_value(CacheElem e, const void* row, size_t d);

// C[i*ldc+j] = alpha * sum_d Q[i,d] * k(j,d), in double.
void qk_gemm(CacheElem e, size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
             size_t ldk, double alpha, double* C, size_t ldc);
// Same sum over |Q| * |k| (the error-bound scale of a dot product).
void qk_gemm_abs(CacheElem e, size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                 const void* K, size_t ldk, double* C, size_t ldc);
// The packed panels layout of qk_gemm.h, as floats.
std::vector<float> qk_pack(CacheElem e, size_t N, size_t H, const void* K, size_t ldk);

// O[i,d] = O0[i,d] (if accumulate) + sum_j P[i,j] * v(j,d), in double; O0 is read from O.
void sv_gemm(CacheElem e, size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V,
             size_t ldv, double* O, size_t ldo, bool accumulate);

// Quantize-on-write: q = clamp(rint(float(x*inv)), lo, hi) with NaN -> hi (as ORT), the product rounded to
// float first (the contract multiplies in fp32).
int32_t quantize(float x, float inv_scale, int32_t lo, int32_t hi);
void quantize_s8(const float* x, const float* inv_scale, size_t n, int8_t* out);
void quantize_s4(const float* x, const float* inv_scale, size_t n, uint8_t* out);

// Softmax pieces in double.
double exp_sum(const float* x, size_t n, double max, double* out);
double softcap(double x, double cap);

// Rotary in double (the kernels' fp32 mul-mul-sub order is checked across ISAs separately).
void rotary(const float* x, const float* c, const float* s, size_t rotary_dim, bool interleaved,
            double* y);

}  // namespace ref
}  // namespace attnkit
