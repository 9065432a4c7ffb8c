// attnkit gemm_u8x8, AVX2 (+ AVX-VNNI where the CPU has it).
// AVX2 has no exact u8 x s8 product: maddubs saturates its int16 pair sums (255*-128*2 < -32768), so
// this path widens both operands to int16 (zero points already subtracted) and uses madd_epi16, whose
// int32 pair sums are exact. AVX-VNNI (vpdpbusd on ymm) multiplies u8 x s8 into int32 directly.
#include <immintrin.h>

#include "gemm_u8x8/gemm_u8x8_impl.h"
#include "gemm_u8x8/x86_direct_impl.h"
#include "unroll.h"

namespace attnkit {
namespace {

constexpr size_t kMr = 4, kNr = 16;
// The int16 path's tile is taller: 12 accumulators, the strip's two vectors and two temporaries are
// exactly the 16 ymm registers, and each strip load then feeds 6 rows instead of 4.
constexpr size_t kMaddRows = 6;

// acc0 += madd(pair, b0); acc1 += madd(pair, b1), pair broadcast from memory. GCC 12 compiles the
// intrinsic form into a fresh destination plus a register copy per add (8 copies per 8 madds in a
// 4-row tile, dispatch-bound on Zen 3); the asm keeps each accumulator in place.
inline void madd_pair_into(__m256i& acc0, __m256i& acc1, const int16_t* pair, __m256i b0, __m256i b1) {
#if defined(__GNUC__) && !defined(__clang__)
  __m256i a, t;
  asm("vpbroadcastd %[p], %[a]\n\t"
      "vpmaddwd %[b0], %[a], %[t]\n\t"
      "vpaddd %[t], %[c0], %[c0]\n\t"
      "vpmaddwd %[b1], %[a], %[a]\n\t"
      "vpaddd %[a], %[c1], %[c1]"
      : [c0] "+x"(acc0), [c1] "+x"(acc1), [a] "=&x"(a), [t] "=&x"(t)
      : [p] "m"(*reinterpret_cast<const int32_t*>(pair)), [b0] "x"(b0), [b1] "x"(b1));
#else
  int32_t bits;
  std::memcpy(&bits, pair, sizeof(bits));
  const __m256i a = _mm256_set1_epi32(bits);
  acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(a, b0));
  acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(a, b1));
#endif
}

// Without kFinish: out is the tile, out[r][c] = sum over k pairs of (a_r pair) . (b_c pair); strip is
// [K/2][16][2] int16. With kFinish the first mr rows go to out = C (row stride ldc) finished instead
// (dequantized: a float multiply, then a float add, as the driver's store_row; the tile round trip cost
// about 5% of QAttention S=512).
template <bool kFinish>
void micro_madd16(const int16_t* const rows[kMaddRows], size_t kgroups, const int16_t* strip, int32_t* out,
                  size_t mr = kMaddRows, const StripDequant<kNr>* ep = nullptr, size_t ldc = 0) {
  __m256i acc[kMaddRows][2];
  ATTNKIT_UNROLL
  for (size_t r = 0; r < kMaddRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const int16_t* row[kMaddRows];
  ATTNKIT_UNROLL
  for (size_t r = 0; r < kMaddRows; ++r) row[r] = rows[r];
  for (size_t g = 0; g < kgroups; ++g) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(strip + g * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(strip + g * 32 + 16));
    ATTNKIT_UNROLL
    for (size_t r = 0; r < kMaddRows; ++r) madd_pair_into(acc[r][0], acc[r][1], row[r] + 2 * g, b0, b1);
  }
  if constexpr (!kFinish) {
    ATTNKIT_UNROLL
    for (size_t r = 0; r < kMaddRows; ++r) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + r * kNr), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + r * kNr + 8), acc[r][1]);
    }
    return;
  }
  ATTNKIT_UNROLL
  for (size_t r = 0; r < kMaddRows; ++r) {
    if (r >= mr) break;
    int32_t* dst = out + r * ldc;
    ATTNKIT_UNROLL
    for (size_t j = 0; j < 2; ++j) {
      if (ep->dequant) {
        const __m256 f = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][j]), _mm256_load_ps(ep->scale + 8 * j)),
                                       _mm256_load_ps(ep->bias + 8 * j));
        _mm256_storeu_ps(reinterpret_cast<float*>(dst) + 8 * j, f);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 8 * j), acc[r][j]);
      }
    }
  }
}

struct MicroMadd16 {
  static void run(size_t, const int16_t* const* rows, size_t kgroups, const int16_t* strip, int32_t* tile) {
    micro_madd16<false>(rows, kgroups, strip, tile);
  }
  static void store_rows(size_t mr, const int16_t* const* rows, size_t kgroups, const int16_t* strip,
                         const StripDequant<kNr>& ep, int32_t* C, size_t ldc) {
    micro_madd16<true>(rows, kgroups, strip, C, mr, &ep, ldc);
  }
};

// X86Direct's ymm traits (see x86_direct_impl.h): 16 columns of two rows, interleaved in an xmm, widen to the pairs
// of columns 0-7 (lo) and 8-15 (hi), already in order.
struct DirectAvx2 {
  using V = __m256i;
  static constexpr size_t W = 8;
  static V broadcast(int32_t x) { return _mm256_set1_epi32(x); }
  template <bool kSigned>
  static void pairs(const uint8_t* row0, const uint8_t* row1, V& lo, V& hi) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row0));
    const __m128i x1 = row1 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row1)) : _mm_setzero_si128();
    const __m128i l = _mm_unpacklo_epi8(x0, x1), h = _mm_unpackhi_epi8(x0, x1);
    lo = kSigned ? _mm256_cvtepi8_epi16(l) : _mm256_cvtepu8_epi16(l);
    hi = kSigned ? _mm256_cvtepi8_epi16(h) : _mm256_cvtepu8_epi16(h);
  }
  static V madd(V acc, V b, V a) { return _mm256_add_epi32(acc, _mm256_madd_epi16(b, a)); }
  static V load(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(int32_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static void finish(int32_t* c, int32_t rowsum, const int32_t* zp) {
    const V rs = _mm256_set1_epi32(rowsum);
    store(c, _mm256_sub_epi32(load(c), _mm256_mullo_epi32(load(zp), rs)));
    store(c + W, _mm256_sub_epi32(load(c + W), _mm256_mullo_epi32(load(zp + W), rs)));
  }
};

using Avx2 = GemmEntry<I16Gemm<kMaddRows, kNr, 2, MicroMadd16>, X86Direct<DirectAvx2>>;

// AVX-VNNI: strip is [K/4][16][4] int8; 4 rows x 16 columns in 8 ymm accumulators. The VEX-encoded
// intrinsic keeps this runnable on AVX-VNNI CPUs without AVX512.
__attribute__((target("avx2,avxvnni"))) void micro_avxvnni(const uint8_t* const rows[kMr],
                                                            size_t kgroups, const int8_t* strip,
                                                            int32_t* tile) {
  __m256i acc[kMr][2];
  for (size_t r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (size_t g = 0; g < kgroups; ++g) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(strip + g * 64));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(strip + g * 64 + 32));
    for (size_t r = 0; r < kMr; ++r) {
      int32_t quad;
      std::memcpy(&quad, rows[r] + 4 * g, sizeof(quad));
      const __m256i a = _mm256_set1_epi32(quad);
      acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], a, b0);
      acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], a, b1);
    }
  }
  for (size_t r = 0; r < kMr; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + r * kNr), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + r * kNr + 8), acc[r][1]);
  }
}

using AvxVnni = GemmEntry<Dot4Gemm<kMr, kNr, false, FullTile<micro_avxvnni>>, X86Direct<DirectAvx2>>;

}  // namespace

extern const GemmU8X8Kernels kGemmU8X8_avx2 = Avx2::kernels("avx2-madd16", kNr);
// Only for CPUs reporting AVX-VNNI (dispatch checks); see micro_avxvnni.
extern const GemmU8X8Kernels kGemmU8X8_avxvnni = AvxVnni::kernels("avx-vnni", kNr);

}  // namespace attnkit
