// attnkit gemm_u8x8: the few-rows product of a decode step on x86 (the Direct of GemmEntry), written once over an
// ISA traits type (DirectAvx2 in avx2.cc, DirectAvx512 in x86_vnni512_impl.h). B is read once, four rows per pass
// over the whole width in address order, each two rows interleaved into int16 (b_k, b_k+1) pairs and multiplied
// with pmaddwd (or vpdpwssd) against (a_k - za, a_k+1 - za): exact int32 sums, kept in C until the last pass.
#pragma once
#include <immintrin.h>

#include <algorithm>

#include "gemm_u8x8/gemm_u8x8_impl.h"
#include "unroll.h"

namespace attnkit {
namespace {

// In a model the weight comes from DRAM, and this core's prefetchers keep up only with one ascending stream. Reading
// a 768 x 2304 weight (1.77 MB, cold) with vector loads, one thread: row after row 58-60 us; 2 or 4 rows side by
// side 64 bytes at a time 134-147 us, 70-77 with the rows two groups ahead prefetched in address order; 64-byte
// column strips down all rows 106-117 us, the order of the 64-column blocks this replaced (209 us for the whole
// product). So rows go kRows at a time over the whole width, sums in C, the rows ahead prefetched in order.
// I: V (W int32 lanes), W, broadcast(int32), pairs<kSigned>(row0, row1, lo, hi) (2W columns of two B rows as
// int16 pairs; row1 null for zeros), madd(acc, b, a), load/store (int32 vectors) and finish(c, rowsum, zp): the
// 2W raw sums of a column group, in pairs' order, put in column order minus zp * rowsum.
template <class I>
struct X86Direct {
  static constexpr size_t kRows = 4;         // B rows per pass: two pairs
  static constexpr size_t kGroupsAhead = 2;  // prefetch distance, in passes

  template <size_t MR, bool kSigned>
  static void rows(size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const uint8_t* B, size_t ldb,
                   const int32_t* zp, int32_t* C, size_t ldc) {
    using V = typename I::V;
    constexpr size_t kGroup = 2 * I::W, kPairs = kRows / 2;
    const size_t whole = N / kGroup * kGroup;
    int32_t rowsum[MR];
    for (size_t r = 0; r < MR; ++r) {
      int32_t s = 0;
      for (size_t k = 0; k < K; ++k) s += int32_t(A[r * lda + k]) - a_zp;
      rowsum[r] = s;
      std::fill(C + r * ldc, C + r * ldc + whole, 0);
    }
    for (size_t k0 = 0; k0 < K && whole > 0; k0 += kRows) {
      const uint8_t* row[kRows];
      V a[MR][kPairs];
      for (size_t j = 0; j < kRows; ++j) row[j] = k0 + j < K ? B + (k0 + j) * ldb : nullptr;
      ATTNKIT_UNROLL for (size_t r = 0; r < MR; ++r)
        ATTNKIT_UNROLL for (size_t q = 0; q < kPairs; ++q) {
          const size_t k = k0 + 2 * q;
          const int32_t a0 = k < K ? int32_t(A[r * lda + k]) - a_zp : 0;
          const int32_t a1 = k + 1 < K ? int32_t(A[r * lda + k + 1]) - a_zp : 0;
          a[r][q] = I::broadcast(int32_t(uint32_t(uint16_t(a0)) | uint32_t(uint16_t(a1)) << 16));
        }
      // The rows kGroupsAhead passes on, kRows * 2W bytes per column group, in address order.
      const size_t ahead = k0 + kGroupsAhead * kRows;
      const uint8_t* next = ahead < K ? B + ahead * ldb : nullptr;
      const size_t next_bytes = next ? std::min(kRows, K - ahead) * ldb : 0;
      for (size_t n = 0, offset = 0; n < whole; n += kGroup, offset += kRows * kGroup) {
        if (offset < next_bytes) {
          ATTNKIT_UNROLL for (size_t l = 0; l < kRows * kGroup; l += 64) __builtin_prefetch(next + offset + l);
        }
        V lo[kPairs], hi[kPairs];
        ATTNKIT_UNROLL for (size_t q = 0; q < kPairs; ++q) {
          const uint8_t* second = row[2 * q + 1] ? row[2 * q + 1] + n : nullptr;
          if (row[2 * q]) {
            I::template pairs<kSigned>(row[2 * q] + n, second, lo[q], hi[q]);
          } else {
            lo[q] = hi[q] = I::broadcast(0);
          }
        }
        ATTNKIT_UNROLL for (size_t r = 0; r < MR; ++r) {
          int32_t* c = C + r * ldc + n;
          V even = I::load(c), odd = I::load(c + I::W);
          ATTNKIT_UNROLL for (size_t q = 0; q < kPairs; ++q) {
            even = I::madd(even, lo[q], a[r][q]);
            odd = I::madd(odd, hi[q], a[r][q]);
          }
          I::store(c, even);
          I::store(c + I::W, odd);
        }
      }
    }
    for (size_t r = 0; r < MR; ++r) {
      for (size_t n = 0; n < whole; n += kGroup) I::finish(C + r * ldc + n, rowsum[r], zp + n);
      // The columns after the last whole group, one at a time.
      for (size_t n = whole; n < N; ++n) {
        int32_t sum = 0;
        for (size_t k = 0; k < K; ++k) {
          const uint8_t v = B[k * ldb + n];
          sum += (int32_t(A[r * lda + k]) - a_zp) * (kSigned ? int32_t(int8_t(v)) : int32_t(v));
        }
        C[r * ldc + n] = sum - zp[n] * rowsum[r];
      }
    }
  }

  template <size_t MR>
  static void dispatch(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B,
                       size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc) {
    if constexpr (MR > 1) {
      if (M < MR) return dispatch<MR - 1>(M, N, K, A, lda, a_zp, B, ldb, b_signed, b_zp, C, ldc);
    }
    const uint8_t* b = static_cast<const uint8_t*>(B);
    if (b_signed) rows<MR, true>(N, K, A, lda, a_zp, b, ldb, b_zp, C, ldc);
    else rows<MR, false>(N, K, A, lda, a_zp, b, ldb, b_zp, C, ldc);
  }

  static void run(size_t M, size_t N, size_t K, const uint8_t* A, size_t lda, int32_t a_zp, const void* B,
                  size_t ldb, bool b_signed, const int32_t* b_zp, int32_t* C, size_t ldc) {
    static_assert(kGemmDirectMaxRows == 4, "dispatch covers 1 to 4 rows");
    for (size_t m0 = 0; m0 < M; m0 += kGemmDirectMaxRows)
      dispatch<kGemmDirectMaxRows>(M - m0 < kGemmDirectMaxRows ? M - m0 : kGemmDirectMaxRows, N, K, A + m0 * lda,
                                   lda, a_zp, B, ldb, b_signed, b_zp, C + m0 * ldc, ldc);
  }
};

}  // namespace
}  // namespace attnkit
