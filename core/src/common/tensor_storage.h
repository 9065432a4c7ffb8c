// attnkit: the first check each op's validator makes on every tensor it is given: its shape describes memory that
// can exist, and its data pointer is set when it has elements. A C or C++ caller's null pointer or negative dimension
// is refused with the tensor's name instead of being read.
#pragma once
#include <cstdint>
#include <initializer_list>
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

// Whether an input starts inside an output's storage: a caller feeding an output back in (a decode loop passing
// the last present as the past, into the same outputs). Resetting that output would free what is still to be read,
// so the op then computes into fresh tensors and moves them in at the end.
inline bool inputs_view_outputs(std::initializer_list<const TensorView*> inputs,
                                std::initializer_list<const Tensor*> outputs) {
  for (const TensorView* in : inputs) {
    if (!in || !in->data) continue;
    const auto* at = static_cast<const uint8_t*>(in->data);
    for (const Tensor* out : outputs)
      if (!out->storage.empty() && at >= out->storage.data() && at < out->storage.data() + out->storage.size())
        return true;
  }
  return false;
}

}  // namespace attnkit
