// attnkit: runs an operator by its ORT name with attributes as JSON and inputs by ORT name.
// One table maps op names to handlers; the CLI, the C ABI (and so the wasm/JS package) all go through
// it, so attribute and input checking — and their error messages — are the same on every target.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnkit/gqa.h"
#include "attnkit/qattention.h"
#include "attnkit/run_options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"
#include "common/json.h"

namespace attnkit {

using InputMap = std::map<std::string, TensorView>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Runs `op` ("GroupQueryAttention" or "com.microsoft.GroupQueryAttention", ...). `attrs` is a JSON
// object (or null: no attributes). `requested_outputs` empty means the op's default outputs.
// On success, *outputs holds the requested outputs in request order.
Status run_op(const std::string& op, const JsonValue& attrs, const InputMap& inputs,
              const std::vector<std::string>& requested_outputs, const RunOptions& options, NamedTensors* outputs);

// Ok when `op` names a registered operator; otherwise the error run_op would return.
Status check_op(const std::string& op);
// "GroupQueryAttention" for "com.microsoft.GroupQueryAttention" and the like.
std::string canonical_op_name(const std::string& op);
// The outputs a call of `op` that requests none returns (QAttention's depend on whether past is given).
const std::vector<std::string>& default_outputs(const std::string& op, bool has_past);

// ---------------------------------------------------------------------------------------------
// Building blocks for op handlers (shared by run_op, the reference runner in native/case, and any
// new op): they turn JSON attributes, named inputs and output names into an op's typed structs.

// Reads attributes from a JSON object by ORT name; finish() rejects any attribute never read.
class AttrReader {
 public:
  AttrReader(const JsonValue& attrs, std::string op) : attrs_(attrs), op_(std::move(op)) { known_.reserve(16); }
  // Each leaves *out unchanged when the attribute is absent; `required` makes absence an error.
  Status read_int(const char* name, int64_t* out, bool required = false);
  Status read_float(const char* name, float* out, bool required = false);
  Status read_string(const char* name, std::string* out, bool required = false);
  // Fails when attrs is neither an object nor null, or holds an attribute no read_* asked for.
  Status finish() const;

 private:
  const JsonValue* lookup(const char* name, bool required, Status* status);
  const JsonValue& attrs_;
  std::string op_;
  std::vector<std::string_view> known_;  // the read_* names: string literals, kept without copies
};

// Binds named inputs to an op's input struct: one (name, member) row per ORT input.
template <typename Inputs>
struct InputSlot {
  std::string_view name;  // compared by length first: most names differ there
  const TensorView* Inputs::*member;
};

template <typename Inputs, size_t N>
Status bind_inputs(const InputMap& inputs, const InputSlot<Inputs> (&slots)[N], const std::string& op,
                   Inputs* out) {
  for (const auto& entry : inputs) {
    bool found = false;
    for (const auto& slot : slots) {
      if (entry.first == slot.name) {
        out->*(slot.member) = &entry.second;
        found = true;
        break;
      }
    }
    if (!found) {
      std::string names;
      for (const auto& slot : slots) names += std::string(names.empty() ? "" : ", ") + std::string(slot.name);
      return Status::Error(entry.first + ": not an input of " + op + " (inputs: " + names + ")");
    }
  }
  return Status::Ok();
}

// Checks requested output names against `known` (no unknown or repeated names); an empty request
// becomes `defaults`.
Status resolve_outputs(const std::vector<std::string>& requested, const std::vector<std::string>& known,
                       const std::vector<std::string>& defaults, const std::string& op,
                       std::vector<std::string>* resolved);

// GroupQueryAttention's call, decoded from the generic form. `inputs` points into the InputMap.
struct GqaCall {
  GqaAttributes attrs;
  GqaInputs inputs;
  GqaRequest request;
  std::vector<std::string> outputs;  // resolved output names, in request order
};
Status decode_gqa_call(const JsonValue& attrs, const InputMap& inputs,
                       const std::vector<std::string>& requested_outputs, GqaCall* call);

// QAttention's call, decoded from the generic form (outputs: output, present; default output, plus
// present when past is given).
struct QAttentionCall {
  QAttentionAttributes attrs;
  QAttentionInputs inputs;
  QAttentionRequest request;
  std::vector<std::string> outputs;
};
Status decode_qattention_call(const JsonValue& attrs, const InputMap& inputs,
                              const std::vector<std::string>& requested_outputs, QAttentionCall* call);

}  // namespace attnkit
