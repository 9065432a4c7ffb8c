// attnkit: dtype tables and tensor helpers behind attnkit/tensor.h.
#include "attnkit/tensor.h"

#include <limits>
#include <new>

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

void Tensor::reset(DType new_dtype, Shape new_shape) {
  // The byte count is checked in 64 bits: on wasm32 size_t would wrap and under-allocate.
  const int64_t elements = shape_elements(new_shape);
  const uint64_t size = static_cast<uint64_t>(dtype_size(new_dtype));
  if (elements < 0 || static_cast<uint64_t>(elements) > std::numeric_limits<size_t>::max() / size)
    throw std::bad_alloc();
  dtype = new_dtype;
  shape = std::move(new_shape);
  storage.assign(static_cast<size_t>(elements) * dtype_size(dtype), 0);
}

}  // namespace attnkit
