// attnkit: error reporting without exceptions.
// Every public entry point returns a Status; a failed one carries one line naming the input or
// attribute and the rule it broke, which the CLI prints verbatim and the JS package rethrows. An allocation
// that failed for valid inputs says so (out_of_memory()): the C ABI returns ATTNKIT_INTERNAL_ERROR for it.
#pragma once
#include <string>
#include <utility>

namespace attnkit {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), false); }
  static Status OutOfMemory(std::string message) { return Status(std::move(message), true); }
  bool ok() const { return !failed_; }
  bool out_of_memory() const { return out_of_memory_; }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool out_of_memory)
      : failed_(true), out_of_memory_(out_of_memory), message_(std::move(message)) {}
  bool failed_ = false;
  bool out_of_memory_ = false;
  std::string message_;
};

// Propagates a failed Status to the caller.
#define ATTNKIT_RETURN_IF_ERROR(expr)         \
  do {                                        \
    ::attnkit::Status _st = (expr);           \
    if (!_st.ok()) return _st;                \
  } while (0)

}  // namespace attnkit
