// attnkit: parsing of the per-call options' names (shared by the CLI, the C ABI and the tests).
#include "attnkit/run_options.h"

namespace attnkit {

bool attention_path_from_name(const std::string& name, AttentionPath* path) {
  if (name == "auto") *path = AttentionPath::kAuto;
  else if (name == "naive") *path = AttentionPath::kNaive;
  else if (name == "flash") *path = AttentionPath::kFlash;
  else return false;
  return true;
}

}  // namespace attnkit
