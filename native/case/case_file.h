// attnkit: case files (DESIGN.md "The case format") — loading inputs, running a case, writing results.
// The case format is the cross-target contract: every target builds bit-identical inputs from a case
// (data rounded nearest-even, raw base64 bytes, or the splitmix64 generator) and writes results the same way.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "api/op_registry.h"
#include "attnkit/run_options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"
#include "common/json.h"

namespace attnkit {

// A tensor over 4 GiB is refused: no target (wasm32 in particular) could hold it.
constexpr uint64_t kMaxCaseTensorBytes = uint64_t{1} << 32;

struct Case {
  std::string name;   // the case's "name", or "#<index>" when it has none
  std::string op;
  JsonValue attrs;
  std::vector<std::pair<std::string, Tensor>> inputs;  // in file order
  std::vector<std::string> outputs;                    // empty: the op's default outputs

  InputMap input_views() const;
};

// A result tensor. dtype is a case dtype name, or "float64" (reference results only).
struct CaseOutput {
  std::string name;
  std::string dtype;
  Shape shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major
};

// The DESIGN.md generator: advances *state and returns u = (mixed state) >> 32.
inline uint32_t splitmix64_next(uint64_t* state) {
  *state += 0x9E3779B97F4A7C15ull;
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 32);
}

// Rounds a double straight to the dtype's nearest value (ties to even), without double rounding
// through float32. Only for float32, float16 and bfloat16; writes the element's bytes to out_element.
void round_double_to_float_dtype(double v, DType dtype, void* out_element);

// Reads a whole file; a failure is an I/O error (the CLI's exit code 1).
Status read_text_file(const std::string& path, std::string* text);

// The case objects of a parsed file: the document itself, or the elements of a top-level array.
Status list_cases(const JsonValue& doc, std::vector<const JsonValue*>* cases);

// Builds a case (all its input tensors). `index` names an unnamed case. Errors name the input or field.
Status build_case(const JsonValue& json, size_t index, Case* out);

// Builds one tensor object {"dtype", "shape", and one of "data" | "base64" | "random"}.
Status build_tensor(const std::string& input_name, const JsonValue& json, Tensor* out);

// Runs the case through the optimized op (run_op), or through the double-precision reference.
Status run_case(const Case& c, const RunOptions& options, bool reference, std::vector<CaseOutput>* outputs);

// Runs the reference implementation of `op` (outputs of the op's type T come back as float64).
Status run_reference(const std::string& op, const JsonValue& attrs, const InputMap& inputs,
                     const std::vector<std::string>& requested_outputs, std::vector<CaseOutput>* outputs);

CaseOutput case_output_from_tensor(const std::string& name, Tensor&& tensor);

// {"name": ..., "outputs": {name: {"dtype", "shape", "base64"}}}
void write_case_result(JsonWriter* writer, const std::string& name, const std::vector<CaseOutput>& outputs);

}  // namespace attnkit
