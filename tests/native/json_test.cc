// attnkit tests: the strict JSON parser and writer (common/json.h) and base64.
// Case files are the cross-target contract, so the parser must reject what JS's JSON.parse rejects,
// keep int64 values exact, and round decimal numbers exactly like strtod.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "common/json.h"

namespace attnkit {
namespace {

JsonValue parse_ok(const std::string& text) {
  JsonValue v;
  Status st = parse_json(text, &v);
  EXPECT_TRUE(st.ok()) << text << " -> " << st.message();
  return v;
}

std::string parse_error(const std::string& text) {
  JsonValue v;
  Status st = parse_json(text, &v);
  EXPECT_FALSE(st.ok()) << text;
  return st.message();
}

TEST(Json, ScalarsAndNesting) {
  JsonValue v = parse_ok(R"( {"a": [1, "x", true, null, {"b": false}], "c": -0.5e1} )");
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v.members().size(), 2u);
  EXPECT_EQ(v.members()[0].first, "a");  // insertion order kept
  const JsonValue* a = v.find("a");
  ASSERT_TRUE(a && a->is_array());
  EXPECT_FALSE(a->is_number_array());
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ(a->at(0).as_double(), 1.0);
  EXPECT_EQ(a->at(1).as_string(), "x");
  EXPECT_TRUE(a->at(2).as_bool());
  EXPECT_TRUE(a->at(3).is_null());
  EXPECT_FALSE(a->at(4).find("b")->as_bool());
  EXPECT_EQ(v.find("c")->as_double(), -5.0);
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, NumberArraysArePackedAndExact) {
  JsonValue v = parse_ok("[0, -1, 2.5, 1e-3, 9223372036854775807, -9223372036854775808, 9007199254740993]");
  ASSERT_TRUE(v.is_number_array());
  ASSERT_EQ(v.size(), 7u);
  EXPECT_EQ(v.number_at(2), 2.5);
  EXPECT_EQ(v.number_at(3), 1e-3);
  int64_t i;
  ASSERT_TRUE(v.int64_at(4, &i));
  EXPECT_EQ(i, INT64_MAX);
  ASSERT_TRUE(v.int64_at(5, &i));
  EXPECT_EQ(i, INT64_MIN);
  ASSERT_TRUE(v.int64_at(6, &i));
  EXPECT_EQ(i, 9007199254740993LL);  // 2^53 + 1 has no double; the exact value survives
  EXPECT_FALSE(v.int64_at(2, &i));   // 2.5 is not an integer
  ASSERT_TRUE(v.int64_at(1, &i));
  EXPECT_EQ(i, -1);
}

TEST(Json, MixedArrayKeepsNumbersAfterUnpacking) {
  JsonValue v = parse_ok("[1, 9007199254740993, \"s\"]");
  ASSERT_FALSE(v.is_number_array());
  int64_t i;
  ASSERT_TRUE(v.at(1).as_int64(&i));
  EXPECT_EQ(i, 9007199254740993LL);
  EXPECT_EQ(v.at(2).as_string(), "s");
}

TEST(Json, ScalarIntegers) {
  int64_t i;
  uint64_t u;
  EXPECT_TRUE(parse_ok("123").as_int64(&i));
  EXPECT_EQ(i, 123);
  EXPECT_TRUE(parse_ok("2.0").as_int64(&i));  // an integral value, as JS's Number.isInteger sees it
  EXPECT_TRUE(parse_ok("1e3").as_int64(&i));
  EXPECT_EQ(i, 1000);
  EXPECT_FALSE(parse_ok("2.5").as_int64(&i));
  EXPECT_FALSE(parse_ok("9223372036854775808").as_int64(&i));  // 2^63 overflows int64
  EXPECT_TRUE(parse_ok("18446744073709551615").as_uint64(&u));
  EXPECT_EQ(u, UINT64_MAX);
  EXPECT_FALSE(parse_ok("-1").as_uint64(&u));
  EXPECT_FALSE(parse_ok("\"7\"").as_int64(&i));
}

TEST(Json, DecimalNumbersRoundLikeStrtod) {
  // The fast path (mantissa <= 2^53, |exp| <= 22) and the strtod path must agree with strtod exactly.
  std::mt19937_64 rng(1234);
  for (int k = 0; k < 20000; ++k) {
    char text[64];
    double d;
    switch (k % 4) {
      case 0: d = std::ldexp(static_cast<double>(rng() >> 11), -53); break;
      case 1: d = static_cast<double>(static_cast<int64_t>(rng())) * 1e-7; break;
      case 2: d = std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 200) - 150); break;
      default: d = static_cast<float>(std::ldexp(static_cast<double>(rng() >> 40), -20)); break;
    }
    const char* fmt = (k % 3 == 0) ? "%.17g" : (k % 3 == 1) ? "%.9g" : "%.6e";
    std::snprintf(text, sizeof(text), fmt, d);
    JsonValue v = parse_ok(std::string("[") + text + "]");
    ASSERT_EQ(v.number_at(0), std::strtod(text, nullptr)) << text;
    JsonValue s = parse_ok(text);
    ASSERT_EQ(s.as_double(), std::strtod(text, nullptr)) << text;
  }
  EXPECT_EQ(parse_ok("0.1").as_double(), 0.1);
  EXPECT_EQ(parse_ok("123456789012345678901234567890").as_double(), 1.2345678901234568e29);
  EXPECT_EQ(parse_ok("1e-400").as_double(), 0.0);
  EXPECT_TRUE(std::signbit(parse_ok("-0").as_double()));
}

TEST(Json, Strings) {
  JsonValue v = parse_ok(R"("a\"b\\c\/d\n\t\u00e9\ud83d\ude00")");
  EXPECT_EQ(v.as_string(), "a\"b\\c/d\n\t\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(parse_ok("\"caf\xC3\xA9\"").as_string(), "caf\xC3\xA9");
}

TEST(Json, ErrorsSayWhereAndWhat) {
  EXPECT_EQ(parse_error("{\"a\": 1,\n  \"b\" 2}"), "JSON line 2, column 7: expected ':' after object key");
  EXPECT_NE(parse_error("[1, 2").find("line 1, column 6"), std::string::npos);
  EXPECT_NE(parse_error("[1,]").find("expected a value"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\":1,}").find("expected a string key"), std::string::npos);
  EXPECT_NE(parse_error("{\"a\":1,\"a\":2}").find("duplicate key \"a\""), std::string::npos);
  EXPECT_NE(parse_error("01").find("leading zeros"), std::string::npos);
  EXPECT_NE(parse_error("1.").find("digit after '.'"), std::string::npos);
  EXPECT_NE(parse_error("-").find("digit after '-'"), std::string::npos);
  EXPECT_NE(parse_error("1e").find("exponent"), std::string::npos);
  EXPECT_NE(parse_error("1e400").find("out of range"), std::string::npos);
  EXPECT_NE(parse_error("NaN").find("expected a value"), std::string::npos);
  EXPECT_NE(parse_error("tru").find("invalid literal"), std::string::npos);
  EXPECT_NE(parse_error("\"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("\"a\nb\"").find("control character"), std::string::npos);
  EXPECT_NE(parse_error("\"\\x\"").find("invalid escape"), std::string::npos);
  EXPECT_NE(parse_error("\"\\ud800\"").find("surrogate"), std::string::npos);
  EXPECT_NE(parse_error("\"\xC0\xAF\"").find("invalid UTF-8"), std::string::npos);  // overlong '/'
  EXPECT_NE(parse_error("1 2").find("unexpected text after"), std::string::npos);
  EXPECT_NE(parse_error("").find("unexpected end of input"), std::string::npos);
  EXPECT_NE(parse_error("// comment\n1").find("line 1, column 1"), std::string::npos);
}

TEST(Json, DepthLimit) {
  std::string ok(500, '[');
  ok += std::string(500, ']');
  parse_ok(ok);
  std::string deep(100000, '[');  // would overflow the stack without the limit
  EXPECT_NE(parse_error(deep).find("nesting deeper than 512"), std::string::npos);
}

TEST(Json, WriterRoundTrips) {
  JsonWriter w;
  w.begin_object();
  w.key("s");
  w.string("q\"\\\n\x01");
  w.key("f32");
  w.float32(0.1f);
  w.key("f64");
  w.float64(0.1);
  w.key("i");
  w.int64(INT64_MIN);
  w.key("nan");
  w.float32(NAN);
  w.key("list");
  w.begin_array();
  w.boolean(true);
  w.null();
  w.begin_object();
  w.end_object();
  w.end_array();
  w.end_object();
  EXPECT_EQ(w.str(),
            "{\"s\":\"q\\\"\\\\\\n\\u0001\",\"f32\":0.1,\"f64\":0.1,"
            "\"i\":-9223372036854775808,\"nan\":null,\"list\":[true,null,{}]}");
  JsonValue v = parse_ok(w.str());
  EXPECT_EQ(static_cast<float>(v.find("f32")->as_double()), 0.1f);
  EXPECT_EQ(v.find("f64")->as_double(), 0.1);
  EXPECT_EQ(v.find("s")->as_string(), "q\"\\\n\x01");
  // Shortest round-trip text, like JS: more digits only where the value needs them.
  std::mt19937_64 rng(5);
  for (int k = 0; k < 20000; ++k) {
    float f = std::ldexp(static_cast<float>(rng() >> 40), static_cast<int>(rng() % 80) - 60);
    double d = std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 200) - 120);
    JsonWriter wf;
    wf.begin_array();
    wf.float32(f);
    wf.float64(d);
    wf.end_array();
    JsonValue back = parse_ok(wf.str());
    ASSERT_EQ(static_cast<float>(back.number_at(0)), f) << wf.str();
    ASSERT_EQ(back.number_at(1), d) << wf.str();
  }
  JsonWriter third;
  third.float32(1.0f / 3.0f);
  EXPECT_EQ(third.str(), "0.33333334");  // 8 digits suffice for this float
  // Writing a parsed value back keeps its number text and order.
  JsonValue doc = parse_ok(R"({"b":[1,9007199254740993,-2.5],"a":"x"})");
  JsonWriter w2;
  w2.value(doc);
  EXPECT_EQ(w2.str(), R"({"b":[1,9007199254740993,-2.5],"a":"x"})");
}

TEST(Json, Base64RoundTripAndStrictness) {
  std::vector<uint8_t> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t n : {0u, 1u, 2u, 3u, 4u, 5u, 999u, 1000u}) {
    std::string text = base64_encode(bytes.data(), n);
    EXPECT_EQ(text.size(), (n + 2) / 3 * 4);
    std::vector<uint8_t> back;
    std::string why;
    ASSERT_TRUE(base64_decode(text, &back, &why)) << why;
    EXPECT_EQ(back, std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
  }
  EXPECT_EQ(base64_encode("foobar", 6), "Zm9vYmFy");  // RFC 4648 test vectors
  EXPECT_EQ(base64_encode("fo", 2), "Zm8=");
  std::vector<uint8_t> out;
  std::string why;
  EXPECT_FALSE(base64_decode("Zm9", &out, &why));
  EXPECT_NE(why.find("multiple of 4"), std::string::npos);
  EXPECT_FALSE(base64_decode("Zm9v!mFy", &out, &why));
  EXPECT_NE(why.find("offset 4"), std::string::npos);
  EXPECT_FALSE(base64_decode("Zm=v", &out, &why));  // padding inside
  EXPECT_FALSE(base64_decode("Zm9=", &out, &why));  // non-canonical: bits under '=' are set
}

TEST(Json, StreamingBase64MatchesOneShot) {
  // Bigger than the writer's chunk and flush sizes, so chunk boundaries are exercised.
  std::vector<uint8_t> bytes(3 * (1u << 18) * 2 + 5);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::string sunk;
  JsonWriter w([&](const char* d, size_t n) { sunk.append(d, n); });
  w.begin_array();
  w.base64(bytes.data(), bytes.size());
  w.end_array();
  w.flush();
  EXPECT_EQ(sunk, "[\"" + base64_encode(bytes.data(), bytes.size()) + "\"]");
}

}  // namespace
}  // namespace attnkit
