// attnkit: the tensor types of the public API.
// TensorView borrows caller memory (inputs); Tensor owns its bytes (outputs). Shapes are int64 as in
// ONNX; data is dense row-major little-endian, so a view can wrap an ORT or JS buffer without copying.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
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

struct Tensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<uint8_t> storage;

  // Allocates zero-filled storage for the shape; throws std::bad_alloc when it cannot be addressed.
  void reset(DType new_dtype, Shape new_shape);
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
