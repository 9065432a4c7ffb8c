// attnkit qk_gemm with AVX512-VNNI: the exact int8/int4 limb QK (same bits as every other ISA that has
// it), with keys in lanes on vpdpbusd for 2+ query rows and rows of one 64-byte chunk (x86_key_lanes.h) and with
// per-key reductions for other single rows (vpdpbusd on the query's byte digits, x86_row_digits.h), and the opt-in
// approximate int8 per-tensor QK.
// The approximate kernel quantizes the query row symmetrically (s = amax/127, q_i = rint(q / s)), so
// each score moves by at most alpha * (s/2) * sum_d |k_d| (about 0.4% of amax*sum|k|, the order of
// ORT's approximate path). vpdpbusd wants unsigned K: bytes are offset by 128 and the offset removed
// with the query's integer sum, sum (k+128) q = sum k q + 128 sum q.
#include <algorithm>
#include <cmath>
#include <vector>

#include "qk_gemm/x86_gemm_impl.h"
#include "qk_gemm/x86_key_lanes.h"
#include "qk_gemm/x86_row_digits.h"
#include "qk_gemm/x86_traits_avx512.h"
#include "x86_vnni.h"

namespace attnkit {
namespace {

constexpr size_t kChunk = 64;  // bytes per vpdpbusd step
constexpr int kRowsPerBlock = 4;
constexpr int kKeysPerTile = 4;

struct QuantizedQuery {
  const int8_t* bytes;  // zero-padded to a multiple of kChunk
  float scale;          // s = amax / 127 (0 for an all-zero row)
  int32_t sum;          // sum of the quantized values
};

template <int MB, int R>
inline void tile(size_t H, const QuantizedQuery* q, const uint8_t* K, size_t ldk, float alpha,
                 float* const* c) {
  __m512i acc[MB][R];
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_si512();
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t b = 0; b < H; b += kChunk) {
    const size_t n = std::min(kChunk, H - b);
    const __mmask64 m = n == kChunk ? ~__mmask64{0} : ((__mmask64{1} << n) - 1);
    for (int r = 0; r < R; ++r) {
      // Padding bytes become 128 after the offset but meet zero query bytes.
      const __m512i k = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, K + r * ldk + b), offset);
      for (int i = 0; i < MB; ++i)
        acc[i][r] = _mm512_dpbusd_epi32(acc[i][r], k, _mm512_loadu_si512(q[i].bytes + b));
    }
  }
  for (int i = 0; i < MB; ++i) {
    __m512 pad[8];
    for (int r = 0; r < 8; ++r) pad[r] = r < R ? _mm512_cvtepi32_ps(acc[i][r]) : _mm512_setzero_ps();
    // Integer partial sums stay below 2^24, so the float tree is exact.
    const __m256 dot = _mm256_sub_ps(Avx512::reduce8(pad), _mm256_set1_ps(128.0f * static_cast<float>(q[i].sum)));
    alignas(32) float out[8];
    _mm256_store_ps(out, _mm256_mul_ps(dot, _mm256_set1_ps(alpha * q[i].scale)));
    for (int r = 0; r < R; ++r) c[i][r] = out[r];
  }
}

template <int MB>
void rows(size_t N, size_t H, const QuantizedQuery* q, const uint8_t* K, size_t ldk, float alpha,
          float* const* c_rows) {
  float* c[MB];
  size_t j = 0;
  for (; j + kKeysPerTile <= N; j += kKeysPerTile) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    tile<MB, kKeysPerTile>(H, q, K + j * ldk, ldk, alpha, c);
  }
  for (; j < N; ++j) {
    for (int i = 0; i < MB; ++i) c[i] = c_rows[i] + j;
    tile<MB, 1>(H, q, K + j * ldk, ldk, alpha, c);
  }
}

}  // namespace

// One query row (one query head per KV head, flash decoding) keeps the per-key reductions on the three byte digits
// (x86_row_digits.h), except on rows of exactly one 64-byte chunk (int8 H=64, int4 H=128), where the 32-key
// lane tiles cost less. 2048 keys: int8 H=64 2.76-2.81 -> 2.61 us, int4 H=128 3.88-3.92 -> 3.57; at two chunks or
// part of one the reductions stay ahead (int8 H=128 4.12 against 4.79; int4 H=64 2.70 against 3.83, with the int16
// limbs that x86_row_digits.h's pairs of keys have since replaced). The byte digits against int16 limbs, side by
// side, int8 H=128: 512 keys 1.09 -> 0.99 us, 2048 keys 4.05 -> 3.72 (fastest of 12); at H=64 they lose to the lane
// tiles (0.86 against 0.56 us at 512 keys).
void qk_gemm_s8_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                           size_t ldk, float alpha, float* C, size_t ldc) {
  if (M == 1 && H != kLaneChunk) return qk_row_digits<false, qk_direct<Avx512, S8>>(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  qk_key_lanes<false, qk_direct<Avx512, S8>>(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

void qk_gemm_s4_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq, const void* K,
                           size_t ldk, float alpha, float* C, size_t ldc) {
  if (M == 1 && H / 2 != kLaneChunk)
    return qk_row_digits<true, qk_direct<Avx512, S4>>(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
  qk_key_lanes<true, qk_direct<Avx512, S4>>(M, N, H, Q, ldq, K, ldk, alpha, C, ldc);
}

void qk_gemm_s8_approx_avx512vnni(size_t M, size_t N, size_t H, const float* Q, size_t ldq,
                                  const void* K, size_t ldk, float alpha, float* C, size_t ldc) {
  const size_t Hp = (H + kChunk - 1) / kChunk * kChunk;
  std::vector<int8_t> qbytes(kRowsPerBlock * Hp);
  const uint8_t* base = static_cast<const uint8_t*>(K);
  for (size_t i0 = 0; i0 < M; i0 += kRowsPerBlock) {
    const int mb = static_cast<int>(std::min<size_t>(kRowsPerBlock, M - i0));
    QuantizedQuery q[kRowsPerBlock];
    float* c[kRowsPerBlock];
    for (int i = 0; i < mb; ++i) {
      const float* row = Q + (i0 + i) * ldq;
      float amax = 0.0f;
      for (size_t d = 0; d < H; ++d) amax = std::max(amax, std::fabs(row[d]));
      int8_t* dst = qbytes.data() + i * Hp;
      std::fill(dst, dst + Hp, int8_t{0});
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (size_t d = 0; d < H; ++d) {
        const int32_t v = static_cast<int32_t>(std::nearbyint(std::min(127.0f, std::max(-127.0f, row[d] * inv))));
        dst[d] = static_cast<int8_t>(v);
        sum += v;
      }
      q[i] = {dst, amax / 127.0f, sum};
      c[i] = C + (i0 + i) * ldc;
    }
    switch (mb) {
      case 1: rows<1>(N, H, q, base, ldk, alpha, c); break;
      case 2: rows<2>(N, H, q, base, ldk, alpha, c); break;
      case 3: rows<3>(N, H, q, base, ldk, alpha, c); break;
      default: rows<4>(N, H, q, base, ldk, alpha, c); break;
    }
  }
}

}  // namespace attnkit
