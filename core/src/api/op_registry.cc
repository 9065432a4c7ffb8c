// attnkit: the op table behind run_op, and the JSON -> typed-struct helpers every handler uses.
// Adding an op = one decode function (attributes, inputs, outputs) + one handler + one table row.
#include "api/op_registry.h"

#include <cmath>
#include <limits>

namespace attnkit {

// ---------------------------------------------------------------------------------------------
// AttrReader

const JsonValue* AttrReader::lookup(const char* name, bool required, Status* status) {
  known_.emplace_back(name);
  const JsonValue* v = attrs_.is_object() ? attrs_.find(known_.back()) : nullptr;
  if (!v && required) *status = Status::Error(std::string(name) + ": required attribute of " + op_ + " is missing");
  return v;
}

Status AttrReader::read_int(const char* name, int64_t* out, bool required) {
  Status st;
  const JsonValue* v = lookup(name, required, &st);
  if (!v) return st;
  if (!v->is_number() || !v->as_int64(out)) {
    std::string got = JsonValue::type_name(v->type());
    if (v->is_number()) {
      JsonWriter text;
      text.value(*v);
      got = text.str();
    }
    return Status::Error(std::string(name) + ": attribute must be an integer, got " + got);
  }
  return Status::Ok();
}

Status AttrReader::read_float(const char* name, float* out, bool required) {
  Status st;
  const JsonValue* v = lookup(name, required, &st);
  if (!v) return st;
  // JSON has no infinities or NaN, which ONNX float attributes may hold (a QAttention mask_filter_value of -inf):
  // they come spelled as JavaScript writes them, and each op's validation decides whether it takes them.
  if (v->is_string()) {
    const std::string& text = v->as_string();
    if (text == "Infinity" || text == "-Infinity" || text == "NaN") {
      *out = text == "NaN" ? std::numeric_limits<float>::quiet_NaN()
                           : (text[0] == '-' ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity();
      return Status::Ok();
    }
  }
  if (!v->is_number()) {
    return Status::Error(std::string(name) +
                         ": attribute must be a number (\"Infinity\", \"-Infinity\" or \"NaN\" for those), got " +
                         JsonValue::type_name(v->type()));
  }
  // ONNX float attributes are float32; the op sees the value rounded once, as ORT does.
  *out = static_cast<float>(v->as_double());
  return Status::Ok();
}

Status AttrReader::read_string(const char* name, std::string* out, bool required) {
  Status st;
  const JsonValue* v = lookup(name, required, &st);
  if (!v) return st;
  if (!v->is_string()) {
    return Status::Error(std::string(name) + ": attribute must be a string, got " + JsonValue::type_name(v->type()));
  }
  *out = v->as_string();
  return Status::Ok();
}

Status AttrReader::finish() const {
  if (attrs_.is_null()) return Status::Ok();
  if (!attrs_.is_object()) {
    return Status::Error(std::string("attrs: must be an object, got ") + JsonValue::type_name(attrs_.type()));
  }
  for (const auto& m : attrs_.members()) {
    bool read = false;
    for (std::string_view k : known_) read = read || m.first == k;
    if (!read) return Status::Error(m.first + ": not an attribute of " + op_);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Outputs

Status resolve_outputs(const std::vector<std::string>& requested, const std::vector<std::string>& known,
                       const std::vector<std::string>& defaults, const std::string& op,
                       std::vector<std::string>* resolved) {
  if (requested.empty()) {
    *resolved = defaults;
    return Status::Ok();
  }
  resolved->clear();
  for (const std::string& name : requested) {
    bool ok = false;
    for (const std::string& k : known) ok = ok || k == name;
    if (!ok) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
      return Status::Error(name + ": not an output of " + op + " (outputs: " + names + ")");
    }
    for (const std::string& r : *resolved) {
      if (r == name) return Status::Error(name + ": output requested twice");
    }
    resolved->push_back(name);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// GroupQueryAttention

namespace {

const char kGqa[] = "GroupQueryAttention";
const std::vector<std::string> kGqaOutputs{"output", "present_key", "present_value", "output_qk"};
const std::vector<std::string> kGqaDefaults{"output", "present_key", "present_value"};

const InputSlot<GqaInputs> kGqaInputSlots[] = {
    {"query", &GqaInputs::query},
    {"key", &GqaInputs::key},
    {"value", &GqaInputs::value},
    {"past_key", &GqaInputs::past_key},
    {"past_value", &GqaInputs::past_value},
    {"seqlens_k", &GqaInputs::seqlens_k},
    {"total_sequence_length", &GqaInputs::total_sequence_length},
    {"cos_cache", &GqaInputs::cos_cache},
    {"sin_cache", &GqaInputs::sin_cache},
    {"position_ids", &GqaInputs::position_ids},
    {"attention_bias", &GqaInputs::attention_bias},
    {"head_sink", &GqaInputs::head_sink},
    {"k_scale", &GqaInputs::k_scale},
    {"v_scale", &GqaInputs::v_scale},
    {"q_norm_weight", &GqaInputs::q_norm_weight},
    {"k_norm_weight", &GqaInputs::k_norm_weight},
};

Status decode_gqa_attributes(const JsonValue& json, GqaAttributes* a) {
  AttrReader r(json, kGqa);
  ATTNKIT_RETURN_IF_ERROR(r.read_int("num_heads", &a->num_heads, /*required=*/true));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("kv_num_heads", &a->kv_num_heads, /*required=*/true));
  ATTNKIT_RETURN_IF_ERROR(r.read_float("scale", &a->scale));
  ATTNKIT_RETURN_IF_ERROR(r.read_float("softcap", &a->softcap));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("local_window_size", &a->local_window_size));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("do_rotary", &a->do_rotary));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("rotary_interleaved", &a->rotary_interleaved));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("smooth_softmax", &a->smooth_softmax));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("qk_output", &a->qk_output));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("causal", &a->causal));
  ATTNKIT_RETURN_IF_ERROR(r.read_string("k_quant_type", &a->k_quant_type));
  ATTNKIT_RETURN_IF_ERROR(r.read_string("v_quant_type", &a->v_quant_type));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("kv_cache_bit_width", &a->kv_cache_bit_width));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("sliding_window_cache", &a->sliding_window_cache));
  ATTNKIT_RETURN_IF_ERROR(r.read_float("qk_norm_epsilon", &a->qk_norm_epsilon));
  return r.finish();
}

Status run_gqa(const JsonValue& attrs, const InputMap& inputs, const std::vector<std::string>& requested,
               const RunOptions& options, NamedTensors* outputs) {
  GqaCall call;
  ATTNKIT_RETURN_IF_ERROR(decode_gqa_call(attrs, inputs, requested, &call));
  GqaOutputs result;
  ATTNKIT_RETURN_IF_ERROR(group_query_attention(call.inputs, call.attrs, call.request, &result, options));
  outputs->clear();
  for (const std::string& name : call.outputs) {
    Tensor* t = name == "output"          ? &result.output
                : name == "present_key"   ? &result.present_key
                : name == "present_value" ? &result.present_value
                                          : &result.output_qk;
    outputs->emplace_back(name, std::move(*t));
  }
  return Status::Ok();
}

}  // namespace

Status decode_gqa_call(const JsonValue& attrs, const InputMap& inputs,
                       const std::vector<std::string>& requested_outputs, GqaCall* call) {
  ATTNKIT_RETURN_IF_ERROR(decode_gqa_attributes(attrs, &call->attrs));
  ATTNKIT_RETURN_IF_ERROR(bind_inputs(inputs, kGqaInputSlots, kGqa, &call->inputs));
  ATTNKIT_RETURN_IF_ERROR(resolve_outputs(requested_outputs, kGqaOutputs, kGqaDefaults, kGqa, &call->outputs));
  call->request.present_key = call->request.present_value = call->request.output_qk = false;
  for (const std::string& name : call->outputs) {
    if (name == "present_key") call->request.present_key = true;
    if (name == "present_value") call->request.present_value = true;
    if (name == "output_qk") call->request.output_qk = true;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// QAttention

namespace {

const char kQAttention[] = "QAttention";
// Default outputs: output, and present when past is given (ORT fails without it).
const std::vector<std::string> kQAttentionOutputs{"output", "present"}, kQAttentionWithoutPast{"output"};

const InputSlot<QAttentionInputs> kQAttentionInputSlots[] = {
    {"input", &QAttentionInputs::input},
    {"weight", &QAttentionInputs::weight},
    {"bias", &QAttentionInputs::bias},
    {"input_scale", &QAttentionInputs::input_scale},
    {"weight_scale", &QAttentionInputs::weight_scale},
    {"mask_index", &QAttentionInputs::mask_index},
    {"input_zero_point", &QAttentionInputs::input_zero_point},
    {"weight_zero_point", &QAttentionInputs::weight_zero_point},
    {"past", &QAttentionInputs::past},
};

Status decode_qattention_attributes(const JsonValue& json, QAttentionAttributes* a) {
  AttrReader r(json, kQAttention);
  ATTNKIT_RETURN_IF_ERROR(r.read_int("num_heads", &a->num_heads, /*required=*/true));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("unidirectional", &a->unidirectional));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("do_rotary", &a->do_rotary));
  ATTNKIT_RETURN_IF_ERROR(r.read_int("past_present_share_buffer", &a->past_present_share_buffer));
  ATTNKIT_RETURN_IF_ERROR(r.read_float("mask_filter_value", &a->mask_filter_value));
  ATTNKIT_RETURN_IF_ERROR(r.read_float("scale", &a->scale));
  return r.finish();
}

Status run_qattention(const JsonValue& attrs, const InputMap& inputs, const std::vector<std::string>& requested,
                      const RunOptions& options, NamedTensors* outputs) {
  QAttentionCall call;
  ATTNKIT_RETURN_IF_ERROR(decode_qattention_call(attrs, inputs, requested, &call));
  QAttentionOutputs result;
  ATTNKIT_RETURN_IF_ERROR(q_attention(call.inputs, call.attrs, call.request, &result, options));
  outputs->clear();
  for (const std::string& name : call.outputs) {
    outputs->emplace_back(name, std::move(name == "output" ? result.output : result.present));
  }
  return Status::Ok();
}

}  // namespace

Status decode_qattention_call(const JsonValue& attrs, const InputMap& inputs,
                              const std::vector<std::string>& requested_outputs, QAttentionCall* call) {
  ATTNKIT_RETURN_IF_ERROR(decode_qattention_attributes(attrs, &call->attrs));
  ATTNKIT_RETURN_IF_ERROR(bind_inputs(inputs, kQAttentionInputSlots, kQAttention, &call->inputs));
  ATTNKIT_RETURN_IF_ERROR(resolve_outputs(requested_outputs, kQAttentionOutputs,
                                          default_outputs(kQAttention, inputs.count("past") > 0), kQAttention,
                                          &call->outputs));
  call->request.present = false;
  for (const std::string& name : call->outputs) {
    if (name == "present") call->request.present = true;
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// The op table.

namespace {

using OpHandler = Status (*)(const JsonValue& attrs, const InputMap& inputs,
                             const std::vector<std::string>& requested, const RunOptions& options,
                             NamedTensors* outputs);

struct OpEntry {
  const char* name;  // ORT's op type, without the com.microsoft domain
  OpHandler run;
};

const OpEntry kOps[] = {
    {"GroupQueryAttention", run_gqa},
    {"QAttention", run_qattention},
};

const OpEntry* find_op(const std::string& op) {
  std::string name = canonical_op_name(op);
  for (const OpEntry& e : kOps) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

std::string canonical_op_name(const std::string& op) {
  static const std::string kDomain = "com.microsoft.";
  if (op.compare(0, kDomain.size(), kDomain) == 0) return op.substr(kDomain.size());
  return op;
}

const std::vector<std::string>& default_outputs(const std::string& op, bool has_past) {
  if (canonical_op_name(op) == kQAttention) return has_past ? kQAttentionOutputs : kQAttentionWithoutPast;
  return kGqaDefaults;
}

Status check_op(const std::string& op) {
  if (find_op(op)) return Status::Ok();
  std::string names;
  for (const OpEntry& e : kOps) names += std::string(names.empty() ? "" : ", ") + e.name;
  return Status::Error("op: \"" + op + "\" is not a supported operator (" + names + ")");
}

Status run_op(const std::string& op, const JsonValue& attrs, const InputMap& inputs,
              const std::vector<std::string>& requested_outputs, const RunOptions& options, NamedTensors* outputs) {
  ATTNKIT_RETURN_IF_ERROR(check_op(op));
  return find_op(op)->run(attrs, inputs, requested_outputs, options, outputs);
}

}  // namespace attnkit
