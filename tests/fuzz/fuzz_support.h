// attnkit fuzz targets: what they share. The fuzzer's bytes read as small numbers (ByteReader: zeros once
// they run out, so every input is a complete case), tensors filled from a seeded stream, one call through the C
// ABI with its result kept, and the checks: a refusal is a one-line message, an acceptance matches the reference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/attnkit.h"
#include "attnkit/tensor.h"
#include "common/half.h"
#include "gqa_reference.h"

namespace attnkit {
namespace fuzz {

// What the input being run builds (attributes, then each tensor's name, dtype and shape), printed on a failure.
inline std::string& current_case() {
  static std::string text;
  return text;
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "attnkit fuzz: %s\n  case: %s\n", what.c_str(), current_case().c_str());
  std::abort();
}

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t u16() { return u8() | u8() << 8; }
  uint32_t u32() { return u16() | u16() << 16; }
  uint32_t below(uint32_t n) { return n <= 1 ? 0 : (n <= 256 ? u8() : u32()) % n; }
  bool remaining() const { return pos_ < size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct OwnedTensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<uint8_t> bytes;
  bool null_data = false;  // passed with a null data pointer (a C caller's mistake)
};

inline size_t tensor_bytes(const OwnedTensor& t) {
  const int64_t n = shape_elements(t.shape);
  return n < 0 ? 0 : static_cast<size_t>(n) * dtype_size(t.dtype);
}

inline uint64_t splitmix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline void put_float(OwnedTensor* t, int64_t i, float x) {
  const size_t at = static_cast<size_t>(i) * dtype_size(t->dtype);
  if (at >= t->bytes.size()) return;
  uint16_t h = 0;
  switch (t->dtype) {
    case DType::kFloat32: std::memcpy(&t->bytes[at], &x, 4); return;
    case DType::kFloat16: h = float_to_f16(x); break;
    case DType::kBFloat16: h = float_to_bf16(x); break;
    default: t->bytes[at] = static_cast<uint8_t>(static_cast<int>(x)); return;
  }
  std::memcpy(&t->bytes[at], &h, 2);
}

// Values in [lo, hi) in any float dtype (the op tests' range: the reference bound below assumes it).
inline OwnedTensor random_floats(DType dtype, Shape shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  OwnedTensor t{dtype, std::move(shape), {}};
  t.bytes.assign(tensor_bytes(t), 0);
  for (int64_t i = 0, n = shape_elements(t.shape); i < n; ++i)
    put_float(&t, i, static_cast<float>(lo + (hi - lo) * static_cast<double>(splitmix(&seed) >> 40) / 16777216.0));
  return t;
}

// A cache: floats for a float dtype, any bytes for int8 / packed int4.
inline OwnedTensor random_cache(DType dtype, Shape shape, uint64_t seed) {
  if (dtype != DType::kInt8 && dtype != DType::kUInt8) return random_floats(dtype, std::move(shape), seed);
  OwnedTensor t{dtype, std::move(shape), {}};
  t.bytes.resize(tensor_bytes(t));
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(splitmix(&seed));
  return t;
}

template <typename T>
OwnedTensor int_tensor(DType dtype, Shape shape, const std::vector<T>& values) {
  OwnedTensor t{dtype, std::move(shape), {}};
  t.bytes.assign(tensor_bytes(t), 0);
  std::memcpy(t.bytes.data(), values.data(), std::min(t.bytes.size(), values.size() * sizeof(T)));
  return t;
}

// int32 values in [lo, hi), from a seed the bytes give.
inline OwnedTensor random_ints(ByteReader& in, Shape shape, int64_t lo, int64_t hi) {
  uint64_t seed = in.u16();
  OwnedTensor t{DType::kInt32, std::move(shape), {}};
  std::vector<int32_t> values(static_cast<size_t>(std::max<int64_t>(0, shape_elements(t.shape))));
  for (int32_t& v : values) v = static_cast<int32_t>(lo + static_cast<int64_t>(splitmix(&seed) % uint64_t(hi - lo)));
  t.bytes.resize(values.size() * 4);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

// Sets dimension `dim` (the data follows, zero-filled or cut: a caller's buffer always matches its shape).
inline void resize(OwnedTensor* t, size_t dim, int64_t value) {
  t->shape[dim] = value;
  t->bytes.resize(tensor_bytes(*t));
}

inline void retype(OwnedTensor* t, DType dtype) {
  t->dtype = dtype;
  t->bytes.resize(tensor_bytes(*t));
}

// Writes NaN, infinities, huge or subnormal values over a few elements of a float tensor; true if it did.
inline bool inject_specials(ByteReader& in, OwnedTensor* t) {
  if (t->dtype != DType::kFloat32 && t->dtype != DType::kFloat16 && t->dtype != DType::kBFloat16) return false;
  const int64_t n = shape_elements(t->shape);
  if (n <= 0) return false;
  static const float kSpecials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(), 3e38f, -65504.0f, 1e-40f, -0.0f};
  for (uint32_t k = 1 + in.below(4); k > 0; --k)
    put_float(t, in.below(static_cast<uint32_t>(n)), kSpecials[in.below(7)]);
  return true;
}

const char* const kPaths[] = {"auto", "naive", "flash"};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Whether a cache of `bytes` is left to the release replay: under AddressSanitizer, freeing gigabytes poisons all of
// their shadow (over a minute for 16 GiB, where the release replay takes microseconds), so sizes from 1 GiB up to
// the caches' 16 GiB limit are not created there.
inline bool left_to_the_replay(double bytes) {
  return kAddressSanitizer && bytes > double(1 << 30) && bytes <= double(int64_t{1} << 35);
}

// What each target defines: one input, checked (fuzz_entry.cc hands it to libFuzzer and the replay driver).
void run_one_input(const uint8_t* data, size_t size);

// Every kernel table this CPU runs or SIMDe emulates (avx2 and avx512 take their VNNI kernels where the CPU has
// them); one the CPU lacks falls back to scalar, so an input replays the same way wherever the last one left the
// process.
inline void pick_isa(ByteReader& in) {
  static const char* kIsas[] = {"avx512", "avx2", "neon", "wasm128", "scalar"};
  if (attnkit_set_isa(kIsas[in.below(5)]) != ATTNKIT_OK) attnkit_set_isa("scalar");
}

// Calls accepted and refused so far (the replay driver prints them: a harness whose cases are all refused tests
// only the validator).
inline size_t& accepted_calls() {
  static size_t n = 0;
  return n;
}
inline std::map<std::string, size_t>& refusals() {  // by message, numbers and names cut off
  static std::map<std::string, size_t> reasons;
  return reasons;
}

struct CallResult {
  int code = ATTNKIT_OK;
  std::string message;
  std::vector<std::pair<std::string, Tensor>> outputs;
  const Tensor* find(const std::string& name) const {
    for (const auto& [n, t] : outputs)
      if (n == name) return &t;
    return nullptr;
  }
};

inline std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// {"name": value, ...} from members whose values are JSON text already.
inline std::string json_object(const std::map<std::string, std::string>& members) {
  std::string json = "{";
  for (const auto& [name, value] : members) json += (json.size() > 1 ? ",\"" : "\"") + name + "\":" + value;
  return json + "}";
}

inline OwnedTensor owned(const Tensor& t) {
  return OwnedTensor{t.dtype, t.shape, std::vector<uint8_t>(t.storage.begin(), t.storage.end())};
}

// The C views of `tensors` (which must outlive them); the case description gets their names and shapes.
inline std::vector<attnkit_tensor> c_tensors(std::map<std::string, OwnedTensor>& tensors) {
  std::vector<attnkit_tensor> args;
  for (auto& [name, t] : tensors) {
    current_case() += " " + name + ":" + dtype_name(t.dtype) + shape_to_string(t.shape);
    args.push_back({name.c_str(), static_cast<int>(t.dtype), static_cast<int>(t.shape.size()), t.shape.data(),
                    t.null_data ? nullptr : t.bytes.data()});
  }
  return args;
}

// Whether a refusal says an allocation failed (ATTNKIT_INTERNAL_ERROR): absurd cache sizes may, on a small machine.
inline bool out_of_memory(const std::string& message) { return message.find("out of memory") != std::string::npos; }

// What a result-returning entry point gave: INTERNAL (unless out of memory), or a refusal without a one-line message,
// fails; the outputs are copied out and the result freed.
inline CallResult take_result(int code, attnkit_result* result) {
  if (!result) fail("no result object");
  CallResult r;
  r.code = code;
  r.message = attnkit_result_error(result);
  if (code == ATTNKIT_OK) {
    ++accepted_calls();
    if (!r.message.empty()) fail("OK with an error message: " + r.message);
    for (int i = 0; i < attnkit_result_count(result); ++i) {
      Tensor t;
      t.dtype = static_cast<DType>(attnkit_result_dtype(result, i));
      const int64_t* shape = attnkit_result_shape(result, i);
      t.shape.assign(shape, shape + attnkit_result_rank(result, i));
      const auto* data = static_cast<const uint8_t*>(attnkit_result_data(result, i));
      t.storage.assign(data, data + attnkit_result_bytes(result, i));
      r.outputs.emplace_back(attnkit_result_name(result, i), std::move(t));
    }
  } else if (code != ATTNKIT_INVALID && !(code == ATTNKIT_INTERNAL_ERROR && out_of_memory(r.message))) {
    fail("code " + std::to_string(code) + " (not OK, INVALID or out of memory): " + r.message);
  } else if (r.message.empty() || r.message.find('\n') != std::string::npos) {
    fail("a refusal must say why in one line, got \"" + r.message + "\"");
  } else {
    ++refusals()[r.message.substr(0, r.message.find_first_of("0123456789"))];
  }
  attnkit_result_free(result);
  return r;
}

// Whether a result-returning call succeeded (take_result checks its code and message).
inline bool accepted(int code, attnkit_result* result) { return take_result(code, result).code == ATTNKIT_OK; }

// One call of attnkit_run on `op` (or, in_place, the op's shared-buffer form over the tensors' own past buffers).
inline CallResult call_c_api(const char* op, std::map<std::string, OwnedTensor>& tensors, const std::string& attrs,
                             const std::string& outputs, int threads, const char* path, bool in_place) {
  current_case() = std::string(op) + " " + attrs + " path " + path + " threads " + std::to_string(threads) +
                   (in_place ? " in place" : "");
  const std::vector<attnkit_tensor> args = c_tensors(tensors);
  if (std::getenv("ATTNKIT_FUZZ_PRINT")) std::fprintf(stderr, "attnkit fuzz: calling %s\n", current_case().c_str());
  const bool gqa = std::strcmp(op, "GroupQueryAttention") == 0;
  const auto run_in_place = gqa ? attnkit_run_gqa_in_place : attnkit_run_qattention_in_place;
  const int n = static_cast<int>(args.size());
  attnkit_result* result = nullptr;
  const int code = in_place ? run_in_place(attrs.c_str(), args.data(), n, outputs.c_str(), threads, path, &result)
                            : attnkit_run(op, attrs.c_str(), args.data(), n, outputs.c_str(), threads, path, &result);
  return take_result(code, result);
}

// The call again on another thread count must give the same bits (RunOptions: results do not depend on it).
inline void expect_same_bits_on(const char* op, std::map<std::string, OwnedTensor>& tensors, const std::string& attrs,
                                const std::string& outputs, int threads, const char* path, const CallResult& first) {
  const CallResult again = call_c_api(op, tensors, attrs, outputs, threads, path, false);
  if (again.code != ATTNKIT_OK) fail("refused on " + std::to_string(threads) + " threads: " + again.message);
  for (const auto& [name, t] : first.outputs)
    if (!again.find(name) || again.find(name)->storage != t.storage)
      fail(name + " differs on " + std::to_string(threads) + " threads");
}

inline bool same_bytes(const OwnedTensor& a, const Tensor& b) {
  return std::equal(a.bytes.begin(), a.bytes.end(), b.storage.begin(), b.storage.end());
}

// The start the op targets share: an ISA, then the case `build` makes from a seed, then up to three mutations.
template <class Case, class Build, class Mutate>
Case case_from_bytes(ByteReader& in, Build build, Mutate mutate) {
  pick_isa(in);
  const uint64_t seed = in.u32();
  Case c = build(in, seed);
  for (uint32_t m = in.below(4); m > 0 && in.remaining(); --m) mutate(in, &c);
  return c;
}

inline void expect_same_bytes(const CallResult& got, const char* name, const Tensor& ref) {
  const Tensor* t = got.find(name);
  if (!t) fail(std::string(name) + " missing from the result");
  if (t->shape != ref.shape || t->dtype != ref.dtype)
    fail(std::string(name) + ": shape or dtype differs from the reference");
  if (t->storage != ref.storage) fail(std::string(name) + " differs from the reference's bytes");
}

// The op tests' bound (tests/native/gqa_test_inputs.h, expect_close): `relative` (2e-6 for fp32 caches) of max(1, the
// row's largest reference value), plus one rounding of a 16-bit output. Scores against a quantized cache carry the
// exact-integer QK's own error, up to 2^-21 max|q| sum|k| (README, "Tolerances"): 1e-5 there, as the README says.
inline void expect_near_reference(const CallResult& got, const char* name, const std::vector<double>& ref,
                                  const Shape& shape, int64_t row, double relative) {
  const Tensor* t = got.find(name);
  if (!t) fail(std::string(name) + " missing from the result");
  if (t->shape != shape) fail(std::string(name) + ": shape differs from the reference");
  const double u = t->dtype == DType::kFloat16    ? std::ldexp(1.0, -11)
                   : t->dtype == DType::kBFloat16 ? std::ldexp(1.0, -8)
                                                  : 0.0;
  if (row <= 0) return;
  for (size_t r0 = 0; r0 < ref.size(); r0 += static_cast<size_t>(row)) {
    double row_max = 1.0;
    for (size_t k = r0; k < r0 + static_cast<size_t>(row) && k < ref.size(); ++k) 
      if (std::isfinite(ref[k])) row_max = std::max(row_max, std::fabs(ref[k]));
    const double e = relative * row_max;
    for (size_t k = r0; k < r0 + static_cast<size_t>(row) && k < ref.size(); ++k) {
      const double value = reference::load_float(t->storage.data(), t->dtype, static_cast<int64_t>(k));
      const double tol = u * (std::fabs(ref[k]) + e) + e + (u > 0 ? std::ldexp(1.0, -25) : 0.0);
      // (Equal infinities: a masked QK score. NaN in both: a row whose every key is -inf.)
      if (value != ref[k] && !(std::fabs(value - ref[k]) <= tol) && !(std::isnan(value) && std::isnan(ref[k]))) {
        char what[160];
        std::snprintf(what, sizeof what, ": element %zu is %.9g, the reference %.9g (bound %.3g, %s)", k, value,
                      ref[k], tol, dtype_name(t->dtype));
        fail(name + std::string(what));
      }
    }
  }
}

}  // namespace fuzz
}  // namespace attnkit
