// attnkit kernel tests: every ISA this host can run (natively or through SIMDe) against the
// double-precision reference in core/reference/kernel_reference.h, over tail-heavy shapes. Inputs sit
// flush against a guard page (Linux) so any read or write past a row's end faults.
#include <cstdlib>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "dispatch.h"
#include "kernel_reference.h"
#include "softmax/exp_poly.h"

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#include <unistd.h>
#define ATTNKIT_GUARD_PAGES 1
#endif

namespace attnkit {
namespace {

using ref::CacheElem;

// fp32 unit roundoff: every error bound below is a multiple of it.
constexpr double kU = 1.0 / (1 << 24);

// `bytes` of storage whose last byte is the last byte before an inaccessible page; elsewhere a
// trailing canary catches overruns on writes.
class Guarded {
 public:
  explicit Guarded(size_t bytes) : bytes_(bytes) {
#if ATTNKIT_GUARD_PAGES
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span_ = (bytes + page - 1) / page * page + page;
    void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = static_cast<uint8_t*>(m);
    mprotect(base_ + span_ - page, page, PROT_NONE);
    data_ = base_ + span_ - page - bytes;
#else
    storage_.assign(bytes + kCanary, 0xA5);
    data_ = storage_.data();
#endif
  }
  ~Guarded() {
#if ATTNKIT_GUARD_PAGES
    munmap(base_, span_);
#endif
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  bool canary_intact() const {
#if ATTNKIT_GUARD_PAGES
    return true;
#else
    for (size_t i = 0; i < kCanary; ++i)
      if (storage_[bytes_ + i] != 0xA5) return false;
    return true;
#endif
  }

 private:
  static constexpr size_t kCanary = 64;
  size_t bytes_;
  uint8_t* data_ = nullptr;
#if ATTNKIT_GUARD_PAGES
  uint8_t* base_ = nullptr;
  size_t span_ = 0;
#else
  std::vector<uint8_t> storage_;
#endif
};

const CacheElem kAllElems[] = {CacheElem::kF32, CacheElem::kF16, CacheElem::kBF16, CacheElem::kS8,
                               CacheElem::kS4};
const size_t kHs[] = {8, 16, 24, 64, 80, 128, 136, 256};
const size_t kMs[] = {1, 2, 3, 4, 7, 16, 65};
const size_t kNs[] = {1, 2, 15, 16, 17, 33, 255, 512};

// Every ISA this host runs or emulates; ATTNKIT_TEST_ISAS=a,b narrows it (the aarch64 run under qemu
// checks only real NEON: the other ISAs are covered natively on x86, 25x faster).
std::vector<const KernelTable*> tables() {
  const char* only = std::getenv("ATTNKIT_TEST_ISAS");
  const std::string wanted = only ? "," + std::string(only) + "," : "";
  std::vector<const KernelTable*> out;
  for (const std::string& isa : available_isas())
    if (wanted.empty() || wanted.find("," + isa + ",") != std::string::npos) out.push_back(kernel_table_for(isa));
  return out;
}

QkGemmFn qk_direct(const KernelTable& t, CacheElem e) {
  switch (e) {
    case CacheElem::kF32: return t.qk.f32;
    case CacheElem::kF16: return t.qk.f16;
    case CacheElem::kBF16: return t.qk.bf16;
    case CacheElem::kS8: return t.qk.s8;
    case CacheElem::kS4: return t.qk.s4;
  }
  return nullptr;
}
QkPackFn qk_pack(const KernelTable& t, CacheElem e) {
  switch (e) {
    case CacheElem::kF32: return t.qk.pack_f32;
    case CacheElem::kF16: return t.qk.pack_f16;
    case CacheElem::kBF16: return t.qk.pack_bf16;
    case CacheElem::kS8: return t.qk.pack_s8;
    case CacheElem::kS4: return t.qk.pack_s4;
  }
  return nullptr;
}
SvGemmFn sv_fn(const KernelTable& t, CacheElem e) {
  switch (e) {
    case CacheElem::kF32: return t.sv.f32;
    case CacheElem::kF16: return t.sv.f16;
    case CacheElem::kBF16: return t.sv.bf16;
    case CacheElem::kS8: return t.sv.s8;
    case CacheElem::kS4: return t.sv.s4;
  }
  return nullptr;
}

// Fills a cache of N rows (row stride ldk bytes) with random values of the dtype's full range.
void fill_cache(CacheElem e, size_t N, size_t H, size_t ldk, uint8_t* K, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t j = 0; j < N; ++j) {
    uint8_t* row = K + j * ldk;
    for (size_t d = 0; d < H; ++d) {
      switch (e) {
        case CacheElem::kF32: reinterpret_cast<float*>(row)[d] = uni(rng); break;
        case CacheElem::kF16: reinterpret_cast<uint16_t*>(row)[d] = float_to_f16(uni(rng)); break;
        case CacheElem::kBF16: reinterpret_cast<uint16_t*>(row)[d] = float_to_bf16(uni(rng)); break;
        case CacheElem::kS8: row[d] = static_cast<uint8_t>(byte(rng)); break;
        case CacheElem::kS4:
          if (d % 2 == 0) row[d / 2] = static_cast<uint8_t>(byte(rng));
          break;
      }
    }
  }
}

void fill_floats(float* x, size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> uni(lo, hi);
  for (size_t i = 0; i < n; ++i) x[i] = uni(rng);
}

// The grid's largest products (e.g. M=65, N=512, H=256) only repeat tiles and tails that smaller ones
// already cover, at most of the suite's cost (and minutes under qemu): skip products above 2^21.
bool worth_testing(size_t M, size_t N, size_t H) { return M * N * H <= (size_t{1} << 21); }

// A row stride: tight for even N, padded (so the kernel must honour ldk) for odd N.
size_t stride_for(CacheElem e, size_t H, size_t N) {
  return ref::cache_row_bytes(e, H) + (N % 2 ? 40 : 0);
}

// Any fp32 dot product of length H, accumulated in any order with or without FMA, and scaled by
// alpha, is within (H + 1) * u * |alpha| * sum|q||k| of the exact value (Higham, gamma_n bound);
// every cache element converts to fp32 exactly, so that is the whole error.
void check_qk_direct(CacheElem e, size_t M, size_t N, size_t H, std::mt19937& rng,
                     const std::vector<const KernelTable*>& isas) {
  const size_t ldk = stride_for(e, H, N);
  Guarded K(N * ldk), Q(M * H * 4);
  fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
  fill_floats(Q.as<float>(), M * H, rng);
  const float alpha = 0.125f;
  std::vector<double> want(M * N), absum(M * N);
  ref::qk_gemm(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, alpha, want.data(), N);
  ref::qk_gemm_abs(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, absum.data(), N);
  for (const KernelTable* t : isas) {
    Guarded C(M * N * 4);
    qk_direct(*t, e)(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, alpha, C.as<float>(), N);
    ASSERT_TRUE(C.canary_intact());
    for (size_t x = 0; x < M * N; ++x) {
      const double bound = (H + 1) * kU * alpha * absum[x] + 1e-30;
      ASSERT_LE(std::fabs(C.as<float>()[x] - want[x]), bound)
          << t->isa << " " << ref::cache_elem_name(e) << " M=" << M << " N=" << N << " H=" << H << " at " << x;
    }
  }
}

// Calls check(e, M, N, H) for every dtype and grid shape worth testing.
template <class Check>
void for_each_grid_shape(Check check) {
  for (CacheElem e : kAllElems)
    for (size_t H : kHs)
      for (size_t N : kNs)
        for (size_t M : kMs)
          if (worth_testing(M, N, H)) check(e, M, N, H);
}

TEST(KernelQkGemm, DirectMatchesReferenceForEveryIsaShapeAndDtype) {
  std::mt19937 rng(1234);
  const auto isas = tables();
  for_each_grid_shape([&](CacheElem e, size_t M, size_t N, size_t H) { check_qk_direct(e, M, N, H, rng, isas); });
}

// Heads longer than 512 elements: the x86 direct QK copies its query rows to the heap instead of the stack (the
// limb kernels take int8/int4 rows up to kLimbMaxH themselves); 9 rows cross the 8-row blocks.
TEST(KernelQkGemm, DirectLongHeadsMatchReference) {
  std::mt19937 rng(77);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t M : {1, 2, 9}) check_qk_direct(e, M, 19, 520, rng, isas);
}

// Packing only converts (exact), so panels must equal the reference bit for bit, padding keys 0; the
// packed GEMM then has the same dot-product bound as the direct form.
TEST(KernelQkGemm, PackAndPackedGemmMatchReference) {
  std::mt19937 rng(99);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t H : kHs)
      for (size_t N : kNs) {
        const size_t ldk = stride_for(e, H, N);
        Guarded K(N * ldk);
        fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
        const std::vector<float> want_panels = ref::qk_pack(e, N, H, K.as<uint8_t>(), ldk);
        for (const KernelTable* t : isas) {
          Guarded panels(want_panels.size() * 4);
          qk_pack(*t, e)(N, H, K.as<uint8_t>(), ldk, panels.as<float>());
          ASSERT_EQ(0, std::memcmp(panels.as<float>(), want_panels.data(), want_panels.size() * 4))
              << t->isa << " " << ref::cache_elem_name(e) << " N=" << N << " H=" << H;
          if (e != CacheElem::kF32) continue;  // the GEMM only sees floats: one dtype suffices
          for (size_t M : kMs) {
            if (!worth_testing(M, N, H)) continue;
            Guarded Q(M * H * 4), C(M * N * 4);
            fill_floats(Q.as<float>(), M * H, rng);
            std::vector<double> want(M * N), absum(M * N);
            ref::qk_gemm(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, 0.5, want.data(), N);
            ref::qk_gemm_abs(e, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ldk, absum.data(), N);
            t->qk.packed(M, N, H, Q.as<float>(), H, panels.as<float>(), 0.5f, C.as<float>(), N);
            ASSERT_TRUE(C.canary_intact());
            for (size_t x = 0; x < M * N; ++x)
              ASSERT_LE(std::fabs(C.as<float>()[x] - want[x]), (H + 1) * kU * 0.5 * absum[x] + 1e-30)
                  << t->isa << " packed M=" << M << " N=" << N << " H=" << H << " at " << x;
          }
        }
      }
}

// int8/int4 caches take the integer limb path (qk_gemm/limb_query.h) on scalar, VNNI and wasm128:
// q is split exactly to within 2^-30 * 2^ceil(log2 amax) <= 2^-29 amax per element, the sums are exact,
// and three fp32 roundings follow (int->float of the hi sum, the add, the scale), each within u of a
// term bounded by |alpha| (sum|q||k| + 2^-15 amax sum|k|). So those variants must give the scalar
// kernel's bits and stay within |alpha| (4u sum|q||k| + 2^-28 amax sum|k|) of the exact score. Rows the
// integer path cannot hold (NaN, |q| beyond 2^40 or below 2^-40, H > 1016), and the AVX2, NEON and
// AVX512 (no VNNI) kernels, are fp32 dot products with the (H+1)u bound.
TEST(KernelQkGemm, IntegerLimbKernelsGiveTheScalarBits) {
  std::mt19937 rng(2024);
  const auto isas = tables();
  const KernelTable* scalar = kernel_table_for("scalar");
  const float row_scales[] = {1.0f, 1e-6f, 3e5f, 0.0f, 0x1p-45f, 0x1p45f, 1.0f, 7.5e-3f, 1.0f};
  for (CacheElem e : {CacheElem::kS8, CacheElem::kS4})
    for (size_t H : {size_t{8}, size_t{24}, size_t{64}, size_t{72}, size_t{128}, size_t{136}, size_t{256},
                     size_t{1016}, size_t{1024}})
      for (size_t N : {size_t{1}, size_t{7}, size_t{33}, size_t{130}}) {
        const size_t M = 9;
        const size_t ldk = stride_for(e, H, N);
        Guarded K(N * ldk), Q(M * H * 4);
        fill_cache(e, N, H, ldk, K.as<uint8_t>(), rng);
        float* q = Q.as<float>();
        fill_floats(q, M * H, rng);
        for (size_t i = 0; i < M; ++i)
          for (size_t d = 0; d < H; ++d) q[i * H + d] *= row_scales[i];
        q[6 * H + H / 2] = std::numeric_limits<float>::quiet_NaN();  // row 6: NaN must propagate
        q[8 * H + 3] = 50.0f;                                          // row 8: one dominant element
        const float alpha = 0.0883883f;
        std::vector<double> want(M * N), absum(M * N);
        ref::qk_gemm(e, M, N, H, q, H, K.as<uint8_t>(), ldk, alpha, want.data(), N);
        ref::qk_gemm_abs(e, M, N, H, q, H, K.as<uint8_t>(), ldk, absum.data(), N);
        auto run = [&](const KernelTable& t, float* out) {
          (e == CacheElem::kS8 ? t.qk.s8 : t.qk.s4)(M, N, H, q, H, K.as<uint8_t>(), ldk, alpha, out, N);
        };
        std::vector<float> first(M * N);
        run(*scalar, first.data());
        for (const KernelTable* t : isas) {
          Guarded C(M * N * 4);
          run(*t, C.as<float>());
          const bool exact = std::string(t->quantized_qk) == "exact-int16-limbs";
          const float* c = C.as<float>();
          for (size_t i = 0; i < M; ++i) {
            double amax = 0;
            for (size_t d = 0; d < H; ++d) amax = std::max(amax, std::fabs(double(q[i * H + d])));
            const bool limbs =
                exact && H <= 1016 && i != 6 && (amax == 0 || (amax >= 0x1p-40 && amax <= 0x1p40));
            for (size_t j = 0; j < N; ++j) {
              const size_t x = i * N + j;
              const std::string where = std::string(t->isa) + " " + ref::cache_elem_name(e) +
                                        " H=" + std::to_string(H) + " N=" + std::to_string(N) + " row " +
                                        std::to_string(i);
              if (i == 6) {
                ASSERT_TRUE(std::isnan(c[x])) << where;
                continue;
              }
              double ksum = 0;
              for (size_t d = 0; d < H; ++d)
                ksum += std::fabs(ref::cache_value(e, K.as<uint8_t>() + j * ldk, d));
              const double bound = limbs ? alpha * (4 * kU * absum[x] + 0x1p-28 * amax * ksum)
                                         : (H + 1) * kU * alpha * absum[x];
              ASSERT_LE(std::fabs(c[x] - want[x]), bound + 1e-30) << where;
              if (limbs) {
                ASSERT_EQ(0, std::memcmp(&c[x], &first[x], 4)) << where << " differs from scalar";
              }
            }
          }
        }
      }
}

// The opt-in VNNI kernel quantizes each query row with scale s = amax/127: each q_d moves by at most
// s/2, so the score moves by at most alpha * (s/2) * sum|k| (plus the fp32 rescale, a few ulp).
TEST(KernelQkGemm, ApproxVnniWithinQuantizationBound) {
  std::mt19937 rng(7);
  for (const KernelTable* t : tables()) {
    if (!t->qk.s8_approx_vnni) continue;
    for (size_t H : kHs)
      for (size_t N : kNs)
        for (size_t M : {size_t{1}, size_t{3}, size_t{8}}) {
          Guarded K(N * H), Q(M * H * 4), C(M * N * 4);
          fill_cache(CacheElem::kS8, N, H, H, K.as<uint8_t>(), rng);
          fill_floats(Q.as<float>(), M * H, rng);
          std::vector<double> want(M * N);
          ref::qk_gemm(CacheElem::kS8, M, N, H, Q.as<float>(), H, K.as<uint8_t>(), H, 1.0, want.data(), N);
          t->qk.s8_approx_vnni(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), H, 1.0f, C.as<float>(), N);
          for (size_t i = 0; i < M; ++i) {
            double amax = 0;
            for (size_t d = 0; d < H; ++d) amax = std::max(amax, std::fabs((double)Q.as<float>()[i * H + d]));
            for (size_t j = 0; j < N; ++j) {
              double ksum = 0;
              for (size_t d = 0; d < H; ++d) ksum += std::fabs((double)K.as<int8_t>()[j * H + d]);
              const double bound = amax / 127 / 2 * ksum * (1 + 1e-5) + 1e-5 * std::fabs(want[i * N + j]);
              ASSERT_LE(std::fabs(C.as<float>()[i * N + j] - want[i * N + j]), bound)
                  << "H=" << H << " N=" << N << " M=" << M;
            }
          }
        }
  }
}

// sv: each output is a length-N fp32 dot product plus the accumulated start value: bound
// (N + 1) * u * (|O0| + sum_j |p_j||v_jd|).
void check_sv(CacheElem e, size_t M, size_t N, size_t H, std::mt19937& rng, const std::vector<const KernelTable*>& isas) {
  const size_t ldv = stride_for(e, H, N);
  Guarded V(N * ldv), P(M * N * 4);
  fill_cache(e, N, H, ldv, V.as<uint8_t>(), rng);
  fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
  std::vector<float> start(M * H);
  fill_floats(start.data(), M * H, rng);
  // sum_j |p||v| bounds: reference over |P| and |V| via a second pass with abs values.
  std::vector<double> absum(M * H, 0.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j)
      for (size_t d = 0; d < H; ++d)
        absum[i * H + d] += P.as<float>()[i * N + j] * std::fabs(ref::cache_value(e, V.as<uint8_t>() + j * ldv, d));
  for (bool accumulate : {false, true}) {
    std::vector<double> want(start.begin(), start.end());
    ref::sv_gemm(e, M, N, H, P.as<float>(), N, V.as<uint8_t>(), ldv, want.data(), H, accumulate);
    for (const KernelTable* t : isas) {
      Guarded O(M * H * 4);
      std::memcpy(O.as<float>(), start.data(), M * H * 4);
      sv_fn(*t, e)(M, N, H, P.as<float>(), N, V.as<uint8_t>(), ldv, O.as<float>(), H, accumulate);
      ASSERT_TRUE(O.canary_intact());
      for (size_t x = 0; x < M * H; ++x) {
        const double bound = (N + 1) * kU * (absum[x] + (accumulate ? std::fabs(start[x]) : 0)) + 1e-30;
        ASSERT_LE(std::fabs(O.as<float>()[x] - want[x]), bound)
            << t->isa << " " << ref::cache_elem_name(e) << " acc=" << accumulate << " M=" << M << " N=" << N
            << " H=" << H << " at " << x;
      }
    }
  }
}

TEST(KernelSvGemm, MatchesReferenceOverwriteAndAccumulate) {
  std::mt19937 rng(4321);
  const auto isas = tables();
  for_each_grid_shape([&](CacheElem e, size_t M, size_t N, size_t H) { check_sv(e, M, N, H, rng, isas); });
}

// Decode-step blocks (64 KB and more): the x86 kernels prefetch K and V rows ahead and stream V a group
// of rows at a time (sv_stream) for up to 4 rows; odd key counts end in single-key steps.
TEST(KernelSvGemm, DecodeShapesMatchReference) {
  std::mt19937 rng(99);
  const auto isas = tables();
  for (CacheElem e : kAllElems)
    for (size_t N : {1100, 1101})  // past 64 KB for every dtype, int4 included
      for (size_t M : {1, 2, 4, 5}) {
        check_qk_direct(e, M, N, 128, rng, isas);
        check_sv(e, M, N, 128, rng, isas);
      }
}

// A decode block walks its rows in another order than short blocks (key by key, streamed, prefetched), but each
// score and each output element keeps its chain of multiply-adds, so the bits must not depend on the block size:
// one call over N keys equals calls over 32-key blocks (under the decode threshold) carrying the sum.
TEST(KernelSvGemm, DecodeBlocksKeepTheBitsOfShortBlocks) {
  std::mt19937 rng(7);
  constexpr size_t N = 2000, kBlock = 32;  // N rows pass 64 KB for every dtype at H = 72
  for (CacheElem e : kAllElems)
    for (size_t H : {72, 128})
      for (size_t M : {1, 2, 4}) {
        const size_t ld = ref::cache_row_bytes(e, H);
        Guarded K(N * ld), Q(M * H * 4), P(M * N * 4);
        fill_cache(e, N, H, ld, K.as<uint8_t>(), rng);
        fill_floats(Q.as<float>(), M * H, rng);
        fill_floats(P.as<float>(), M * N, rng, 0.0f, 1.0f);
        for (const KernelTable* t : tables()) {
          std::vector<float> c_one(M * N), c_blocks(M * N), o_one(M * H), o_blocks(M * H);
          qk_direct(*t, e)(M, N, H, Q.as<float>(), H, K.as<uint8_t>(), ld, 0.5f, c_one.data(), N);
          sv_fn(*t, e)(M, N, H, P.as<float>(), N, K.as<uint8_t>(), ld, o_one.data(), H, false);
          for (size_t j = 0; j < N; j += kBlock) {
            const size_t n = std::min(kBlock, N - j);
            qk_direct(*t, e)(M, n, H, Q.as<float>(), H, K.as<uint8_t>() + j * ld, ld, 0.5f, c_blocks.data() + j, N);
            sv_fn(*t, e)(M, n, H, P.as<float>() + j, N, K.as<uint8_t>() + j * ld, ld, o_blocks.data(), H, j > 0);
          }
          const auto where = [&] { return std::string(t->isa) + " " + ref::cache_elem_name(e) + " M=" +
                                           std::to_string(M) + " H=" + std::to_string(H); };
          ASSERT_EQ(0, std::memcmp(c_one.data(), c_blocks.data(), M * N * 4)) << "qk " << where();
          ASSERT_EQ(0, std::memcmp(o_one.data(), o_blocks.data(), M * H * 4)) << "sv " << where();
        }
      }
}

TEST(KernelSvGemm, ZeroKeysZeroesOrKeeps) {
  for (const KernelTable* t : tables()) {
    std::vector<float> O(3 * 16, 5.0f);
    t->sv.f32(3, 0, 16, nullptr, 0, nullptr, 0, O.data(), 16, true);
    for (float v : O) ASSERT_EQ(v, 5.0f) << t->isa;
    t->sv.s8(3, 0, 16, nullptr, 0, nullptr, 0, O.data(), 16, false);
    for (float v : O) ASSERT_EQ(v, 0.0f) << t->isa;
  }
}

// Quantization inputs: random values over several scales plus every edge the contract names.
std::vector<float> quant_inputs(size_t n, std::mt19937& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {2.5f,  3.5f,   -2.5f,  -3.5f, 0.5f,  -0.5f,  1.5f,  -1.5f, 126.5f, 127.5f,
                            -127.5f, -128.5f, 128.0f, -129.0f, 1e30f, -1e30f, inf,  -inf,  6.5f,  7.5f,
                            -7.5f, -8.5f,  7.49999f, -8.0f, 0.0f, -0.0f, 1e-40f, 3e9f, -3e9f, 2147483648.0f};
  std::uniform_real_distribution<float> uni(-140.0f, 140.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t pick = rng() % 3;
    x[i] = pick == 0 ? specials[rng() % (sizeof(specials) / sizeof(float))]
                     : (pick == 1 ? std::nearbyint(uni(rng) * 2) / 2 : uni(rng));
  }
  return x;
}

TEST(KernelKvQuant, QuantizeIsBitExactIncludingTiesSaturationAndNan) {
  std::mt19937 rng(5);
  for (const KernelTable* t : tables())
    for (size_t n = 2; n <= 300; n += (n < 70 ? 2 : 37)) {
      std::vector<float> x = quant_inputs(n, rng);
      x[0] = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> inv(n);
      for (size_t i = 0; i < n; ++i) inv[i] = (rng() % 2) ? 1.0f : 1.0f / (0.01f + (rng() % 100) * 0.037f);
      Guarded xs(n * 4), invs(n * 4), q8(n), q4(n / 2);
      std::memcpy(xs.as<float>(), x.data(), n * 4);
      std::memcpy(invs.as<float>(), inv.data(), n * 4);
      std::vector<int8_t> want8(n);
      std::vector<uint8_t> want4(n / 2);
      ref::quantize_s8(x.data(), inv.data(), n, want8.data());
      ref::quantize_s4(x.data(), inv.data(), n, want4.data());
      t->kv.quantize_s8(xs.as<float>(), invs.as<float>(), n, q8.as<int8_t>());
      t->kv.quantize_s4(xs.as<float>(), invs.as<float>(), n, q4.as<uint8_t>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(want8[i], q8.as<int8_t>()[i]) << t->isa << " n=" << n << " x=" << x[i] << " inv=" << inv[i];
      for (size_t i = 0; i < n / 2; ++i)
        ASSERT_EQ(want4[i], q4.as<uint8_t>()[i]) << t->isa << " n=" << n << " pair " << x[2 * i] << ","
                                                 << x[2 * i + 1];
      // Odd lengths for s8 (the s4 contract needs even n).
      t->kv.quantize_s8(xs.as<float>() + 1, invs.as<float>() + 1, n - 1, q8.as<int8_t>());
      for (size_t i = 0; i + 1 < n; ++i) ASSERT_EQ(want8[i + 1], q8.as<int8_t>()[i]) << t->isa;
    }
}

TEST(KernelKvQuant, NamedTiesRoundHalfToEven) {
  const float x[] = {2.5f, 3.5f, -2.5f, -3.5f, 1e30f, -1e30f, 0.5f, 1.5f};
  const float inv[] = {1, 1, 1, 1, 1, 1, 1, 1};
  const int8_t want[] = {2, 4, -2, -4, 127, -128, 0, 2};
  for (const KernelTable* t : tables()) {
    int8_t q[8];
    t->kv.quantize_s8(x, inv, 8, q);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(want[i], q[i]) << t->isa << " x=" << x[i];
    uint8_t q4[4];
    t->kv.quantize_s4(x, inv, 8, q4);
    EXPECT_EQ((2 + 8) | ((4 + 8) << 4), q4[0]) << t->isa;
    EXPECT_EQ((-2 + 8) | ((-4 + 8) << 4), q4[1]) << t->isa;
    EXPECT_EQ((7 + 8) | ((-8 + 8) << 4), q4[2]) << t->isa;
  }
}

TEST(KernelKvQuant, DequantizeIsExactProduct) {
  std::mt19937 rng(8);
  for (const KernelTable* t : tables())
    for (size_t n : {1, 2, 7, 16, 17, 64, 130}) {
      Guarded q(n), q4((n + 1) / 2), sc(n * 4), out(n * 4);
      for (size_t i = 0; i < n; ++i) q.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
      for (size_t i = 0; i < (n + 1) / 2; ++i) q4.as<uint8_t>()[i] = static_cast<uint8_t>(rng());
      fill_floats(sc.as<float>(), n, rng, 0.001f, 0.5f);
      t->kv.dequantize_s8(q.as<int8_t>(), sc.as<float>(), n, out.as<float>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(static_cast<float>(q.as<int8_t>()[i]) * sc.as<float>()[i], out.as<float>()[i]) << t->isa;
      t->kv.dequantize_s4(q4.as<uint8_t>(), sc.as<float>(), n, out.as<float>());
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(static_cast<float>(ref::cache_value(CacheElem::kS4, q4.as<uint8_t>(), i)) * sc.as<float>()[i],
                  out.as<float>()[i])
            << t->isa << " n=" << n << " i=" << i;
    }
}

// Storage conversion must equal common/half.h bit for bit: every fp16/bf16 pattern back to fp32,
// and fp32 inputs covering normal, subnormal, overflow-boundary, tie and NaN cases.
TEST(KernelKvQuant, HalfConversionsBitExactVsHalfH) {
  std::mt19937 rng(11);
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> xs;
  const float edges[] = {65504.0f, 65519.99f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f, 1.0009765625f,
                         1.00048828125f, 3.0e38f, -0.0f, std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.01171875f};
  for (float e : edges) {
    xs.push_back(e);
    xs.push_back(-e);
  }
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 2) bits = (bits & 0x807fffffu) | ((100u + rng() % 60u) << 23);  // mostly the f16 range
    xs.push_back(bits_float(bits));
  }
  const size_t n = xs.size() - 3;  // an odd length exercises every tail
  for (const KernelTable* t : tables()) {
    Guarded in16(65536 * 2), out32(65536 * 4), in32(n * 4), out16(n * 2);
    std::memcpy(in16.as<uint16_t>(), all.data(), 65536 * 2);
    t->kv.from_f16(in16.as<uint16_t>(), 65536, out32.as<float>());
    for (size_t i = 0; i < 65536; ++i)
      ASSERT_EQ(float_bits(f16_to_float(all[i])), float_bits(out32.as<float>()[i])) << t->isa << " f16 " << i;
    t->kv.from_bf16(in16.as<uint16_t>(), 65536, out32.as<float>());
    for (size_t i = 0; i < 65536; ++i)
      ASSERT_EQ(float_bits(bf16_to_float(all[i])), float_bits(out32.as<float>()[i])) << t->isa << " bf16 " << i;
    std::memcpy(in32.as<float>(), xs.data(), n * 4);
    t->kv.to_f16(in32.as<float>(), n, out16.as<uint16_t>());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(float_to_f16(xs[i]), out16.as<uint16_t>()[i]) << t->isa << " to_f16 of " << xs[i];
    t->kv.to_bf16(in32.as<float>(), n, out16.as<uint16_t>());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(float_to_bf16(xs[i]), out16.as<uint16_t>()[i]) << t->isa << " to_bf16 of " << xs[i];
  }
}

// The QK/SV row loaders convert f16/bf16 cache rows exactly: every pattern, read through each ISA's panel packer
// (pure conversion, no arithmetic), equals common/half.h bit for bit, infinities included. A NaN stays a NaN (F16C
// quiets a signaling one, as IEEE conversions do; the attention result is NaN either way).
TEST(KernelQkGemm, PackConvertsEveryHalfPatternExactly) {
  constexpr size_t H = 8, N = 65536 / H;
  Guarded K(65536 * 2);
  for (size_t i = 0; i < 65536; ++i) K.as<uint16_t>()[i] = static_cast<uint16_t>(i);
  std::vector<float> panels(N * H);
  for (const KernelTable* t : tables()) {
    for (bool bf16 : {false, true}) {
      (bf16 ? t->qk.pack_bf16 : t->qk.pack_f16)(N, H, K.as<uint8_t>(), H * 2, panels.data());
      for (size_t j = 0; j < N; ++j)
        for (size_t d = 0; d < H; ++d) {
          const uint16_t h = static_cast<uint16_t>(j * H + d);
          const float want = bf16 ? bf16_to_float(h) : f16_to_float(h);
          const float got = panels[(j / kQkPanelKeys) * H * kQkPanelKeys + d * kQkPanelKeys + j % kQkPanelKeys];
          if (std::isnan(want))
            ASSERT_TRUE(std::isnan(got)) << t->isa << (bf16 ? " bf16 " : " f16 ") << std::hex << h;
          else
            ASSERT_EQ(float_bits(want), float_bits(got)) << t->isa << (bf16 ? " bf16 " : " f16 ") << std::hex << h;
        }
    }
  }
}

// exp_poly: < 2 ulp from the true exp over the whole useful range, exactly 0 for -inf and for inputs
// whose result would be subnormal.
TEST(KernelSoftmax, ExpPolyUnderTwoUlp) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    ASSERT_LE(std::fabs(exp_poly::exp(x) - want), 2 * ulp) << x;
  }
  EXPECT_EQ(0.0f, exp_poly::exp(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0.0f, exp_poly::exp(-100.0f));
  EXPECT_EQ(1.0f, exp_poly::exp(0.0f));
}

// A NaN score stays NaN through exp_sum on every ISA (the vector path lets it ride through the
// arithmetic instead of selecting it back), and its neighbours keep their values.
TEST(KernelSoftmax, ExpSumKeepsNaN) {
  for (const KernelTable* t : tables()) {
    for (size_t at : {0, 5, 17, 63}) {
      std::vector<float> x(64, -1.0f);
      x[at] = std::numeric_limits<float>::quiet_NaN();
      const float sum = t->softmax.exp_sum(x.data(), x.size(), 0.0f);
      EXPECT_TRUE(std::isnan(sum)) << t->isa;
      for (size_t i = 0; i < x.size(); ++i) {
        if (i == at)
          EXPECT_TRUE(std::isnan(x[i])) << t->isa << " at " << at;
        else
          EXPECT_EQ(float_bits(exp_poly::exp(-1.0f)), float_bits(x[i])) << t->isa << " i=" << i;
      }
    }
  }
}

// Every ISA mirrors exp_poly's operation sequence, so element values are identical to scalar; the
// sum is an fp32 reduction of n non-negative terms: within (n+1) * u * sum of the reference. Each
// element also carries the rounding of x - max (relative u*|x - max| after exp) and exp's 2 ulp.
TEST(KernelSoftmax, RowOpsMatchScalarBitsAndReference) {
  std::mt19937 rng(17);
  const KernelTable* scalar = kernel_table_for("scalar");
  for (size_t n : {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 255, 512, 1000}) {
    std::vector<float> x(n);
    fill_floats(x.data(), n, rng, -30.0f, 30.0f);
    if (n > 4) x[3] = -std::numeric_limits<float>::infinity();
    if (n > 5) x[4] = -1e30f;
    std::vector<double> want(n);
    const float max = scalar->softmax.reduce_max(x.data(), n);
    const double want_sum = ref::exp_sum(x.data(), n, max, want.data());
    std::vector<float> scalar_exp(x);
    scalar->softmax.exp_sum(scalar_exp.data(), n, max);
    std::vector<float> scalar_cap(x);
    scalar->softmax.softcap(scalar_cap.data(), n, 20.0f);
    for (const KernelTable* t : tables()) {
      Guarded buf(n * 4);
      std::memcpy(buf.as<float>(), x.data(), n * 4);
      ASSERT_EQ(max, t->softmax.reduce_max(buf.as<float>(), n)) << t->isa;
      const float sum = t->softmax.exp_sum(buf.as<float>(), n, max);
      ASSERT_LE(std::fabs(sum - want_sum), (n + 64) * kU * want_sum) << t->isa << " n=" << n;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(float_bits(scalar_exp[i]), float_bits(buf.as<float>()[i])) << t->isa << " exp i=" << i;
        if (want[i] == 0) {
          ASSERT_EQ(0.0f, buf.as<float>()[i]) << t->isa;
          continue;
        }
        ASSERT_LE(std::fabs(buf.as<float>()[i] - want[i]), (std::fabs(x[i] - max) + 4) * kU * want[i])
            << t->isa;
      }
      t->softmax.scale(buf.as<float>(), n, 0.37f);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(scalar_exp[i] * 0.37f, buf.as<float>()[i]) << t->isa;
      // softcap: tanh is within a few ulp of 1 absolute (polynomial below 0.625, 1 - 2/(e^2x+1)
      // above), so cap * tanh is within cap * 2^-21 of the true value.
      std::memcpy(buf.as<float>(), x.data(), n * 4);
      t->softmax.softcap(buf.as<float>(), n, 20.0f);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(float_bits(scalar_cap[i]), float_bits(buf.as<float>()[i])) << t->isa << " softcap " << x[i];
        ASSERT_LE(std::fabs(buf.as<float>()[i] - ref::softcap(x[i], 20.0)), 20.0 * std::ldexp(1.0, -21))
            << x[i];
      }
    }
  }
}

// Rotary is two products and one sum per element with no FMA: the same bits on every ISA, within
// 2u * (|a c| + |b s|) of the exact value.
TEST(KernelRotary, BitExactAcrossIsasAndNearReference) {
  std::mt19937 rng(23);
  const KernelTable* scalar = kernel_table_for("scalar");
  for (size_t rotary_dim : {2, 4, 8, 16, 24, 32, 64, 80, 96, 128, 136, 256})
    for (bool interleaved : {false, true}) {
      Guarded x(rotary_dim * 4), c(rotary_dim / 2 * 4), s(rotary_dim / 2 * 4);
      fill_floats(x.as<float>(), rotary_dim, rng, -3.0f, 3.0f);
      for (size_t i = 0; i < rotary_dim / 2; ++i) {
        const float angle = static_cast<float>(rng() % 10000) * 0.01f;
        c.as<float>()[i] = std::cos(angle);
        s.as<float>()[i] = std::sin(angle);
      }
      std::vector<float> want(rotary_dim);
      scalar->rotary.apply(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, want.data());
      std::vector<double> exact(rotary_dim);
      ref::rotary(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, exact.data());
      for (size_t i = 0; i < rotary_dim; ++i) {
        const size_t pair = interleaved ? i / 2 : i % (rotary_dim / 2);
        const size_t partner = interleaved ? (i ^ 1) : (i < rotary_dim / 2 ? i + rotary_dim / 2 : i - rotary_dim / 2);
        const double mag = std::fabs(x.as<float>()[i] * c.as<float>()[pair]) +
                           std::fabs(x.as<float>()[partner] * s.as<float>()[pair]);
        ASSERT_LE(std::fabs(want[i] - exact[i]), 2 * kU * mag + 1e-30);
      }
      for (const KernelTable* t : tables()) {
        Guarded y(rotary_dim * 4);
        t->rotary.apply(x.as<float>(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, y.as<float>());
        ASSERT_EQ(0, std::memcmp(want.data(), y.as<float>(), rotary_dim * 4)) << t->isa << " dim=" << rotary_dim;
        // In place (x and y alias).
        std::vector<float> inplace(x.as<float>(), x.as<float>() + rotary_dim);
        t->rotary.apply(inplace.data(), c.as<float>(), s.as<float>(), rotary_dim, interleaved, inplace.data());
        ASSERT_EQ(0, std::memcmp(want.data(), inplace.data(), rotary_dim * 4)) << t->isa << " in place";
      }
    }
}

TEST(KernelDispatch, EveryListedIsaHasACompleteTable) {
  for (const std::string& isa : available_isas()) {
    const KernelTable* t = kernel_table_for(isa);
    ASSERT_NE(nullptr, t) << isa;
    EXPECT_EQ(isa, std::string(t->isa));
    EXPECT_TRUE(t->qk.f32 && t->qk.f16 && t->qk.bf16 && t->qk.s8 && t->qk.s4 && t->qk.packed);
    EXPECT_TRUE(t->sv.f32 && t->sv.f16 && t->sv.bf16 && t->sv.s8 && t->sv.s4);
    EXPECT_TRUE(t->kv.quantize_s8 && t->kv.quantize_s4 && t->kv.to_f16 && t->kv.to_bf16);
    EXPECT_TRUE(t->softmax.exp_sum && t->softmax.softcap && t->rotary.apply);
  }
}

}  // namespace
}  // namespace attnkit
