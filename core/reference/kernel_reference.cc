// attnkit: double-precision reference loops for the kernel families (see kernel_reference.h).
// Storage conversion uses common/half.h, the same definition every kernel must match bit for bit.
#include "kernel_reference.h"

#include <cmath>

#include "common/half.h"

namespace attnkit {
namespace ref {

const char* cache_elem_name(CacheElem e) {
  switch (e) {
    case CacheElem::kF32: return "f32";
    case CacheElem::kF16: return "f16";
    case CacheElem::kBF16: return "bf16";
    case CacheElem::kS8: return "s8";
    case CacheElem::kS4: return "s4";
  }
  return "?";
}

size_t cache_row_bytes(CacheElem e, size_t H) {
  switch (e) {
    case CacheElem::kF32: return 4 * H;
    case CacheElem::kF16:
    case CacheElem::kBF16: return 2 * H;
    case CacheElem::kS8: return H;
    case CacheElem::kS4: return (H + 1) / 2;
  }
  return 0;
}

double cache_value(CacheElem e, const void* row, size_t d) {
  const uint8_t* b = static_cast<const uint8_t*>(row);
  switch (e) {
    case CacheElem::kF32: return static_cast<const float*>(row)[d];
    case CacheElem::kF16: return f16_to_float(static_cast<const uint16_t*>(row)[d]);
    case CacheElem::kBF16: return bf16_to_float(static_cast<const uint16_t*>(row)[d]);
    case CacheElem::kS8: return static_cast<const int8_t*>(row)[d];
    case CacheElem::kS4: return static_cast<int>((d & 1) ? (b[d / 2] >> 4) : (b[d / 2] & 0xf)) - 8;
  }
  return 0;
}

void qk_gemm(CacheElem e, size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
             size_t ldk, double alpha, double* C, size_t ldc) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      const uint8_t* row = static_cast<const uint8_t*>(K) + j * ldk;
      double acc = 0;
      for (size_t d = 0; d < H; ++d) acc += static_cast<double>(Q[i * ldq + d]) * cache_value(e, row, d);
      C[i * ldc + j] = alpha * acc;
    }
}

void qk_gemm_abs(CacheElem e, size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                 const void* K, size_t ldk, double* C, size_t ldc) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      const uint8_t* row = static_cast<const uint8_t*>(K) + j * ldk;
      double acc = 0;
      for (size_t d = 0; d < H; ++d)
        acc += std::fabs(static_cast<double>(Q[i * ldq + d]) * cache_value(e, row, d));
      C[i * ldc + j] = acc;
    }
}

std::vector<float> qk_pack(CacheElem e, size_t N, size_t H, const void* K, size_t ldk) {
  const size_t panels = (N + 15) / 16;
  std::vector<float> out(panels * H * 16, 0.0f);
  for (size_t j = 0; j < N; ++j) {
    const uint8_t* row = static_cast<const uint8_t*>(K) + j * ldk;
    for (size_t d = 0; d < H; ++d)
      out[(j / 16) * H * 16 + d * 16 + j % 16] = static_cast<float>(cache_value(e, row, d));
  }
  return out;
}

void sv_gemm(CacheElem e, size_t M, size_t N, size_t H, const float* P, size_t ldp, const void* V,
             size_t ldv, double* O, size_t ldo, bool accumulate) {
  for (size_t i = 0; i < M; ++i)
    for (size_t d = 0; d < H; ++d) {
      double acc = accumulate ? O[i * ldo + d] : 0.0;
      for (size_t j = 0; j < N; ++j)
        acc += static_cast<double>(P[i * ldp + j]) *
               cache_value(e, static_cast<const uint8_t*>(V) + j * ldv, d);
      O[i * ldo + d] = acc;
    }
}

int32_t quantize(float x, float inv_scale, int32_t lo, int32_t hi) {
  const float v = x * inv_scale;  // the fp32 product is part of the contract
  if (std::isnan(v)) return hi;  // as ORT's std::max(lo, std::min(hi, q))
  const double r = std::nearbyint(static_cast<double>(v));  // default mode: half to even
  if (r < lo) return lo;
  if (r > hi) return hi;
  return static_cast<int32_t>(r);
}

void quantize_s8(const float* x, const float* inv_scale, size_t n, int8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(quantize(x[i], inv_scale[i], -128, 127));
}

void quantize_s4(const float* x, const float* inv_scale, size_t n, uint8_t* out) {
  for (size_t k = 0; 2 * k + 1 < n; ++k) {
    const int32_t lo = quantize(x[2 * k], inv_scale[2 * k], -8, 7) + 8;
    const int32_t hi = quantize(x[2 * k + 1], inv_scale[2 * k + 1], -8, 7) + 8;
    out[k] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

double exp_sum(const float* x, size_t n, double max, double* out) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = std::exp(static_cast<double>(x[i]) - max);
    sum += out[i];
  }
  return sum;
}

double softcap(double x, double cap) { return cap * std::tanh(x / cap); }

void rotary(const float* x, const float* c, const float* s, size_t rotary_dim, bool interleaved,
            double* y) {
  const size_t half = rotary_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const size_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
    const double a = x[ia], b = x[ib];
    y[ia] = a * c[i] - b * s[i];
    y[ib] = b * c[i] + a * s[i];
  }
}

}  // namespace ref
}  // namespace attnkit
