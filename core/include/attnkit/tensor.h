// attnkit: the tensor types of the public API.
// TensorView borrows caller memory (inputs); Tensor owns its bytes (outputs). Shapes are int64 as in
// ONNX; data is dense row-major little-endian, so a view can wrap an ORT or JS buffer without copying.
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace attnkit {

enum class DType { kFloat32, kFloat16, kBFloat16, kInt8, kUInt8, kInt32, kInt64 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses "float32", "float16", ... ; returns false for an unknown name.
bool dtype_from_name(const std::string& name, DType* dtype);

using Shape = std::vector<int64_t>;

// Element count of a shape, or -1 when a dimension is negative or the count overflows int64.
int64_t shape_elements(const Shape& shape);
std::string shape_to_string(const Shape& shape);

struct TensorView {
  DType dtype = DType::kFloat32;
  Shape shape;
  const void* data = nullptr;

  int64_t elements() const { return shape_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data); }
};

// Where attnkit's own buffers (KV caches, presents, outputs) start, and where a caller's caches should: on a 64-byte
// cache line, so that rows whose size is a multiple of 64 bytes never straddle two lines. malloc returns large
// blocks 16 bytes past a page boundary, where every 64-byte load of an AVX512 kernel splits across two lines (decode
// T=4096, fp32 cache, one thread, warm: 796 against 602 us aligned, bench/RESULTS.md).
constexpr size_t kTensorAlignment = 64;

namespace detail {
// Large buffers (>= 64 KiB) are recycled through a small pool, as ORT's arena does: a caller that runs
// the same shapes again gets memory whose pages are already mapped instead of faulting in (and zeroing)
// fresh pages on every call, which otherwise dominates a stateless decode step. Every buffer starts on a
// kTensorAlignment boundary.
void* pool_allocate(size_t bytes);
void pool_free(void* p, size_t bytes) noexcept;
// Returns the pooled memory to the system.
void pool_trim() noexcept;
// For tests: every buffer handed out from now on starts as 0xFF bytes (NaN floats, -1 integers), so an output
// byte a call leaves unwritten shows up, where a recycled buffer would hold an earlier, identical call's bytes.
void set_poison_new_buffers(bool on) noexcept;
}  // namespace detail

// Allocator for tensor storage: pooled, and default-initializing (resize() leaves bytes unset, so a
// buffer that is about to be overwritten is not zeroed first).
template <typename T>
struct TensorAllocator {
  using value_type = T;
  TensorAllocator() = default;
  template <typename U>
  TensorAllocator(const TensorAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(detail::pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { detail::pool_free(p, n * sizeof(T)); }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(p)) U;
    else ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const TensorAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const TensorAllocator<U>&) const noexcept { return false; }
};

using TensorBytes = std::vector<uint8_t, TensorAllocator<uint8_t>>;

// Frees the memory attnkit keeps for reuse (see detail::pool_allocate).
inline void release_cached_memory() { detail::pool_trim(); }

struct Tensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  TensorBytes storage;

  // Allocates zero-filled storage for the shape; throws std::bad_alloc when it cannot be addressed.
  void reset(DType new_dtype, Shape new_shape);
  // Same, but leaves the bytes unset: for a caller that writes every byte.
  void reset_uninitialized(DType new_dtype, Shape new_shape);
  bool empty() const { return shape.empty() && storage.empty(); }
  int64_t elements() const { return shape_elements(shape); }
  size_t bytes() const { return storage.size(); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(storage.data()); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(storage.data()); }
  TensorView view() const { return TensorView{dtype, shape, storage.data()}; }
};

}  // namespace attnkit
