// attnkit fuzz target: QAttention through the C ABI, on a case the fuzzer's bytes build (every mask spelling,
// per-tensor and per-column weights, past, then up to three mutations). As the GQA target: OK or INVALID with a
// one-line message, never INTERNAL or a crash; an accepted case matches the fp64 reference within the op tests'
// bounds, and the shared-buffer form gives the stateless output's bits and present.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attnkit/qattention.h"
#include "fuzz_support.h"
#include "qattention/problem.h"
#include "qattention_reference.h"

namespace attnkit {
namespace fuzz {
namespace {

constexpr const char* kOp = "QAttention";

struct Case {
  std::map<std::string, std::string> attrs;  // JSON text of each value
  QAttentionAttributes parsed;               // the same attributes, for the reference
  std::map<std::string, OwnedTensor> tensors;
  bool raw_attrs = false;                     // a mutation wrote JSON the struct cannot hold
};

Case build_case(ByteReader& in, uint64_t seed) {
  Case c;
  const int64_t B = 1 + in.below(3), S = 1 + in.below(7), N = 1 + in.below(4);
  static const int64_t kHeadSizes[] = {4, 8, 16, 32, 64, 3, 12, 20};
  const int64_t H = kHeadSizes[in.below(8)], D = N * H;
  const int64_t Di = in.below(4) ? D : 1 + in.below(96);  // pruned or widened input (spec §4.2.2)
  const int64_t P = in.below(3) ? 0 : in.below(40), T = P + S;
  const bool u8_weight = in.below(2);
  const DType wtype = u8_weight ? DType::kUInt8 : DType::kInt8;
  c.tensors["input"] = random_cache(DType::kUInt8, {B, S, Di}, seed + 1);
  c.tensors["weight"] = random_cache(wtype, {Di, 3 * D}, seed + 2);
  c.tensors["bias"] = random_floats(DType::kFloat32, {3 * D}, seed + 3);
  c.tensors["input_scale"] = random_floats(DType::kFloat32, in.below(2) ? Shape{} : Shape{1}, seed + 4, 0.002, 0.01);
  const bool per_column = in.below(2);
  const Shape wshape = per_column ? Shape{3 * D} : in.below(2) ? Shape{} : Shape{1};
  c.tensors["weight_scale"] = random_floats(DType::kFloat32, wshape, seed + 5, -0.01, 0.01);
  if (in.below(2)) c.tensors["input_zero_point"] = random_cache(DType::kUInt8, {}, seed + 6);
  // Weights centred on their zero point, as real ones are (README: uncentred uint8 weights give logits in the
  // thousands, and a one-hot softmax that fp32 rounding moves beyond the bound).
  if (u8_weight || in.below(2)) {
    OwnedTensor zp = random_cache(wtype, wshape, seed + 7);
    for (uint8_t& z : zp.bytes) z = u8_weight ? static_cast<uint8_t>(124 + z % 9) : static_cast<uint8_t>(z % 5 - 2);
    c.tensors["weight_zero_point"] = std::move(zp);
  }
  switch (in.below(7)) {  // mask_index spellings (spec §4.2.6)
    case 1: c.tensors["mask_index"] = random_ints(in, {B}, -2, T + 3); break;
    case 2: c.tensors["mask_index"] = random_ints(in, {2 * B}, -2, T + 3); break;
    case 3: c.tensors["mask_index"] = random_ints(in, {B, T}, 0, 2); break;
    case 4: c.tensors["mask_index"] = random_ints(in, {B, S, T}, 0, 2); break;
    case 5: c.tensors["mask_index"] = random_ints(in, {in.below(2) ? B : 1, 1}, -5, 5); break;
    default: break;
  }
  if (P > 0 || in.below(6) == 0) c.tensors["past"] = random_floats(DType::kFloat32, {2, B, N, P, H}, seed + 8);
  QAttentionAttributes& a = c.parsed;
  a.num_heads = N;
  a.unidirectional = in.below(3) == 0;
  static const float kFilters[] = {-10000.0f, -1.0f, -1e30f, -INFINITY};
  if (in.below(3) == 0) a.mask_filter_value = kFilters[in.below(4)];
  if (in.below(3) == 0) a.scale = static_cast<float>(in.below(64)) / (64.0f * std::sqrt(static_cast<float>(H)));
  const auto number = [](double v) { return std::isinf(v) ? std::string(v < 0 ? "\"-Infinity\"" : "\"Infinity\"")
                                                          : json_number(v); };
  c.attrs = {{"num_heads", number(a.num_heads)}, {"unidirectional", number(a.unidirectional)},
             {"mask_filter_value", number(a.mask_filter_value)}, {"scale", number(a.scale)}};
  return c;
}

void mutate(ByteReader& in, Case* c) {
  std::vector<std::string> names;
  for (const auto& [name, t] : c->tensors) names.push_back(name);
  if (names.empty()) return;
  const std::string victim = names[in.below(static_cast<uint32_t>(names.size()))];
  OwnedTensor& t = c->tensors[victim];
  switch (in.below(10)) {
    case 0: c->tensors.erase(victim); break;
    case 1: if (!t.shape.empty()) resize(&t, in.below(static_cast<uint32_t>(t.shape.size())), in.below(70)); break;
    case 2: t.shape.push_back(1); break;
    case 3: if (!t.shape.empty()) t.shape.pop_back(), t.bytes.resize(tensor_bytes(t)); break;
    case 4: retype(&t, static_cast<DType>(in.below(7))); break;
    case 5: c->tensors["mask_index"] = random_ints(in, {1 + in.below(9)}, -3, 40); break;
    case 6: c->parsed.num_heads = static_cast<int64_t>(in.below(10)) - 1;
            c->attrs["num_heads"] = json_number(c->parsed.num_heads); break;
    case 7: t.null_data = true; break;
    default: {
      static const char* kNames[] = {"num_heads", "unidirectional", "do_rotary", "past_present_share_buffer",
                                     "mask_filter_value", "scale", "bogus"};
      static const char* kValues[] = {"1", "2", "-1", "\"NaN\"", "1.5", "[1]", "null", "4294967297", "\"x\""};
      c->attrs[kNames[in.below(7)]] = kValues[in.below(9)];
      c->raw_attrs = true;
    }
  }
}

QAttentionInputs views_of(const Case& c, std::map<std::string, TensorView>* views) {
  for (const auto& [name, t] : c.tensors) (*views)[name] = TensorView{t.dtype, t.shape, t.bytes.data()};
  auto get = [&](const char* name) -> const TensorView* {
    auto it = views->find(name);
    return it == views->end() ? nullptr : &it->second;
  };
  QAttentionInputs in;
  in.input = get("input"), in.weight = get("weight"), in.bias = get("bias");
  in.input_scale = get("input_scale"), in.weight_scale = get("weight_scale"), in.mask_index = get("mask_index");
  in.input_zero_point = get("input_zero_point"), in.weight_zero_point = get("weight_zero_point");
  in.past = get("past");
  return in;
}

// tests/native/qattention_test.cc's bounds: the output is a convex combination of V rows, so 1e-5 (|ref| + max|V|);
// a row whose every visible key is masked sits where the fp32 grid of its scores is 2^-10, one step of which moves
// it by 2^-10 max|V|. The present's new rows are two fp32 roundings of terms below max|present|.
void check_against_reference(const Case& c, const CallResult& got) {
  std::map<std::string, TensorView> views;
  const QAttentionInputs in = views_of(c, &views);
  reference::QAttentionReferenceResult ref;
  const Status st = reference::q_attention(in, c.parsed, QAttentionRequest{true}, &ref);
  if (!st.ok()) fail("the C ABI accepted a case the reference refuses: " + st.message());
  QAttentionProblem p;
  if (!validate_qattention(in, c.parsed, QAttentionRequest{true}, &p).ok()) fail("validate_qattention refuses it");
  const float* want_present = ref.present.as<float>();
  const int64_t half = ref.present.elements() / 2;
  double vmax = 0, pmax = 0;
  for (int64_t i = 0; i < 2 * half; ++i) pmax = std::max(pmax, std::fabs(double(want_present[i])));
  for (int64_t i = half; i < 2 * half; ++i) vmax = std::max(vmax, std::fabs(double(want_present[i])));
  if (const Tensor* present = got.find("present")) {
    if (present->shape != ref.present.shape) fail("present: shape differs from the reference");
    for (int64_t i = 0; i < 2 * half; ++i)
      if (!(std::fabs(present->as<float>()[i] - want_present[i]) <= std::ldexp(pmax, -23)))
        fail("present: element " + std::to_string(i) + " differs from the reference");
  }
  const Tensor* out = got.find("output");
  if (!out || out->shape != ref.output_shape) fail("output: missing, or its shape differs from the reference");
  const int64_t B = ref.output_shape[0], S = ref.output_shape[1], D = ref.output_shape[2], T = p.total;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i) {
      // (Causally hidden keys aside: a row that sees only padded keys sits on the same grid.)
      bool all_masked = p.mask != QMaskKind::kNone;
      for (int64_t j = 0; j < T && all_masked; ++j) all_masked = p.key_masked(b, i, j) || (p.causal && j > T - S + i);
      for (int64_t d = 0; d < D; ++d) {
        const size_t k = static_cast<size_t>((b * S + i) * D + d);
        const double want = ref.output[k], value = out->as<float>()[k];
        const double tol = all_masked ? std::ldexp(1.0, -10) * vmax + 1e-5 * std::fabs(want)
                                      : 1e-5 * (std::fabs(want) + vmax);
        if (!(std::fabs(value - want) <= tol) && !(std::isnan(value) && std::isnan(want)))  // (-inf filter: NaN rows)
          fail("output: element " + std::to_string(k) + " is " + json_number(value) + ", the reference " +
               json_number(want));
      }
    }
}

// The shared-buffer form over a past of capacity P + S: the same output bits, and the buffer then holds the present.
void check_in_place(Case c, const std::string& attrs, const CallResult& stateless, ByteReader& in) {
  const Tensor* present = stateless.find("present");
  if (!present) return;
  c.tensors["past"] = owned(*present);
  const CallResult r = call_c_api(kOp, c.tensors, attrs, "output", in.below(4), "auto", true);
  if (r.code != ATTNKIT_OK) fail("in-place call refused what the stateless one accepted: " + r.message);
  if (r.find("output")->storage != stateless.find("output")->storage) fail("in-place output differs from stateless");
  if (!same_bytes(c.tensors["past"], *present))
    fail("the in-place buffer differs from the stateless present");
}

}  // namespace

void run_one_input(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Case c = case_from_bytes<Case>(in, build_case, mutate);
  const std::string attrs = json_object(c.attrs);
  const std::string outputs = c.tensors.count("past") || in.below(2) ? "output,present" : "output";
  const int threads = static_cast<int>(in.below(4));
  const CallResult r = call_c_api(kOp, c.tensors, attrs, outputs, threads, "auto", false);
  if (r.code != ATTNKIT_OK) return;
  if (c.attrs.count("bogus")) fail("accepted an unknown attribute: " + attrs);
  if (c.raw_attrs) return;  // the struct no longer says what was run
  check_against_reference(c, r);
  if (in.below(2)) check_in_place(c, attrs, r, in);
  if (in.below(4) == 3) expect_same_bits_on(kOp, c.tensors, attrs, outputs, threads <= 1 ? 3 : 1, "auto", r);
}

}  // namespace fuzz
}  // namespace attnkit
