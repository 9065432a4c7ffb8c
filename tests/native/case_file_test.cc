// attnkit tests: case-file tensors (data, base64, random) and the result writer (native/case).
// Every target must build the same bits from a case, so the generator is checked against constants
// computed outside this code base, and rounding against an independent brute-force nearest search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "case_file.h"
#include "common/half.h"

namespace attnkit {
namespace {

Tensor tensor_ok(const std::string& json) {
  JsonValue v;
  Status st = parse_json(json, &v);
  EXPECT_TRUE(st.ok()) << st.message();
  Tensor t;
  st = build_tensor("x", v, &t);
  EXPECT_TRUE(st.ok()) << json << " -> " << st.message();
  return t;
}

std::string tensor_error(const std::string& json) {
  JsonValue v;
  Status st = parse_json(json, &v);
  EXPECT_TRUE(st.ok()) << st.message();
  Tensor t;
  st = build_tensor("query", v, &t);
  EXPECT_FALSE(st.ok()) << json;
  return st.message();
}

template <typename T>
T element(const Tensor& t, size_t i) {
  T v;
  std::memcpy(&v, t.storage.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Bits of the float16/bfloat16 value nearest to v (ties to the even pattern), by searching the sorted
// table of all finite non-negative patterns — independent of the conversion code under test.
uint16_t nearest_16bit(double v, float (*decode)(uint16_t), uint16_t max_finite) {
  double a = std::fabs(v);
  uint16_t lo = 0, hi = max_finite;
  while (hi - lo > 1) {
    uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (decode(mid) <= a) lo = mid; else hi = mid;
  }
  double dlo = a - decode(lo), dhi = decode(hi) - a;
  uint16_t bits = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : hi;
  if (a >= decode(max_finite)) bits = max_finite;
  return static_cast<uint16_t>(bits | (std::signbit(v) ? 0x8000 : 0));
}

TEST(CaseFile, Splitmix64MatchesKnownValues) {
  // splitmix64's published first output for seed 0 is 0xE220A8397B1DCDAF; u is its upper half.
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(&state), 0xE220A839u);
  // Seed 7, computed with Python's arbitrary-precision integers (mod 2^64 by hand).
  const uint32_t seed7[] = {0x63cbe1e4u, 0x044c3cd7u, 0xe6984080u, 0x953aeb70u};
  state = 7;
  for (uint32_t want : seed7) EXPECT_EQ(splitmix64_next(&state), want);
}

TEST(CaseFile, RandomFloatsAndIntegersFollowTheFormula) {
  Tensor f = tensor_ok(R"({"dtype":"float32","shape":[2,2],"random":{"seed":7}})");
  // low + (high-low) * ((u >> 8) / 2^24) with the seed-7 values above; exact in float32.
  EXPECT_EQ(element<float>(f, 0), -0.22034060955047607f);
  EXPECT_EQ(element<float>(f, 1), -0.966423511505127f);
  EXPECT_EQ(element<float>(f, 2), 0.8015213012695312f);
  EXPECT_EQ(element<float>(f, 3), 0.16586053371429443f);

  Tensor i = tensor_ok(R"({"dtype":"int32","shape":[4],"random":{"seed":7,"low":-5,"high":5}})");
  const int32_t want_i[] = {-3, 5, -5, 0};  // -5 + u % 11
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(element<int32_t>(i, k), want_i[k]);

  // Integer defaults are the dtype's range: int8 gives -128 + u % 256.
  Tensor b = tensor_ok(R"({"dtype":"int8","shape":[4],"random":{"seed":7}})");
  const uint32_t u7[] = {0x63cbe1e4u, 0x044c3cd7u, 0xe6984080u, 0x953aeb70u};
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(element<int8_t>(b, k), static_cast<int>(u7[k] % 256) - 128);
  // int64's full range: span 2^64, so the value is low + u.
  Tensor l = tensor_ok(R"({"dtype":"int64","shape":[1],"random":{"seed":7}})");
  EXPECT_EQ(element<int64_t>(l, 0), INT64_MIN + static_cast<int64_t>(u7[0]));
  // Seeds beyond 2^53 are read exactly when spelled as decimal strings, the form JavaScript reads exactly too.
  Tensor big = tensor_ok(R"({"dtype":"uint8","shape":[1],"random":{"seed":"18446744073709551615"}})");
  uint64_t state = UINT64_MAX;
  EXPECT_EQ(element<uint8_t>(big, 0), splitmix64_next(&state) % 256);
  // As JSON numbers they are refused, as in JavaScript, where they would seed another tensor.
  EXPECT_EQ(tensor_error(R"({"dtype":"uint8","shape":[1],"random":{"seed":18446744073709551615}})"),
            "query: random.seed must be an integer in [0, 2^64)");  // 2^64 as JavaScript reads it
  EXPECT_EQ(tensor_error(R"({"dtype":"uint8","shape":[1],"random":{"seed":9007199254740993}})"),
            "query: random.seed must be an integer in [0, 2^64); above 2^53 - 1 a number has lost digits in "
            "JavaScript: write it as a decimal string");
}

TEST(CaseFile, RandomHalfPrecisionRoundsFromDouble) {
  Tensor h = tensor_ok(R"({"dtype":"float16","shape":[4096],"random":{"seed":3,"low":-3,"high":5}})");
  Tensor b = tensor_ok(R"({"dtype":"bfloat16","shape":[4096],"random":{"seed":3,"low":-3,"high":5}})");
  uint64_t state = 3;
  for (size_t k = 0; k < 4096; ++k) {
    uint32_t u = splitmix64_next(&state);
    double v = -3.0 + 8.0 * (static_cast<double>(u >> 8) / 16777216.0);
    ASSERT_EQ(element<uint16_t>(h, k), nearest_16bit(v, f16_to_float, 0x7BFF)) << v;
    ASSERT_EQ(element<uint16_t>(b, k), nearest_16bit(v, bf16_to_float, 0x7F7F)) << v;
  }
}

TEST(CaseFile, DataRoundsToNearestEven) {
  // 1 + 2^-11 is the fp16 midpoint between 1 and 1 + 2^-10: ties go to the even pattern (1.0).
  // 1 + 2^-11 + 2^-40 is just above it: rounding through float32 first would land on the midpoint and
  // go down; direct rounding goes up.
  Tensor h = tensor_ok(
      R"({"dtype":"float16","shape":[4],"data":[1.00048828125, 1.00048828125000090949, 1.00146484375, -65519]})");
  EXPECT_EQ(element<uint16_t>(h, 0), 0x3C00);
  EXPECT_EQ(element<uint16_t>(h, 1), 0x3C01);
  EXPECT_EQ(element<uint16_t>(h, 2), 0x3C02);  // 1 + 3*2^-11: tie between 0x3C01 and 0x3C02, even wins
  EXPECT_EQ(element<uint16_t>(h, 3), 0xFBFF);  // below 65520: still the largest finite
  Tensor b = tensor_ok(R"({"dtype":"bfloat16","shape":[3],"data":[1.00390625, 1.00390625000000090949, 3.0e38]})");
  EXPECT_EQ(element<uint16_t>(b, 0), 0x3F80);
  EXPECT_EQ(element<uint16_t>(b, 1), 0x3F81);
  EXPECT_EQ(element<uint16_t>(b, 2), nearest_16bit(3.0e38, bf16_to_float, 0x7F7F));
  Tensor f = tensor_ok(R"({"dtype":"float32","shape":[2],"data":[0.1, 16777217]})");
  EXPECT_EQ(element<float>(f, 0), 0.1f);
  EXPECT_EQ(element<float>(f, 1), 16777216.0f);  // tie between 2^24 and 2^24 + 2: even
  // Random doubles against the brute-force search.
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> dist(-70000.0, 70000.0);
  for (int k = 0; k < 20000; ++k) {
    double v = dist(rng) * std::ldexp(1.0, -static_cast<int>(rng() % 30));
    uint16_t got;
    round_double_to_float_dtype(v, DType::kFloat16, &got);
    if (std::fabs(v) < 65504.0) {
      ASSERT_EQ(got, nearest_16bit(v, f16_to_float, 0x7BFF)) << v;
    }
    round_double_to_float_dtype(v, DType::kBFloat16, &got);
    ASSERT_EQ(got, nearest_16bit(v, bf16_to_float, 0x7F7F)) << v;
  }
}

TEST(CaseFile, IntegerDataAndBase64) {
  Tensor i = tensor_ok(R"({"dtype":"int64","shape":[3],"data":[-9223372036854775808, 9007199254740993, 1e2]})");
  EXPECT_EQ(element<int64_t>(i, 0), INT64_MIN);
  EXPECT_EQ(element<int64_t>(i, 1), 9007199254740993LL);
  EXPECT_EQ(element<int64_t>(i, 2), 100);
  // base64 gives raw little-endian bytes: 1.0f, -2.0f.
  const float raw[] = {1.0f, -2.0f};
  std::string json = R"({"dtype":"float32","shape":[1,2],"base64":")" + base64_encode(raw, sizeof(raw)) + "\"}";
  Tensor f = tensor_ok(json);
  EXPECT_EQ(f.shape, (Shape{1, 2}));
  EXPECT_EQ(element<float>(f, 0), 1.0f);
  EXPECT_EQ(element<float>(f, 1), -2.0f);
  Tensor empty = tensor_ok(R"({"dtype":"float32","shape":[0,3],"data":[]})");
  EXPECT_EQ(empty.elements(), 0);
  Tensor scalar = tensor_ok(R"({"dtype":"int32","shape":[],"data":[5]})");
  EXPECT_EQ(element<int32_t>(scalar, 0), 5);
}

TEST(CaseFile, TensorErrorsNameTheInput) {
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[2,2],"data":[1,2,3]})"),
            "query: data has 3 values but shape [2, 2] holds 4");
  EXPECT_EQ(tensor_error(R"({"dtype":"float64","shape":[1],"data":[1]})"),
            "query: unknown dtype \"float64\" (float32, float16, bfloat16, int8, uint8, int32, int64)");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[2],"base64":"AAAA"})"),
            "query: base64 holds 3 bytes but shape [2] of float32 needs 8");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"base64":"AA=A"})").substr(0, 18), "query: bad base64:");
  EXPECT_EQ(tensor_error(R"({"dtype":"int32","shape":[1],"data":[3.5]})"),
            "query: data[0] = 3.5 is not an int32 integer");
  EXPECT_EQ(tensor_error(R"({"dtype":"uint8","shape":[2],"data":[1, 256]})"),
            "query: data[1] = 256 is out of range for uint8");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"data":[1],"random":{"seed":1}})"),
            "query: give the elements in exactly one of data, base64 or random");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1]})"),
            "query: give the elements in exactly one of data, base64 or random");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[-1],"data":[]})"),
            "query: shape[0] = -1 must be a non-negative integer");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1.5],"data":[]})"),
            "query: shape[0] = 1.5 must be a non-negative integer");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[65536,65536,2],"random":{"seed":1}})"),
            "query: shape [65536, 65536, 2] is too large (over 4 GiB of float32)");
  EXPECT_EQ(tensor_error(R"({"dtype":"int8","shape":[4000000000000,4000000000000],"random":{"seed":1}})"),
            "query: shape [4000000000000, 4000000000000] is too large (over 4 GiB of int8)");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"data":["1"]})"),
            "query: data must be an array of numbers");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"random":{"seed":-1}})"),
            "query: random.seed must be an integer in [0, 2^64)");
  for (const char* seed : {R"("18446744073709551616")", R"("")", R"("1e3")", R"("-1")", R"(" 1")", "true"})
    EXPECT_EQ(tensor_error(std::string(R"({"dtype":"float32","shape":[1],"random":{"seed":)") + seed + "}}"),
              "query: random.seed must be an integer in [0, 2^64)")
        << seed;
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"random":{"seed":1,"lo":0}})"),
            "query: random.lo is not a field of random (seed, low, high)");
  EXPECT_EQ(tensor_error(R"({"dtype":"int8","shape":[1],"random":{"seed":1,"low":-200}})"),
            "query: random range [-200, 127] exceeds int8 [-128, 127]");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"random":{"seed":1,"low":2,"high":1}})"),
            "query: random.low must be <= random.high");
  EXPECT_EQ(tensor_error(R"({"dtype":"float32","shape":[1],"data":[1],"strides":[1]})"),
            "query: \"strides\" is not a tensor field (dtype, shape, data, base64, random)");
}

TEST(CaseFile, CaseStructureAndErrors) {
  JsonValue doc;
  ASSERT_TRUE(parse_json(R"([
    {"name":"one","op":"com.microsoft.GroupQueryAttention","attrs":{"num_heads":2},
     "inputs":{"query":{"dtype":"float32","shape":[1],"data":[1]}},"outputs":["output"],"expect_error":"x"},
    {"op":"GroupQueryAttention","inputs":{}}
  ])", &doc).ok());
  std::vector<const JsonValue*> cases;
  ASSERT_TRUE(list_cases(doc, &cases).ok());
  ASSERT_EQ(cases.size(), 2u);
  Case c;
  ASSERT_TRUE(build_case(*cases[0], 0, &c).ok());
  EXPECT_EQ(c.name, "one");
  EXPECT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.outputs, std::vector<std::string>{"output"});
  EXPECT_EQ(c.input_views().at("query").shape, Shape{1});
  ASSERT_TRUE(build_case(*cases[1], 1, &c).ok());
  EXPECT_EQ(c.name, "#1");

  auto case_error = [](const std::string& json) {
    JsonValue v;
    EXPECT_TRUE(parse_json(json, &v).ok());
    Case c;
    Status st = build_case(v, 0, &c);
    EXPECT_FALSE(st.ok()) << json;
    return st.message();
  };
  EXPECT_EQ(case_error(R"({"inputs":{}})"), "op: required (a string such as \"GroupQueryAttention\")");
  EXPECT_EQ(case_error(R"({"op":"Attention","inputs":{}})").rfind("op: \"Attention\" is not a supported operator (", 0), 0u);
  EXPECT_EQ(case_error(R"({"op":"GroupQueryAttention"})"), "inputs: required (an object of named tensors)");
  EXPECT_EQ(case_error(R"({"op":"GroupQueryAttention","inputs":{},"attrs":[1]})"), "attrs: must be an object");
  EXPECT_EQ(case_error(R"({"op":"GroupQueryAttention","inputs":{},"outputs":[1]})"),
            "outputs: must be an array of output names");
  EXPECT_EQ(case_error(R"({"op":"GroupQueryAttention","inputs":{"key":{"dtype":"int4","shape":[1],"data":[1]}}})")
                .rfind("key: unknown dtype \"int4\"", 0),
            0u);
  JsonValue bad;
  ASSERT_TRUE(parse_json("[1, 2]", &bad).ok());
  EXPECT_FALSE(list_cases(bad, &cases).ok());
}

TEST(CaseFile, ResultWriterFormat) {
  std::vector<CaseOutput> outputs(2);
  outputs[0].name = "output";
  outputs[0].dtype = "float32";
  outputs[0].shape = {1, 2};
  const float v[] = {1.0f, 2.0f};
  outputs[0].bytes.assign(reinterpret_cast<const uint8_t*>(v), reinterpret_cast<const uint8_t*>(v) + 8);
  outputs[1].name = "output_qk";
  outputs[1].dtype = "float64";
  outputs[1].shape = {0};
  JsonWriter w;
  write_case_result(&w, "gqa/x", outputs);
  EXPECT_EQ(w.str(),
            "{\"name\":\"gqa/x\",\"outputs\":{\"output\":{\"dtype\":\"float32\",\"shape\":[1,2],\"base64\":\"" +
                base64_encode(v, 8) + "\"},\"output_qk\":{\"dtype\":\"float64\",\"shape\":[0],\"base64\":\"\"}}}");
  // What the writer emits is a valid case tensor again (float64 aside): results can be fed back as inputs.
  JsonValue doc;
  ASSERT_TRUE(parse_json(w.str(), &doc).ok());
  Tensor back;
  ASSERT_TRUE(build_tensor("output", *doc.find("outputs")->find("output"), &back).ok());
  EXPECT_EQ(std::vector<uint8_t>(back.storage.begin(), back.storage.end()), outputs[0].bytes);
}

// Random corruption of a valid case (bytes replaced by JSON punctuation/digits, truncation, splices)
// must end in a one-line error or a result: never a crash, a hang or an unbounded allocation.
TEST(CaseFile, CorruptedCasesFailCleanly) {
  const std::string valid = R"({"name":"fuzz","op":"GroupQueryAttention","attrs":{"num_heads":2,"kv_num_heads":1,
    "local_window_size":-1,"do_rotary":0,"qk_output":0},
    "inputs":{"query":{"dtype":"float32","shape":[1,2,16],"random":{"seed":1}},
              "key":{"dtype":"float32","shape":[1,2,8],"random":{"seed":2,"low":-2,"high":2}},
              "value":{"dtype":"float32","shape":[1,2,8],"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},
              "past_key":{"dtype":"float32","shape":[1,1,3,8],"random":{"seed":3}},
              "past_value":{"dtype":"float32","shape":[1,1,3,8],"random":{"seed":4}},
              "seqlens_k":{"dtype":"int32","shape":[1],"data":[4]},
              "total_sequence_length":{"dtype":"int32","shape":[],"base64":"BQAAAA=="}},
    "outputs":["output","present_key","present_value"]})";
  {
    JsonValue doc;
    Case c;
    std::vector<CaseOutput> outputs;
    ASSERT_TRUE(parse_json(valid, &doc).ok());
    ASSERT_TRUE(build_case(doc, 0, &c).ok());
    Status st = run_case(c, RunOptions(), false, &outputs);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  const char alphabet[] = "{}[]\",:-.eE0123456789 ab";
  std::mt19937 rng(2024);
  int parsed = 0, built = 0, ran = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = valid;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 4) {
        case 0: text[pos] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
        case 1: text.erase(pos, 1 + rng() % 8); break;
        case 2: text.insert(pos, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
        default: text.resize(pos); break;
      }
      if (text.empty()) text = "{";
    }
    JsonValue doc;
    Status st = parse_json(text, &doc);
    if (!st.ok()) {
      ASSERT_EQ(st.message().find('\n'), std::string::npos);
      continue;
    }
    ++parsed;
    std::vector<const JsonValue*> cases;
    if (!list_cases(doc, &cases).ok()) continue;
    for (size_t i = 0; i < cases.size(); ++i) {
      // Harness guard, not a product rule: keep mutated shapes small so the loop stays fast.
      bool small = true;
      if (const JsonValue* inputs = cases[i]->find("inputs")) {
        for (size_t k = 0; inputs->is_object() && k < inputs->members().size(); ++k) {
          const JsonValue* shape = inputs->members()[k].second.is_object() ? inputs->members()[k].second.find("shape")
                                                                           : nullptr;
          double n = 1;
          for (size_t d = 0; shape && shape->is_number_array() && d < shape->size(); ++d) n *= std::fabs(shape->number_at(d));
          small = small && n <= 1e5;
        }
      }
      if (!small) continue;
      Case c;
      st = build_case(*cases[i], i, &c);
      if (!st.ok()) {
        ASSERT_FALSE(st.message().empty());
        ASSERT_EQ(st.message().find('\n'), std::string::npos) << st.message();
        continue;
      }
      ++built;
      std::vector<CaseOutput> outputs;
      for (bool reference : {false, true}) {
        st = run_case(c, RunOptions(), reference, &outputs);
        if (st.ok()) {
          ++ran;
        } else {
          ASSERT_FALSE(st.message().empty());
          ASSERT_EQ(st.message().find('\n'), std::string::npos) << st.message();
        }
      }
    }
  }
  // The corruption must leave a fair share of documents valid, or the deeper layers go untested.
  EXPECT_GT(parsed, 300);
  EXPECT_GT(built, 100);
  EXPECT_GT(ran, 20);
}

}  // namespace
}  // namespace attnkit
