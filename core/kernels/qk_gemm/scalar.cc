// attnkit qk_gemm kernels, scalar: plain loops over the contract in qk_gemm.h. The portable fallback
// (and the tail handler shape the SIMD files follow); fp32 accumulation in index order, and the exact
// integer limb sums of limb_query.h for int8/int4 caches.
#include "qk_gemm/cache_elem.h"
#include "qk_gemm/limb_query.h"
#include "qk_gemm/qk_gemm.h"

namespace attnkit {
namespace {

template <typename Elem>
void direct(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K, size_t ldk,
            float alpha, float* C, size_t ldc) {
  const uint8_t* base = static_cast<const uint8_t*>(K);
  for (size_t j = 0; j < N; ++j) {
    const uint8_t* row = base + j * ldk;
    for (size_t i = 0; i < M; ++i) {
      const float* q = Q + i * ldq;
      float acc = 0.0f;
      for (size_t d = 0; d < H; ++d) acc += q[d] * Elem::at(row, d);
      C[i * ldc + j] = alpha * acc;
    }
  }
}

struct ScalarLimbs {
  static constexpr int kMaxRows = 4;
  static constexpr size_t kStep = 1;
  static size_t prefetch_rows(size_t, size_t) { return 0; }  // no prefetch to give
  static void prefetch(const uint8_t*, size_t) {}
  static constexpr int keys_for_rows(int) { return 1; }
  template <int MB, int R, bool S4>
  static void tile(size_t H, const LimbRow* q, const uint8_t* K, size_t ldk, float* const* c) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = K + r * ldk;
      for (int i = 0; i < MB; ++i) {
        int32_t h = 0, l = 0;
        if (S4) {
          for (size_t b = 0; b < H / 2; ++b) {
            const int32_t even = row[b] & 15, odd = row[b] >> 4;
            h += q[i].hi[b] * even + q[i].hi[q[i].odd + b] * odd;
            l += q[i].lo[b] * even + q[i].lo[q[i].odd + b] * odd;
          }
        } else {
          for (size_t d = 0; d < H; ++d) {
            const int32_t k = static_cast<int8_t>(row[d]);
            h += q[i].hi[d] * k;
            l += q[i].lo[d] * k;
          }
        }
        c[i][r] = combine_limbs(h, l, q[i], S4);
      }
    }
  }
};

template <typename Elem>
void pack(size_t N, size_t H, const void* K, size_t ldk, float* panels) {
  const uint8_t* base = static_cast<const uint8_t*>(K);
  const size_t panel_count = (N + kQkPanelKeys - 1) / kQkPanelKeys;
  for (size_t p = 0; p < panel_count; ++p) {
    float* panel = panels + p * H * kQkPanelKeys;
    for (size_t t = 0; t < kQkPanelKeys; ++t) {
      const size_t j = p * kQkPanelKeys + t;
      if (j < N) {
        const uint8_t* row = base + j * ldk;
        for (size_t d = 0; d < H; ++d) panel[d * kQkPanelKeys + t] = Elem::at(row, d);
      } else {
        for (size_t d = 0; d < H; ++d) panel[d * kQkPanelKeys + t] = 0.0f;
      }
    }
  }
}

void packed(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const float* panels,
            float alpha, float* C, size_t ldc) {
  for (size_t i = 0; i < M; ++i) {
    const float* q = Q + i * ldq;
    for (size_t j = 0; j < N; ++j) {
      const float* panel = panels + (j / kQkPanelKeys) * H * kQkPanelKeys + j % kQkPanelKeys;
      float acc = 0.0f;
      for (size_t d = 0; d < H; ++d) acc += q[d] * panel[d * kQkPanelKeys];
      C[i * ldc + j] = alpha * acc;
    }
  }
}

}  // namespace

extern const QkGemmKernels kQkGemm_scalar;
const QkGemmKernels kQkGemm_scalar = {
    direct<cache_elem::F32>, direct<cache_elem::F16>, direct<cache_elem::BF16>,
    qk_limbs<ScalarLimbs, false, direct<cache_elem::S8>>,
    qk_limbs<ScalarLimbs, true, direct<cache_elem::S4>>,  pack<cache_elem::F32>,
    pack<cache_elem::F16>,   pack<cache_elem::BF16>,  pack<cache_elem::S8>,
    pack<cache_elem::S4>,    packed,                  nullptr,
    direct<cache_elem::F16>, pack<cache_elem::F16>};

}  // namespace attnkit
