// attnkit kernel tests, shared pieces: guarded buffers (inputs flush against an inaccessible page on Linux, so
// a read or write past a row's end faults), the ISAs under test, the shape grid, and cache/float fillers. Used
// by kernels_qk_sv_test.cc and kernels_test.cc.
#pragma once
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

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#include <unistd.h>
#define ATTNKIT_GUARD_PAGES 1
#endif

namespace attnkit {
namespace kernel_test {

using ref::CacheElem;

// fp32 unit roundoff: every error bound below is a multiple of it.
constexpr double kU = 1.0 / (1 << 24);

// `bytes` of storage whose last byte is the last byte before an inaccessible page; elsewhere a
// trailing canary catches overruns on writes.
class Guarded {
 public:
  explicit Guarded(size_t bytes) {
#if ATTNKIT_GUARD_PAGES
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span_ = (bytes + page - 1) / page * page + page;
    void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = static_cast<uint8_t*>(m);
    mprotect(base_ + span_ - page, page, PROT_NONE);
    data_ = base_ + span_ - page - bytes;
#else
    bytes_ = bytes;
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
  uint8_t* data_ = nullptr;
#if ATTNKIT_GUARD_PAGES
  uint8_t* base_ = nullptr;
  size_t span_ = 0;
#else
  size_t bytes_ = 0;
  std::vector<uint8_t> storage_;
#endif
};

inline const CacheElem kAllElems[] = {CacheElem::kF32, CacheElem::kF16, CacheElem::kBF16, CacheElem::kS8,
                                      CacheElem::kS4};
const size_t kHs[] = {8, 16, 24, 64, 80, 128, 136, 256};
const size_t kMs[] = {1, 2, 3, 4, 7, 16, 65};
const size_t kNs[] = {1, 2, 15, 16, 17, 33, 255, 512};

// Every ISA this host runs or emulates; ATTNKIT_TEST_ISAS=a,b narrows it (the aarch64 run under qemu
// checks only real NEON: the other ISAs are covered natively on x86, 25x faster).
inline std::vector<const KernelTable*> tables() {
  const char* only = std::getenv("ATTNKIT_TEST_ISAS");
  const std::string wanted = only ? "," + std::string(only) + "," : "";
  std::vector<const KernelTable*> out;
  for (const std::string& isa : available_isas())
    if (wanted.empty() || wanted.find("," + isa + ",") != std::string::npos) out.push_back(kernel_table_for(isa));
  return out;
}

// The kernel of one family that serves cache element e, given as the family's five members.
template <typename Fn>
Fn for_elem(CacheElem e, Fn f32, Fn f16, Fn bf16, Fn s8, Fn s4) {
  switch (e) {
    case CacheElem::kF32: return f32;
    case CacheElem::kF16: return f16;
    case CacheElem::kBF16: return bf16;
    case CacheElem::kS8: return s8;
    case CacheElem::kS4: return s4;
  }
  return nullptr;
}
inline QkGemmFn qk_direct(const KernelTable& t, CacheElem e) {
  return for_elem(e, t.qk.f32, t.qk.f16, t.qk.bf16, t.qk.s8, t.qk.s4);
}
inline QkPackFn qk_pack(const KernelTable& t, CacheElem e) {
  return for_elem(e, t.qk.pack_f32, t.qk.pack_f16, t.qk.pack_bf16, t.qk.pack_s8, t.qk.pack_s4);
}
inline SvGemmFn sv_fn(const KernelTable& t, CacheElem e) {
  return for_elem(e, t.sv.f32, t.sv.f16, t.sv.bf16, t.sv.s8, t.sv.s4);
}

// Fills a cache of N rows (row stride ldk bytes) with random values of the dtype's full range.
inline void fill_cache(CacheElem e, size_t N, size_t H, size_t ldk, uint8_t* K, std::mt19937& rng) {
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

inline void fill_floats(float* x, size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> uni(lo, hi);
  for (size_t i = 0; i < n; ++i) x[i] = uni(rng);
}

// The grid's largest products (e.g. M=65, N=512, H=256) only repeat tiles and tails that smaller ones
// already cover, at most of the suite's cost (and minutes under qemu): skip products above 2^21.
inline bool worth_testing(size_t M, size_t N, size_t H) { return M * N * H <= (size_t{1} << 21); }

// A row stride: tight for even N, padded (so the kernel must honour ldk) for odd N.
inline size_t stride_for(CacheElem e, size_t H, size_t N) {
  return ref::cache_row_bytes(e, H) + (N % 2 ? 40 : 0);
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

}  // namespace kernel_test
}  // namespace attnkit
