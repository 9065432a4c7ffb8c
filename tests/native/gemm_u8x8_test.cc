// attnkit tests: the gemm_u8x8 projection kernels, every variant this host runs (SIMDe-emulated NEON and
// wasm128 included), against an int64 reference. The results are integers, so the check is equality.
// Shapes cover K and N tails of every kernel granule (4/16/64; AMX's 16 rows), strided A/B, and the extreme operands
// that saturate AVX2 maddubs (u8 255 x s8 -128 pairs) and the largest K for which int32 is exact.
#include <algorithm>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gemm_u8x8/gemm_u8x8.h"
#include "qattention/gemm_variants.h"

namespace attnkit {
namespace {

struct GemmCase {
  size_t M, N, K;
  size_t lda, ldb;  // >= K, >= N: exercises slices of wider matrices
  bool b_signed;
  int32_t a_zp;
  std::vector<uint8_t> A;
  std::vector<uint8_t> B;  // bytes; int8 when b_signed
  std::vector<int32_t> b_zp;
};

int64_t b_at(const GemmCase& c, size_t k, size_t n) {
  const uint8_t raw = c.B[k * c.ldb + n];
  return c.b_signed ? int64_t(int8_t(raw)) : int64_t(raw);
}

std::vector<int32_t> reference(const GemmCase& c) {
  std::vector<int32_t> out(c.M * c.N);
  for (size_t m = 0; m < c.M; ++m) {
    for (size_t n = 0; n < c.N; ++n) {
      int64_t acc = 0;
      for (size_t k = 0; k < c.K; ++k) acc += (int64_t(c.A[m * c.lda + k]) - c.a_zp) * (b_at(c, k, n) - c.b_zp[n]);
      EXPECT_GE(acc, INT32_MIN);
      EXPECT_LE(acc, INT32_MAX);
      out[m * c.N + n] = int32_t(acc);
    }
  }
  return out;
}

GemmCase random_case(size_t M, size_t N, size_t K, bool b_signed, bool zero_points, uint32_t seed) {
  std::mt19937 rng(seed);
  GemmCase c{M, N, K, K + (seed % 3), N + (seed % 5), b_signed, 0, {}, {}, {}};
  c.A.resize(M * c.lda);
  c.B.resize(K * c.ldb);
  for (auto& v : c.A) v = uint8_t(rng());
  for (auto& v : c.B) v = uint8_t(rng());
  c.b_zp.assign(N, 0);
  if (zero_points) {
    c.a_zp = int32_t(rng() % 256);
    for (auto& z : c.b_zp) z = b_signed ? int32_t(int8_t(rng())) : int32_t(uint8_t(rng()));
  }
  return c;
}

// Every operand at one extreme: the largest |products|, all with the same sign.
GemmCase extreme_case(size_t M, size_t N, size_t K, bool b_signed, uint8_t a, uint8_t b, int32_t a_zp,
                      int32_t b_zp) {
  GemmCase c{M, N, K, K, N, b_signed, a_zp, std::vector<uint8_t>(M * K, a), std::vector<uint8_t>(K * N, b),
             std::vector<int32_t>(N, b_zp)};
  return c;
}

void check_all_variants(const GemmCase& c, const std::string& what) {
  const std::vector<int32_t> want = reference(c);
  for (const GemmU8X8Kernels& kernels : gemm_u8x8_variants()) {
    std::vector<uint8_t> workspace(kernels.workspace_bytes(c.M, c.N, c.K));
    const size_t ldc = c.N + 3;
    std::vector<int32_t> got(c.M * ldc, 0x5a5a5a5a);
    kernels.gemm(c.M, c.N, c.K, c.A.data(), c.lda, c.a_zp, c.B.data(), c.ldb, c.b_signed, c.b_zp.data(),
                 got.data(), ldc, workspace.data());
    size_t bad = 0;
    for (size_t m = 0; m < c.M; ++m) {
      for (size_t n = 0; n < c.N; ++n) {
        if (got[m * ldc + n] != want[m * c.N + n] && bad++ < 3) {
          ADD_FAILURE() << kernels.variant << " " << what << " M=" << c.M << " N=" << c.N << " K=" << c.K
                        << " at (" << m << ", " << n << "): got " << got[m * ldc + n] << ", want "
                        << want[m * c.N + n];
        }
      }
      for (size_t n = c.N; n < ldc; ++n) {
        EXPECT_EQ(got[m * ldc + n], 0x5a5a5a5a) << kernels.variant << " wrote past column N";
      }
    }
  }
}

TEST(GemmU8X8, ListsScalarAndHostVariants) {
  const auto variants = gemm_u8x8_variants();
  ASSERT_FALSE(variants.empty());
  EXPECT_STREQ(variants[0].variant, "scalar");
  for (const auto& v : variants) std::printf("gemm_u8x8 variant: %s\n", v.variant);
}

TEST(GemmU8X8, RandomShapesWithTails) {
  const size_t shapes[][3] = {{1, 1, 1},   {1, 16, 4},   {3, 17, 5},   {8, 16, 64},  {9, 33, 63},
                              {5, 64, 65}, {4, 15, 3},   {13, 70, 129}, {2, 48, 100}, {17, 31, 257},
                              {1, 96, 768}, {7, 130, 31}, {16, 64, 64}, {33, 130, 200}, {48, 192, 768},
                              // the few-rows kernels: whole column groups and tails, K past their prefetch distance
                              {1, 64, 9},   {2, 70, 1027}, {4, 100, 33}, {3, 130, 2}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    for (bool b_signed : {true, false}) {
      for (bool zp : {false, true}) {
        check_all_variants(random_case(s[0], s[1], s[2], b_signed, zp, seed++),
                           std::string(b_signed ? "s8" : "u8") + (zp ? " zp" : ""));
      }
    }
  }
}

// u8 255 x s8 -128: each maddubs pair would be -65280 and saturate to -32768; the kernels must not.
TEST(GemmU8X8, SaturatingOperandsAreExact) {
  struct Ext { bool s; uint8_t a, b; int32_t za, zb; };
  const Ext cases[] = {
      {true, 255, uint8_t(int8_t(-128)), 0, 0},  {true, 255, 127, 0, 0},   {true, 0, uint8_t(int8_t(-128)), 255, 127},
      {true, 255, uint8_t(int8_t(-128)), 0, 127}, {false, 255, 255, 0, 0}, {false, 0, 0, 255, 255},
      {false, 255, 0, 0, 255},                    {false, 128, 128, 128, 128}};
  for (const Ext& e : cases) {
    for (size_t K : {1, 3, 4, 63, 64, 65, 1000}) {
      check_all_variants(extreme_case(21, 70, K, e.s, e.a, e.b, e.za, e.zb), "extreme K=" + std::to_string(K));
    }
  }
}

// The packed form as the QAttention driver runs it: A packed once, B packed in a few column ranges,
// C computed per column range (one granule, then the rest), every variant that has it; same bits.
TEST(GemmU8X8, PackedFormByColumnRanges) {
  const size_t shapes[][3] = {{1, 130, 768}, {5, 200, 65}, {13, 64, 3}, {9, 257, 129}, {40, 200, 129}};
  uint32_t seed = 50;
  for (const auto& sh : shapes) {
    for (bool b_signed : {true, false}) {
      const GemmCase c = random_case(sh[0], sh[1], sh[2], b_signed, true, seed++);
      const std::vector<int32_t> want = reference(c);
      for (const GemmU8X8Kernels& k : gemm_u8x8_variants()) {
        if (k.column_granule == 0) continue;
        std::vector<uint8_t> a(k.packed_a_bytes(c.M, c.K) + 64), b(k.packed_b_bytes(c.K, c.N) + 64);
        void* pa = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(a.data()) + 63) & ~uintptr_t(63));
        void* pb = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(b.data()) + 63) & ~uintptr_t(63));
        k.pack_a(c.M, c.K, c.A.data(), c.lda, c.a_zp, pa);
        const size_t split = std::min(c.N, 2 * k.column_granule);
        k.pack_b(c.K, c.N, 0, split, c.B.data(), c.ldb, c.b_signed, c.b_zp.data(), pb);
        if (split < c.N) k.pack_b(c.K, c.N, split, c.N, c.B.data(), c.ldb, c.b_signed, c.b_zp.data(), pb);
        std::vector<int32_t> got(c.M * c.N, 0x5a5a5a5a);
        const size_t first = std::min(c.N, k.column_granule);
        k.compute(c.M, c.N, c.K, 0, first, pa, c.a_zp, pb, got.data(), c.N, nullptr);
        if (first < c.N) k.compute(c.M, c.N, c.K, first, c.N, pa, c.a_zp, pb, got.data(), c.N, nullptr);
        EXPECT_EQ(got, want) << k.variant << " M=" << c.M << " N=" << c.N << " K=" << c.K;
      }
    }
  }
}

// The largest K the validation admits: |(a - za)(b - zb)| = 255 * 255 at every k still fits int32.
TEST(GemmU8X8, LargestExactK) {
  const size_t K = kGemmU8X8MaxK;
  check_all_variants(extreme_case(2, 17, K, true, 255, uint8_t(int8_t(-128)), 0, 127), "max K s8");
  check_all_variants(extreme_case(2, 17, K, false, 0, 255, 255, 0), "max K u8");
  // Whole column groups of the few-rows kernels (16 and 32 columns), the sums at their largest.
  check_all_variants(extreme_case(1, 64, K, true, 255, uint8_t(int8_t(-128)), 0, 127), "max K s8, 64 columns");
  check_all_variants(extreme_case(4, 33, K, false, 255, 0, 0, 255), "max K u8, 4 rows");
}

}  // namespace
}  // namespace attnkit
