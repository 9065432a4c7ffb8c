// attnkit: runs a case through core/reference, the double-precision oracle (`attnkit run --reference`).
// Lives beside the case code rather than in attnkit_core because the reference library is native-only;
// it decodes attributes/inputs with the same op_registry helpers, so errors match run_op's.
#include <cstring>

#include "case_file.h"
#include "gqa_reference.h"
#include "qattention_reference.h"

namespace attnkit {

namespace {

CaseOutput float64_output(const std::string& name, const std::vector<double>& values, const Shape& shape) {
  CaseOutput o;
  o.name = name;
  o.dtype = "float64";
  o.shape = shape;
  o.bytes.resize(values.size() * sizeof(double));
  if (!values.empty()) std::memcpy(o.bytes.data(), values.data(), o.bytes.size());
  return o;
}

Status reference_gqa(const JsonValue& attrs, const InputMap& inputs, const std::vector<std::string>& requested,
                     std::vector<CaseOutput>* outputs) {
  GqaCall call;
  ATTNKIT_RETURN_IF_ERROR(decode_gqa_call(attrs, inputs, requested, &call));
  reference::GqaReferenceResult result;
  ATTNKIT_RETURN_IF_ERROR(reference::group_query_attention(call.inputs, call.attrs, call.request, &result));
  for (const std::string& name : call.outputs) {
    if (name == "output") outputs->push_back(float64_output(name, result.output, result.output_shape));
    if (name == "output_qk") outputs->push_back(float64_output(name, result.output_qk, result.output_qk_shape));
    if (name == "present_key") outputs->push_back(case_output_from_tensor(name, std::move(result.present_key)));
    if (name == "present_value") outputs->push_back(case_output_from_tensor(name, std::move(result.present_value)));
  }
  return Status::Ok();
}

Status reference_qattention(const JsonValue& attrs, const InputMap& inputs,
                            const std::vector<std::string>& requested, std::vector<CaseOutput>* outputs) {
  QAttentionCall call;
  ATTNKIT_RETURN_IF_ERROR(decode_qattention_call(attrs, inputs, requested, &call));
  reference::QAttentionReferenceResult result;
  ATTNKIT_RETURN_IF_ERROR(reference::q_attention(call.inputs, call.attrs, call.request, &result));
  for (const std::string& name : call.outputs) {
    if (name == "output") outputs->push_back(float64_output(name, result.output, result.output_shape));
    if (name == "present") outputs->push_back(case_output_from_tensor(name, std::move(result.present)));
  }
  return Status::Ok();
}

using ReferenceHandler = Status (*)(const JsonValue& attrs, const InputMap& inputs,
                                    const std::vector<std::string>& requested, std::vector<CaseOutput>* outputs);

struct ReferenceEntry {
  const char* name;  // as in op_registry.cc's table
  ReferenceHandler run;
};

const ReferenceEntry kReferenceOps[] = {
    {"GroupQueryAttention", reference_gqa},
    {"QAttention", reference_qattention},
};

}  // namespace

Status run_reference(const std::string& op, const JsonValue& attrs, const InputMap& inputs,
                     const std::vector<std::string>& requested_outputs, std::vector<CaseOutput>* outputs) {
  ATTNKIT_RETURN_IF_ERROR(check_op(op));
  std::string name = canonical_op_name(op);
  outputs->clear();
  for (const ReferenceEntry& e : kReferenceOps) {
    if (name == e.name) return e.run(attrs, inputs, requested_outputs, outputs);
  }
  return Status::Error("op: " + name + " has no reference implementation");
}

}  // namespace attnkit
