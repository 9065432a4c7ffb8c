// attnkit: the first check each op's validator makes on every tensor it is given: its shape describes memory that
// can exist, and its data pointer is set when it has elements. A C or C++ caller's null pointer or negative dimension
// is refused with the tensor's name instead of being read.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

inline Status check_tensor_storage(const TensorView* t, const char* name) {
  if (!t) return Status::Ok();
  for (int64_t d : t->shape)
    if (d < 0) return Status::Error(std::string(name) + ": shape " + shape_to_string(t->shape) +
                                    " has a negative dimension");
  const int64_t n = t->elements();
  if (n < 0 || n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(t->dtype)))
    return Status::Error(std::string(name) + ": element count of shape " + shape_to_string(t->shape) + " overflows");
  if (n > 0 && t->data == nullptr)
    return Status::Error(std::string(name) + ": data pointer is null for a non-empty tensor");
  return Status::Ok();
}

}  // namespace attnkit
