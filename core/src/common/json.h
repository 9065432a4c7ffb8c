// attnkit: a small strict JSON parser and a streaming writer, for case files, attributes and results.
// Case files can hold millions of numbers, so an array made only of numbers is stored packed (8 bytes
// per element) instead of one node per element; integers keep their exact int64 value beside the double.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnkit/status.h"

namespace attnkit {

class JsonValue {
 public:
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue MakeBool(bool b);
  static JsonValue MakeNumber(double value);
  static JsonValue MakeInt(int64_t value);
  static JsonValue MakeString(std::string s);
  static JsonValue MakeArray();
  static JsonValue MakeObject();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  static const char* type_name(Type type);

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  // The number's source text ("" for values not read from text).
  const std::string& number_text() const { return text_; }
  // True when the number is an integer that fits; exact for integer literals beyond 2^53.
  bool as_int64(int64_t* out) const;
  bool as_uint64(uint64_t* out) const;
  const std::string& as_string() const { return text_; }

  // Arrays: size() elements. An array whose elements are all numbers (or that is empty) is a
  // number array, read through number_at / int64_at; other arrays through at().
  size_t size() const;
  bool is_number_array() const { return type_ == Type::kArray && items_.empty(); }
  double number_at(size_t i) const { return packed_[i]; }
  bool int64_at(size_t i, int64_t* out) const;
  const JsonValue& at(size_t i) const { return items_[i]; }
  void push_back(JsonValue v);

  // Objects keep insertion order; keys are unique (the parser rejects duplicates).
  const std::vector<Member>& members() const { return members_; }
  const JsonValue* find(std::string_view key) const;  // no string built per lookup
  void set(const std::string& key, JsonValue v);

 private:
  friend class JsonParser;
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string text_;                 // string value, or a number's source text
  std::vector<JsonValue> items_;     // arrays holding a non-number
  std::vector<double> packed_;       // arrays of numbers only
  // (index, exact value) of packed integers whose double is inexact (|v| > 2^53), by index.
  std::vector<std::pair<size_t, int64_t>> packed_big_ints_;
  std::vector<Member> members_;
};

// Parses one JSON document. Errors say "line L, column C: <what>". Nesting deeper than 512 is refused.
Status parse_json(const char* text, size_t size, JsonValue* out);
inline Status parse_json(const std::string& text, JsonValue* out) {
  return parse_json(text.data(), text.size(), out);
}

// Base64 (RFC 4648, with padding, no whitespace).
std::string base64_encode(const void* data, size_t size);
// Strict: rejects bad characters, bad padding and lengths not a multiple of 4. On error, *error says why.
bool base64_decode(const std::string& text, std::vector<uint8_t>* out, std::string* error);

// Writes JSON text into a buffer that is handed to `sink` whenever it grows past ~1 MiB and at
// flush(); with no sink, the text accumulates and str() returns it. Commas are inserted automatically.
class JsonWriter {
 public:
  using Sink = std::function<void(const char* data, size_t size)>;
  explicit JsonWriter(Sink sink = nullptr) : sink_(std::move(sink)) {}

  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(const std::string& k);
  void string(const std::string& s);
  void int64(int64_t v);
  void uint64(uint64_t v);
  void float32(float v);    // shortest of %.6g..%.9g that round-trips; non-finite -> null
  void float64(double v);   // shortest of %.15g..%.17g that round-trips; non-finite -> null
  void boolean(bool b);
  void null();
  void base64(const void* data, size_t size);  // a string value, encoded in chunks
  void value(const JsonValue& v);               // writes a parsed value back out
  void raw(const std::string& text);            // appends text as-is (a newline, for instance)

  void flush();
  const std::string& str() const { return buffer_; }

 private:
  void before_value();
  void maybe_flush();
  Sink sink_;
  std::string buffer_;
  std::vector<bool> first_in_scope_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace attnkit
