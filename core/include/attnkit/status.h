// attnkit: error reporting without exceptions.
// Every public entry point returns a Status; a failed one carries one line naming the input or
// attribute and the rule it broke, which the CLI prints verbatim and the JS package rethrows.
#pragma once
#include <string>
#include <utility>

namespace attnkit {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// Propagates a failed Status to the caller.
#define ATTNKIT_RETURN_IF_ERROR(expr)         \
  do {                                        \
    ::attnkit::Status _st = (expr);           \
    if (!_st.ok()) return _st;                \
  } while (0)

}  // namespace attnkit
