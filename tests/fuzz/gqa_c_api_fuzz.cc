// attnkit fuzz target: GroupQueryAttention through the C ABI, on a case the fuzzer's bytes build (mostly valid,
// then up to three mutations). What must hold for any bytes: a call returns OK or INVALID with a one-line message,
// never INTERNAL, a crash or a sanitizer report; an accepted case matches the fp64 reference (presents bit for bit,
// outputs within the op tests' bound) and the shared-buffer form gives the stateless form's bits.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attnkit/attnkit.h"
#include "attnkit/gqa.h"
#include "fuzz_support.h"
#include "gqa_reference.h"

namespace attnkit {
namespace fuzz {
namespace {

constexpr const char* kOp = "GroupQueryAttention";

struct Case {
  GqaAttributes attrs;
  std::map<std::string, OwnedTensor> tensors;
  std::map<std::string, std::string> raw_attrs;  // JSON values a mutation wrote over the struct's (or added)
  std::string outputs = "output,present_key,present_value";
  bool specials = false;       // non-finite or huge values somewhere: numeric comparison is off
};

DType float_dtype(ByteReader& in) {
  static const DType kDtypes[] = {DType::kFloat32, DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  return kDtypes[in.below(4)];
}

// A case that is valid by construction for most byte strings: shapes and attributes follow spec §1-§3.
Case build_case(ByteReader& in, uint64_t seed) {
  Case c;
  GqaAttributes& a = c.attrs;
  const DType dtype = float_dtype(in);
  int64_t B = 1 + in.below(3);
  const int64_t kv = 1 + in.below(3), group = 1 + in.below(4);
  static const int64_t kHeadSizes[] = {8, 16, 32, 64, 24, 40, 48, 128};
  const int64_t H = in.below(32) == 0 ? 1 + in.below(20) : kHeadSizes[in.below(8)];  // (the validator wants 8k)
  const bool long_past = in.below(8) == 0;  // beyond one flash block, and split-KV decoding
  const int64_t S = long_past ? 1 : 1 + in.below(9);
  const int64_t P = long_past ? 500 + in.below(256) * 3 : (in.below(3) == 0 ? 0 : in.below(41));
  const int64_t T = P + S;
  if (P > 0 && S > 1) B = 1;  // (ORT: chunked prefill after a past only for batch 1)
  a.num_heads = kv * group;
  a.kv_num_heads = kv;
  const int64_t N = a.num_heads;

  // (quantization: 0 none, 1 per tensor, 2 per channel; bits)
  static const int kCaches[][2] = {{0, 0}, {0, 0}, {1, 8}, {2, 8}, {1, 4}, {2, 4}};
  const auto& cache = kCaches[in.below(6)];
  const DType cache_dtype = cache[1] == 8 ? DType::kInt8 : cache[1] == 4 ? DType::kUInt8 : dtype;
  const int64_t row = cache[1] == 4 ? (H + 1) / 2 : H;
  if (cache[0]) {
    a.k_quant_type = a.v_quant_type = cache[0] == 1 ? "PER_TENSOR" : "PER_CHANNEL";
    a.kv_cache_bit_width = cache[1];
    const Shape scale_shape = cache[0] == 1 ? Shape{1} : Shape{1, kv, 1, H};
    c.tensors["k_scale"] = random_floats(DType::kFloat32, scale_shape, seed + 11, 0.004, 0.02);
    c.tensors["v_scale"] = random_floats(DType::kFloat32, scale_shape, seed + 12, 0.004, 0.02);
  }

  if (in.below(6) == 0 && !cache[0]) {
    c.tensors["query"] = random_floats(dtype, {B, S, (N + 2 * kv) * H}, seed + 1);
  } else {
    c.tensors["query"] = random_floats(dtype, {B, S, N * H}, seed + 1);
    c.tensors["key"] = random_floats(dtype, {B, S, kv * H}, seed + 2);
    c.tensors["value"] = random_floats(dtype, {B, S, kv * H}, seed + 3);
  }
  // sliding_window_cache = 1 (spec §2.9): the past is a buffer of C >= W rows holding each entry's latest tokens
  // (its rows past them unspecified: random here), while the lengths stay absolute. Its prompts are not padded.
  const bool window_cache = in.below(8) == 7;
  if (window_cache) {
    a.sliding_window_cache = 1;
    a.local_window_size = 1 + in.below(static_cast<uint32_t>(std::min<int64_t>(T, 250)));
  }
  if (P > 0 || cache[0] || window_cache || in.below(4) == 0) {
    static const int64_t kSpare[] = {0, 0, 3, 40};
    const int64_t capacity = window_cache ? a.local_window_size + kSpare[in.below(4)]
                                          : P + (in.below(4) == 0 ? in.below(5) : 0);
    c.tensors["past_key"] = random_cache(cache_dtype, {B, kv, capacity, row}, seed + 4);
    c.tensors["past_value"] = random_cache(cache_dtype, {B, kv, capacity, row}, seed + 5);
  }
  // Ragged batches: entry 0 full, the others shorter (a first prompt keeps T_b <= S, a later step T_b >= S).
  std::vector<int32_t> seqlens(static_cast<size_t>(B), static_cast<int32_t>(T - 1));
  if (in.below(3) == 0 && !(window_cache && P == 0))
    for (int64_t b = 1; b < B; ++b) {
      const int64_t shorter = in.below(static_cast<uint32_t>(std::min<int64_t>(T, 200)));
      seqlens[b] = static_cast<int32_t>(std::max<int64_t>(T - 1 - shorter, P == 0 ? 0 : S - 1));
    }
  c.tensors["seqlens_k"] = int_tensor<int32_t>(DType::kInt32, {B}, seqlens);
  c.tensors["total_sequence_length"] = int_tensor<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(T)});

  const uint32_t features = in.u16();
  if ((features & 1) && (H % 16 == 0 || in.below(8) == 0)) {  // (rotary wants 16k)
    const bool interleaved = features & 2;
    const int64_t half = H % 2 ? 0 : (features & 4) && H >= 16 ? H / 4 : H / 2;
    a.do_rotary = 1;
    a.rotary_interleaved = interleaved;
    const int64_t positions = T + in.below(20);
    c.tensors["cos_cache"] = random_floats(dtype, {positions, half}, seed + 6);
    c.tensors["sin_cache"] = random_floats(dtype, {positions, half}, seed + 7);
    if (features & 8) {
      std::vector<int64_t> ids(static_cast<size_t>(B * S));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) ids[b * S + s] = std::max<int64_t>(0, seqlens[b] + 1 - S + s);
      c.tensors["position_ids"] = int_tensor<int64_t>(DType::kInt64, {B, S}, ids);
    }
    if (features & 16) {
      a.qk_norm_epsilon = in.below(2) ? 1e-6f : 0.5f;
      c.tensors["q_norm_weight"] = random_floats(dtype, {H}, seed + 8, 0.5, 1.5);
      c.tensors["k_norm_weight"] = random_floats(dtype, {H}, seed + 9, 0.5, 1.5);
    }
  }
  const bool non_causal = (features & 2048) && P == 0 && !window_cache;  // (ORT: a first prompt, without a window)
  if (non_causal) a.causal = 0;
  else if ((features & 32) && !window_cache)
    a.local_window_size = 1 + in.below(static_cast<uint32_t>(std::min<int64_t>(T + 2, 250)));
  if (features & 64) a.softcap = 1.0f + static_cast<float>(in.below(60));
  if (features & 128) {
    const Shape shape{in.below(2) ? B : 1, in.below(2) ? N : 1, S, T};
    OwnedTensor bias = random_floats(dtype, shape, seed + 10);
    // Masked keys, some rows fully masked (spec: those rows give zeros).
    if (in.below(3) == 0)
      for (int64_t i = 0, n = shape_elements(shape); i < n; i += 1 + in.below(7))
        put_float(&bias, i, -std::numeric_limits<float>::infinity());
    c.tensors["attention_bias"] = std::move(bias);
  }
  if (features & 256) c.tensors["head_sink"] = random_floats(dtype, {N}, seed + 13);
  else if (features & 512) a.smooth_softmax = 1;
  if ((features & 1024) && !window_cache) {  // (ORT: no QK output from a window cache)
    a.qk_output = 1 + in.below(2);
    c.outputs += ",output_qk";
  }
  if (features & 4096) a.scale = static_cast<float>(in.below(64)) / (64.0f * std::sqrt(static_cast<float>(H)));
  return c;
}

// One change a caller could make by mistake; the validator must refuse it or the reference must agree.
void mutate(ByteReader& in, Case* c) {
  std::vector<std::string> names;
  for (const auto& [name, t] : c->tensors) names.push_back(name);
  if (names.empty()) return;
  static const char* kOptional[] = {"past_key", "cos_cache", "position_ids", "attention_bias", "head_sink",
                                    "k_scale", "q_norm_weight", "key"};
  const std::string victim = names[in.below(static_cast<uint32_t>(names.size()))];
  OwnedTensor& t = c->tensors[victim];
  GqaAttributes& a = c->attrs;
  switch (in.below(15)) {
    case 0: c->tensors.erase(victim); break;
    case 1: if (!t.shape.empty()) resize(&t, in.below(static_cast<uint32_t>(t.shape.size())), in.below(70)); break;
    case 2: if (!t.shape.empty()) resize(&t, in.below(static_cast<uint32_t>(t.shape.size())), t.shape[0] + 1); break;
    case 3: t.shape.push_back(1); break;
    case 4: if (!t.shape.empty()) t.shape.pop_back(), t.bytes.resize(tensor_bytes(t)); break;
    case 5: retype(&t, static_cast<DType>(in.below(7))); break;
    case 6: c->specials |= inject_specials(in, &t); break;
    case 7: c->tensors[kOptional[in.below(8)]] = random_floats(float_dtype(in), {1 + in.below(4)}, 99); break;
    case 8: a.num_heads = static_cast<int64_t>(in.below(10)) - 1; break;
    case 9: a.kv_num_heads = static_cast<int64_t>(in.below(10)) - 1; break;
    case 10: a.local_window_size = static_cast<int64_t>(in.below(40)) - 2; break;
    case 11: {
      static const char* kTypes[] = {"NONE", "PER_TENSOR", "PER_CHANNEL", "PER_ROW", ""};
      (in.below(2) ? a.k_quant_type : a.v_quant_type) = kTypes[in.below(5)];
      a.kv_cache_bit_width = static_cast<int64_t>(in.below(10));
      break;
    }
    case 12: {  // a seqlens_k or total_sequence_length entry: near the case's lengths, or an extreme
      // (Not between 4096 and the validator's 2^26: a total that large asks, legitimately, for gigabytes of present.)
      OwnedTensor& lens = c->tensors[in.below(2) ? "seqlens_k" : "total_sequence_length"];
      if (lens.dtype == DType::kInt32 && !lens.bytes.empty()) {
        static const int32_t kExtremes[] = {std::numeric_limits<int32_t>::min(), -1, 0, (1 << 26) + 1,
                                            std::numeric_limits<int32_t>::max()};
        const int32_t v = in.below(4) ? static_cast<int32_t>(in.below(4096)) - 8 : kExtremes[in.below(5)];
        std::memcpy(&lens.bytes[4 * in.below(static_cast<uint32_t>(lens.bytes.size() / 4))], &v, 4);
      }
      break;
    }
    case 13: t.null_data = true; break;
    default: {  // JSON the struct cannot hold: wrong types, out-of-range numbers, an unknown name
      static const char* kNames[] = {"num_heads", "kv_num_heads", "scale", "softcap", "do_rotary", "qk_output",
                                     "causal", "local_window_size", "k_quant_type", "smooth_softmax", "bogus"};
      static const char* kValues[] = {"\"4\"", "[1]", "null", "1.5", "4294967297", "-1", "1e40", "\"NaN\"",
                                      "true", "{}", "\"-Infinity\"", "-9223372036854775808"};
      c->raw_attrs[kNames[in.below(11)]] = kValues[in.below(12)];
    }
  }
}

std::string attrs_json(const Case& c) {
  const GqaAttributes& a = c.attrs;
  auto num = [](double v) { return json_number(v); };
  auto str = [](const std::string& v) { return "\"" + v + "\""; };
  std::map<std::string, std::string> members = {
      {"num_heads", num(a.num_heads)}, {"kv_num_heads", num(a.kv_num_heads)}, {"scale", num(a.scale)},
      {"softcap", num(a.softcap)}, {"local_window_size", num(a.local_window_size)}, {"do_rotary", num(a.do_rotary)},
      {"rotary_interleaved", num(a.rotary_interleaved)}, {"smooth_softmax", num(a.smooth_softmax)},
      {"qk_output", num(a.qk_output)}, {"causal", num(a.causal)}, {"k_quant_type", str(a.k_quant_type)},
      {"v_quant_type", str(a.v_quant_type)}, {"kv_cache_bit_width", num(a.kv_cache_bit_width)},
      {"sliding_window_cache", num(a.sliding_window_cache)}, {"qk_norm_epsilon", num(a.qk_norm_epsilon)}};
  for (const auto& [name, value] : c.raw_attrs) members[name] = value;
  return json_object(members);
}

GqaInputs views_of(const Case& c, std::map<std::string, TensorView>* views) {
  for (const auto& [name, t] : c.tensors) (*views)[name] = TensorView{t.dtype, t.shape, t.bytes.data()};
  auto get = [&](const char* name) -> const TensorView* {
    auto it = views->find(name);
    return it == views->end() ? nullptr : &it->second;
  };
  GqaInputs in;
  in.query = get("query"), in.key = get("key"), in.value = get("value");
  in.past_key = get("past_key"), in.past_value = get("past_value");
  in.seqlens_k = get("seqlens_k"), in.total_sequence_length = get("total_sequence_length");
  in.cos_cache = get("cos_cache"), in.sin_cache = get("sin_cache"), in.position_ids = get("position_ids");
  in.attention_bias = get("attention_bias"), in.head_sink = get("head_sink");
  in.k_scale = get("k_scale"), in.v_scale = get("v_scale");
  in.q_norm_weight = get("q_norm_weight"), in.k_norm_weight = get("k_norm_weight");
  return in;
}

// The accepted case against the reference: the validator is shared, so it must accept it too.
void check_against_reference(const Case& c, const CallResult& got) {
  std::map<std::string, TensorView> views;
  const GqaInputs in = views_of(c, &views);
  GqaRequest request;
  request.output_qk = c.attrs.qk_output != 0;
  reference::GqaReferenceResult ref;
  const Status st = reference::group_query_attention(in, c.attrs, request, &ref);
  if (!st.ok()) fail("the C ABI accepted a case the reference refuses: " + st.message());
  expect_same_bytes(got, "present_key", ref.present_key);
  expect_same_bytes(got, "present_value", ref.present_value);
  if (c.specials) return;
  const double relative = c.attrs.kv_cache_bit_width ? 1e-5 : 2e-6;
  expect_near_reference(got, "output", ref.output, ref.output_shape, ref.output_shape.back() / c.attrs.num_heads,
                        relative);
  if (request.output_qk)
    expect_near_reference(got, "output_qk", ref.output_qk, ref.output_qk_shape, ref.output_qk_shape.back(), relative);
}

// The shared-buffer form over caches holding the case's past (capacity T, or more): same output bits, and the
// caches then hold the stateless present.
void check_in_place(const Case& c, const std::string& attrs, const char* path, const CallResult& stateless,
                    ByteReader& in) {
  const Tensor* present_key = stateless.find("present_key");
  const Tensor* present_value = stateless.find("present_value");
  if (!present_key || !present_value || c.attrs.qk_output || c.attrs.sliding_window_cache) return;
  Case shared = c;
  shared.tensors["past_key"] = owned(*present_key);
  shared.tensors["past_value"] = owned(*present_value);
  const CallResult r = call_c_api(kOp, shared.tensors, attrs, "output", in.below(4), path, true);
  if (r.code != ATTNKIT_OK) fail("in-place call refused what the stateless one accepted: " + r.message);
  if (r.find("output")->storage != stateless.find("output")->storage) fail("in-place output differs from stateless");
  if (!same_bytes(shared.tensors["past_key"], *present_key) ||
      !same_bytes(shared.tensors["past_value"], *present_value))
    fail("in-place caches differ from the stateless present");
}

}  // namespace

void run_one_input(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Case c = case_from_bytes<Case>(in, build_case, mutate);
  const std::string attrs = attrs_json(c);
  const int threads = static_cast<int>(in.below(4));
  const char* path = kPaths[in.below(3)];
  const CallResult r = call_c_api(kOp, c.tensors, attrs, c.outputs, threads, path, false);
  if (r.code != ATTNKIT_OK) return;
  if (c.raw_attrs.count("bogus")) fail("accepted an unknown attribute: " + attrs);
  if (!c.raw_attrs.empty()) return;  // the struct no longer says what was run
  check_against_reference(c, r);
  if (in.below(2)) check_in_place(c, attrs, path, r, in);
  if (in.below(4) == 3) expect_same_bits_on(kOp, c.tensors, attrs, c.outputs, threads <= 1 ? 3 : 1, path, r);
}

}  // namespace fuzz
}  // namespace attnkit
