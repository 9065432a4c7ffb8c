// attnkit: loading case files into tensors, running them, and writing the results (case_file.h).
// Input construction follows DESIGN.md to the bit, because the JS package and the ORT comparison build
// the same tensors from the same case independently.
#include "case_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "common/half.h"

namespace attnkit {

InputMap Case::input_views() const {
  InputMap views;
  for (const auto& in : inputs) views[in.first] = in.second.view();
  return views;
}

namespace {

bool is_float_dtype(DType d) { return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16; }

void integer_range(DType d, int64_t* lo, int64_t* hi) {
  switch (d) {
    case DType::kInt8: *lo = -128; *hi = 127; break;
    case DType::kUInt8: *lo = 0; *hi = 255; break;
    case DType::kInt32: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); break;
    default: *lo = std::numeric_limits<int64_t>::min(); *hi = std::numeric_limits<int64_t>::max(); break;
  }
}

void store_integer(DType d, int64_t v, uint8_t* out) {
  switch (d) {
    case DType::kInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(out, &x, 1); break; }
    case DType::kUInt8: { uint8_t x = static_cast<uint8_t>(v); std::memcpy(out, &x, 1); break; }
    case DType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(out, &x, 4); break; }
    default: std::memcpy(out, &v, 8); break;
  }
}

// float32 nearest to v, but with round-to-odd: rounding that to fewer bits gives v's correctly
// rounded value (float keeps more than two extra bits over fp16 and bf16).
float round_to_odd_float(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return bits_float(float_bits(f) | 1u);
}

std::string number_text(const JsonValue& arr, size_t i) {
  JsonWriter w;
  w.float64(arr.number_at(i));
  return w.str();
}

Status fail(const std::string& input, const std::string& rule) { return Status::Error(input + ": " + rule); }

Status fill_from_data(const std::string& name, const JsonValue& data, DType dtype, Tensor* t) {
  if (!data.is_array() || !data.is_number_array()) {
    return fail(name, "data must be an array of numbers");
  }
  int64_t n = t->elements();
  if (static_cast<int64_t>(data.size()) != n) {
    return fail(name, "data has " + std::to_string(data.size()) + " values but shape " + shape_to_string(t->shape) +
                          " holds " + std::to_string(n));
  }
  size_t es = dtype_size(dtype);
  uint8_t* out = t->storage.data();
  if (is_float_dtype(dtype)) {
    for (size_t i = 0; i < data.size(); ++i) round_double_to_float_dtype(data.number_at(i), dtype, out + i * es);
    return Status::Ok();
  }
  int64_t lo, hi;
  integer_range(dtype, &lo, &hi);
  for (size_t i = 0; i < data.size(); ++i) {
    int64_t v;
    if (!data.int64_at(i, &v)) {
      return fail(name, "data[" + std::to_string(i) + "] = " + number_text(data, i) + " is not an " +
                            dtype_name(dtype) + " integer");
    }
    if (v < lo || v > hi) {
      return fail(name, "data[" + std::to_string(i) + "] = " + std::to_string(v) + " is out of range for " +
                            dtype_name(dtype));
    }
    store_integer(dtype, v, out + i * es);
  }
  return Status::Ok();
}

Status fill_from_base64(const std::string& name, const JsonValue& b64, Tensor* t) {
  if (!b64.is_string()) return fail(name, "base64 must be a string");
  std::vector<uint8_t> bytes;
  std::string why;
  if (!base64_decode(b64.as_string(), &bytes, &why)) return fail(name, "bad base64: " + why);
  if (bytes.size() != t->storage.size()) {
    return fail(name, "base64 holds " + std::to_string(bytes.size()) + " bytes but shape " +
                          shape_to_string(t->shape) + " of " + dtype_name(t->dtype) + " needs " +
                          std::to_string(t->storage.size()));
  }
  std::copy(bytes.begin(), bytes.end(), t->storage.begin());
  return Status::Ok();
}

// A seed may also be a string of decimal digits: JSON numbers above 2^53 lose digits in JavaScript, so that is the
// spelling that gives every uint64 seed the same tensor on every target.
bool decimal_uint64(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(ch - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

Status fill_from_random(const std::string& name, const JsonValue& spec, DType dtype, Tensor* t) {
  if (!spec.is_object()) return fail(name, "random must be an object {seed, low, high}");
  for (const auto& m : spec.members()) {
    if (m.first != "seed" && m.first != "low" && m.first != "high") {
      return fail(name, "random." + m.first + " is not a field of random (seed, low, high)");
    }
  }
  const JsonValue* seed_json = spec.find("seed");
  uint64_t state;
  if (!seed_json) return fail(name, "random.seed is required");
  const std::string range = "random.seed must be an integer in [0, 2^64)";
  if (seed_json->is_number()) {
    // A JSON number reads as a double in JavaScript: above 2^53 - 1 it would seed other tensors there, so it is
    // refused here too, with the JS package's words (judged on the double, as JS sees it).
    const double d = seed_json->as_double();
    if (!seed_json->as_uint64(&state) || state > (uint64_t{1} << 53) - 1) {
      const bool lost_digits = d == std::floor(d) && d > 0 && d < 18446744073709551616.0;
      return fail(name, lost_digits ? range + "; above 2^53 - 1 a number has lost digits in JavaScript: write it " +
                                          "as a decimal string" : range);
    }
  } else if (!seed_json->is_string() || !decimal_uint64(seed_json->as_string(), &state)) {
    return fail(name, range);
  }
  const JsonValue* low_json = spec.find("low");
  const JsonValue* high_json = spec.find("high");
  size_t n = static_cast<size_t>(t->elements());
  size_t es = dtype_size(dtype);
  uint8_t* out = t->storage.data();
  if (is_float_dtype(dtype)) {
    double low = -1.0, high = 1.0;
    if (low_json) {
      if (!low_json->is_number()) return fail(name, "random.low must be a number");
      low = low_json->as_double();
    }
    if (high_json) {
      if (!high_json->is_number()) return fail(name, "random.high must be a number");
      high = high_json->as_double();
    }
    if (!(low <= high)) return fail(name, "random.low must be <= random.high");
    for (size_t i = 0; i < n; ++i) {
      uint32_t u = splitmix64_next(&state);
      double v = low + (high - low) * (static_cast<double>(u >> 8) / 16777216.0);
      round_double_to_float_dtype(v, dtype, out + i * es);
    }
    return Status::Ok();
  }
  int64_t lo, hi;
  integer_range(dtype, &lo, &hi);
  int64_t low = lo, high = hi;
  if (low_json && !low_json->as_int64(&low)) return fail(name, "random.low must be an integer");
  if (high_json && !high_json->as_int64(&high)) return fail(name, "random.high must be an integer");
  if (low < lo || high > hi) {
    return fail(name, "random range [" + std::to_string(low) + ", " + std::to_string(high) + "] exceeds " +
                          dtype_name(dtype) + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  if (low > high) return fail(name, "random.low must be <= random.high");
  // span = high - low + 1 in mod-2^64 arithmetic; 0 means the whole int64 range (u % 2^64 = u).
  uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) + 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t u = splitmix64_next(&state);
    uint64_t offset = span == 0 ? u : u % span;
    int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + offset);
    store_integer(dtype, v, out + i * es);
  }
  return Status::Ok();
}

}  // namespace

void round_double_to_float_dtype(double v, DType dtype, void* out_element) {
  if (dtype == DType::kFloat32) {
    float f = static_cast<float>(v);
    std::memcpy(out_element, &f, 4);
    return;
  }
  float odd = round_to_odd_float(v);
  uint16_t h = dtype == DType::kFloat16 ? float_to_f16(odd) : float_to_bf16(odd);
  std::memcpy(out_element, &h, 2);
}

Status read_text_file(const std::string& path, std::string* text) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::Error(path + ": cannot open: " + std::strerror(errno));
  text->clear();
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text->append(buf, n);
  const int error = std::ferror(f) ? errno : 0;  // a directory opens, then reads fail with EISDIR
  std::fclose(f);
  if (error) return Status::Error(path + ": read error: " + std::strerror(error));
  return Status::Ok();
}

Status list_cases(const JsonValue& doc, std::vector<const JsonValue*>* cases) {
  cases->clear();
  if (doc.is_object()) {
    cases->push_back(&doc);
    return Status::Ok();
  }
  if (doc.is_array() && !doc.is_number_array()) {
    for (size_t i = 0; i < doc.size(); ++i) {
      if (!doc.at(i).is_object()) {
        return Status::Error("case #" + std::to_string(i) + ": must be an object, got " +
                             JsonValue::type_name(doc.at(i).type()));
      }
      cases->push_back(&doc.at(i));
    }
    return Status::Ok();
  }
  if (doc.is_array() && doc.size() == 0) return Status::Ok();
  if (doc.is_number_array()) return Status::Error("case #0: must be an object, got a number");  // stored packed
  return Status::Error(std::string("case file: must hold a case object or an array of them, got ") +
                       JsonValue::type_name(doc.type()));
}

Status build_tensor(const std::string& name, const JsonValue& json, Tensor* out) {
  if (!json.is_object()) return fail(name, "must be a tensor object {dtype, shape, data|base64|random}");
  for (const auto& m : json.members()) {
    const std::string& k = m.first;
    if (k != "dtype" && k != "shape" && k != "data" && k != "base64" && k != "random") {
      return fail(name, "\"" + k + "\" is not a tensor field (dtype, shape, data, base64, random)");
    }
  }
  const JsonValue* dtype_json = json.find("dtype");
  if (!dtype_json || !dtype_json->is_string()) return fail(name, "dtype is required (a string)");
  DType dtype;
  if (!dtype_from_name(dtype_json->as_string(), &dtype)) {
    return fail(name, "unknown dtype \"" + dtype_json->as_string() +
                          "\" (float32, float16, bfloat16, int8, uint8, int32, int64)");
  }
  const JsonValue* shape_json = json.find("shape");
  if (!shape_json || !shape_json->is_array() || !shape_json->is_number_array()) {
    return fail(name, "shape is required (an array of integers)");
  }
  Shape shape(shape_json->size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (!shape_json->int64_at(i, &shape[i]) || shape[i] < 0) {
      return fail(name, "shape[" + std::to_string(i) + "] = " + number_text(*shape_json, i) +
                            " must be a non-negative integer");
    }
  }
  int64_t elements = shape_elements(shape);
  uint64_t bytes = elements < 0 ? 0 : static_cast<uint64_t>(elements) * dtype_size(dtype);
  if (elements < 0 || static_cast<uint64_t>(elements) > kMaxCaseTensorBytes || bytes > kMaxCaseTensorBytes) {
    return fail(name, "shape " + shape_to_string(shape) + " is too large (over 4 GiB of " + dtype_name(dtype) + ")");
  }
  const JsonValue* data = json.find("data");
  const JsonValue* b64 = json.find("base64");
  const JsonValue* random = json.find("random");
  int sources = (data != nullptr) + (b64 != nullptr) + (random != nullptr);
  if (sources != 1) return fail(name, "give the elements in exactly one of data, base64 or random");
  Tensor t;
  t.reset(dtype, shape);
  if (data) ATTNKIT_RETURN_IF_ERROR(fill_from_data(name, *data, dtype, &t));
  if (b64) ATTNKIT_RETURN_IF_ERROR(fill_from_base64(name, *b64, &t));
  if (random) ATTNKIT_RETURN_IF_ERROR(fill_from_random(name, *random, dtype, &t));
  *out = std::move(t);
  return Status::Ok();
}

namespace {

// The fields after the tensors: what a comparison checks the results against, and notes for people and peers.
// A misspelt or mistyped one is refused, so a check the writer meant is never silently dropped.
Status check_case_annotations(const JsonValue& json, const std::string& op, bool has_past,
                              const std::vector<std::string>& outputs) {
  if (const JsonValue* expected = json.find("expected")) {
    if (!expected->is_object()) return Status::Error("expected: must be an object of named tensors");
    const std::vector<std::string>& produced = outputs.empty() ? default_outputs(op, has_past) : outputs;
    for (const auto& m : expected->members()) {
      if (std::find(produced.begin(), produced.end(), m.first) == produced.end()) {
        std::string list;
        for (const std::string& p : produced) list += (list.empty() ? "" : ", ") + p;
        return Status::Error("expected." + m.first + ": not an output this case produces (" + list + ")");
      }
    }
  }
  if (const JsonValue* tolerance = json.find("tolerance")) {
    if (!tolerance->is_object()) return Status::Error("tolerance: must be an object {atol, rtol}");
    for (const auto& m : tolerance->members()) {
      if (m.first != "atol" && m.first != "rtol") {
        return Status::Error("tolerance." + m.first + ": not a field of tolerance (atol, rtol)");
      }
      if (!m.second.is_number() || !(m.second.as_double() >= 0) || !std::isfinite(m.second.as_double())) {
        return Status::Error("tolerance." + m.first + ": must be a non-negative number");
      }
    }
  }
  for (const char* field : {"expect_error", "note"}) {
    const JsonValue* v = json.find(field);
    if (v && !v->is_string()) return Status::Error(std::string(field) + ": must be a string");
  }
  if (const JsonValue* ort = json.find("ort")) {
    const std::string text = ort->is_string() ? ort->as_string() : "";
    if (text.rfind("skip:", 0) != 0 && text.rfind("skip-cpu:", 0) != 0) {
      return Status::Error("ort: must be \"skip: why\" or \"skip-cpu: why\"");
    }
  }
  return Status::Ok();
}

}  // namespace

Status build_case(const JsonValue& json, size_t index, Case* out) {
  static const char* const kFields[] = {"name",     "op",        "attrs",        "inputs", "outputs",
                                        "expected", "tolerance", "expect_error", "ort",    "note"};
  for (const auto& m : json.members()) {
    if (std::none_of(std::begin(kFields), std::end(kFields), [&](const char* f) { return m.first == f; })) {
      return Status::Error("\"" + m.first + "\" is not a field of a case (name, op, attrs, inputs, outputs, " +
                           "expected, tolerance, expect_error, ort, note)");
    }
  }
  Case c;
  const JsonValue* name = json.find("name");
  if (name && !name->is_string()) return Status::Error("name: must be a string");
  c.name = name ? name->as_string() : "#" + std::to_string(index);
  const JsonValue* op = json.find("op");
  if (!op || !op->is_string()) return Status::Error("op: required (a string such as \"GroupQueryAttention\")");
  c.op = op->as_string();
  ATTNKIT_RETURN_IF_ERROR(check_op(c.op));
  if (const JsonValue* attrs = json.find("attrs")) {
    if (!attrs->is_object()) return Status::Error("attrs: must be an object");
    c.attrs = *attrs;
  } else {
    c.attrs = JsonValue::MakeObject();
  }
  const JsonValue* inputs = json.find("inputs");
  if (!inputs || !inputs->is_object()) return Status::Error("inputs: required (an object of named tensors)");
  if (const JsonValue* outputs = json.find("outputs")) {
    if (!outputs->is_array() || (outputs->is_number_array() && outputs->size() > 0)) {
      return Status::Error("outputs: must be an array of output names");
    }
    for (size_t i = 0; i < outputs->size(); ++i) {
      if (!outputs->at(i).is_string()) return Status::Error("outputs: must be an array of output names");
      c.outputs.push_back(outputs->at(i).as_string());
    }
  }
  // The envelope before the tensors, in the JS package's order, so both name the same first problem.
  ATTNKIT_RETURN_IF_ERROR(check_case_annotations(json, c.op, inputs->find("past") != nullptr, c.outputs));
  for (const auto& m : inputs->members()) {
    Tensor t;
    ATTNKIT_RETURN_IF_ERROR(build_tensor(m.first, m.second, &t));
    c.inputs.emplace_back(m.first, std::move(t));
  }
  *out = std::move(c);
  return Status::Ok();
}

CaseOutput case_output_from_tensor(const std::string& name, Tensor&& tensor) {
  CaseOutput o;
  o.name = name;
  o.dtype = dtype_name(tensor.dtype);
  o.shape = tensor.shape;
  o.bytes.assign(tensor.storage.begin(), tensor.storage.end());
  return o;
}

Status run_case(const Case& c, const RunOptions& options, bool reference, std::vector<CaseOutput>* outputs) {
  InputMap views = c.input_views();
  outputs->clear();
  if (reference) return run_reference(c.op, c.attrs, views, c.outputs, outputs);
  NamedTensors tensors;
  ATTNKIT_RETURN_IF_ERROR(run_op(c.op, c.attrs, views, c.outputs, options, &tensors));
  for (auto& t : tensors) outputs->push_back(case_output_from_tensor(t.first, std::move(t.second)));
  return Status::Ok();
}

void write_case_result(JsonWriter* w, const std::string& name, const std::vector<CaseOutput>& outputs) {
  w->begin_object();
  w->key("name");
  w->string(name);
  w->key("outputs");
  w->begin_object();
  for (const CaseOutput& o : outputs) {
    w->key(o.name);
    w->begin_object();
    w->key("dtype");
    w->string(o.dtype);
    w->key("shape");
    w->begin_array();
    for (int64_t d : o.shape) w->int64(d);
    w->end_array();
    w->key("base64");
    w->base64(o.bytes.data(), o.bytes.size());
    w->end_object();
  }
  w->end_object();
  w->end_object();
}

}  // namespace attnkit
