// attnkit: dtype tables and tensor helpers behind attnkit/tensor.h.
#include "attnkit/tensor.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#define ATTNKIT_HUGE_PAGES 1
#endif

namespace attnkit {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kInt8: return 1;
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

bool dtype_from_name(const std::string& name, DType* dtype) {
  static const DType all[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                              DType::kUInt8,   DType::kInt32,   DType::kInt64};
  for (DType d : all) {
    if (name == dtype_name(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

int64_t shape_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void Tensor::reset_uninitialized(DType new_dtype, Shape new_shape) {
  // The byte count is checked in 64 bits: on wasm32 size_t would wrap and under-allocate. Beyond the vector's
  // max_size (2 GiB on wasm32) resize() would throw length_error, which callers would report as an internal
  // error rather than as memory they cannot have.
  const int64_t elements = shape_elements(new_shape);
  const uint64_t size = static_cast<uint64_t>(dtype_size(new_dtype));
  if (elements < 0 || static_cast<uint64_t>(elements) > storage.max_size() / size) throw std::bad_alloc();
  dtype = new_dtype;
  shape = std::move(new_shape);
  storage.clear();
  storage.resize(static_cast<size_t>(elements) * dtype_size(dtype));
}

void Tensor::reset(DType new_dtype, Shape new_shape) {
  reset_uninitialized(new_dtype, std::move(new_shape));
  if (!storage.empty()) std::memset(storage.data(), 0, storage.size());  // memset(nullptr, 0, 0) is undefined
}

namespace detail {
namespace {

// glibc serves requests above 128 KiB with fresh mmaps (page faults on every call), so the pool starts
// below that; small buffers are reused well by malloc itself.
constexpr size_t kPoolMinBytes = size_t{64} << 10;
constexpr size_t kPoolMaxBytes = size_t{256} << 20;  // most memory kept for reuse
constexpr size_t kPoolMaxBlocks = 16;

// Blocks above kPoolMaxBytes are mapped afresh by every call that needs one, and in 4 KB pages their first writes
// fault 256 times a MiB: a stateless decode step after 131,071 fp32 tokens (N_k = 8, H = 128: two 537 MB presents)
// spent 4.2 s of its 4.4 in page faults on this VM. On Linux they come 2 MiB-aligned with transparent huge pages
// asked for (MADV_HUGEPAGE; THP's "madvise" mode is the usual default): that step then took 0.23 s.
constexpr size_t kHugePage = size_t{2} << 20;

void* aligned_new(size_t bytes) {
#ifdef ATTNKIT_HUGE_PAGES
  if (bytes > kPoolMaxBytes) {
    const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    if (start + kHugePage > aligned) munmap(reinterpret_cast<void*>(aligned + size), start + kHugePage - aligned);
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advice: 4 KB pages where THP is off
    return reinterpret_cast<void*>(aligned);
  }
#endif
  return ::operator new(bytes, std::align_val_t(kTensorAlignment));
}

// `bytes` as the block was allocated with.
void aligned_delete(void* p, size_t bytes) noexcept {
#ifdef ATTNKIT_HUGE_PAGES
  if (bytes > kPoolMaxBytes) {
    munmap(p, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    return;
  }
#endif
  ::operator delete(p, std::align_val_t(kTensorAlignment));
}

struct Block {
  void* ptr;
  size_t bytes;  // the block's real size (it may serve a slightly smaller request)
};

struct Pool {
  std::mutex mu;
  std::vector<Block> free_blocks;        // oldest first
  std::vector<Block> live;               // pooled blocks handed out, to recover their real size
  size_t free_bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: tensors may be freed during static teardown
  return *p;
}

std::atomic<bool> poison_new_buffers{false};

void* allocate(size_t bytes) {
  if (bytes < kPoolMinBytes) return aligned_new(bytes);
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    // Best fit within +25%: a decode loop's buffers grow a little every step.
    size_t best = p.free_blocks.size();
    for (size_t i = 0; i < p.free_blocks.size(); ++i) {
      const size_t b = p.free_blocks[i].bytes;
      if (b >= bytes && b - bytes <= bytes / 4 && (best == p.free_blocks.size() || b < p.free_blocks[best].bytes))
        best = i;
    }
    if (best < p.free_blocks.size()) {
      Block block = p.free_blocks[best];
      p.free_blocks.erase(p.free_blocks.begin() + static_cast<std::ptrdiff_t>(best));
      p.free_bytes -= block.bytes;
      p.live.push_back(block);
      return block.ptr;
    }
  }
  void* ptr = aligned_new(bytes);
  std::lock_guard<std::mutex> lock(p.mu);
  p.live.push_back(Block{ptr, bytes});
  return ptr;
}

}  // namespace

void* pool_allocate(size_t bytes) {
  void* ptr = allocate(bytes);
  if (poison_new_buffers.load(std::memory_order_relaxed)) std::memset(ptr, 0xFF, bytes);
  return ptr;
}

void set_poison_new_buffers(bool on) noexcept { poison_new_buffers.store(on, std::memory_order_relaxed); }

void pool_free(void* ptr, size_t bytes) noexcept {
  if (!ptr) return;
  if (bytes < kPoolMinBytes) {
    aligned_delete(ptr, bytes);
    return;
  }
  Pool& p = pool();
  std::vector<Block> release;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    Block block{ptr, bytes};
    for (size_t i = 0; i < p.live.size(); ++i) {
      if (p.live[i].ptr == ptr) {
        block = p.live[i];
        p.live.erase(p.live.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    if (block.bytes > kPoolMaxBytes) {
      release.push_back(block);
    } else {
      p.free_blocks.push_back(block);
      p.free_bytes += block.bytes;
      while (p.free_bytes > kPoolMaxBytes || p.free_blocks.size() > kPoolMaxBlocks) {
        release.push_back(p.free_blocks.front());
        p.free_bytes -= p.free_blocks.front().bytes;
        p.free_blocks.erase(p.free_blocks.begin());
      }
    }
  }
  for (const Block& b : release) aligned_delete(b.ptr, b.bytes);
}

void pool_trim() noexcept {
  Pool& p = pool();
  std::vector<Block> release;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    release.swap(p.free_blocks);
    p.free_bytes = 0;
  }
  for (const Block& b : release) aligned_delete(b.ptr, b.bytes);
}

}  // namespace detail

}  // namespace attnkit
