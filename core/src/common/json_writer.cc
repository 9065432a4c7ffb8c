// attnkit: base64 and the streaming JSON writer behind json.h.
// Results can be hundreds of MB of base64, so the writer encodes in chunks and hands full buffers to a
// sink instead of building the whole document in memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/json.h"

namespace attnkit {

// ---------------------------------------------------------------------------------------------
// Base64

namespace {

const char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// Encodes whole 3-byte groups (and the final partial group when `last`) of [in, in+n) into out.
void base64_encode_into(const uint8_t* in, size_t n, std::string* out) {
  size_t full = n / 3 * 3;
  size_t start = out->size();
  out->resize(start + (n + 2) / 3 * 4);
  char* o = &(*out)[start];
  for (size_t i = 0; i < full; i += 3) {
    uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    *o++ = kBase64Alphabet[v >> 18];
    *o++ = kBase64Alphabet[(v >> 12) & 63];
    *o++ = kBase64Alphabet[(v >> 6) & 63];
    *o++ = kBase64Alphabet[v & 63];
  }
  size_t rest = n - full;
  if (rest) {
    uint32_t v = uint32_t{in[full]} << 16;
    if (rest == 2) v |= uint32_t{in[full + 1]} << 8;
    *o++ = kBase64Alphabet[v >> 18];
    *o++ = kBase64Alphabet[(v >> 12) & 63];
    *o++ = rest == 2 ? kBase64Alphabet[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
}

}  // namespace

std::string base64_encode(const void* data, size_t size) {
  std::string out;
  base64_encode_into(static_cast<const uint8_t*>(data), size, &out);
  return out;
}

bool base64_decode(const std::string& text, std::vector<uint8_t>* out, std::string* error) {
  static int8_t table[256];
  static bool ready = [] {
    std::memset(table, -1, sizeof(table));
    for (int i = 0; i < 64; ++i) table[static_cast<unsigned char>(kBase64Alphabet[i])] = static_cast<int8_t>(i);
    return true;
  }();
  (void)ready;
  size_t n = text.size();
  if (n % 4 != 0) {
    *error = "base64 length " + std::to_string(n) + " is not a multiple of 4";
    return false;
  }
  size_t pad = 0;
  if (n >= 1 && text[n - 1] == '=') ++pad;
  if (n >= 2 && text[n - 2] == '=') ++pad;
  out->resize(n / 4 * 3 - pad);
  uint8_t* o = out->data();
  const unsigned char* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < n; i += 4) {
    bool last = i + 4 == n;
    int v[4];
    for (int k = 0; k < 4; ++k) {
      unsigned char c = s[i + k];
      if (c == '=' && last && k >= 4 - static_cast<int>(pad)) {
        v[k] = 0;
        continue;
      }
      v[k] = table[c];
      if (v[k] < 0) {
        *error = "invalid base64 character at offset " + std::to_string(i + k);
        return false;
      }
    }
    uint32_t bits = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    size_t bytes = last ? 3 - pad : 3;
    // Canonical form: bits under the padding must be zero.
    if (last && pad && (bits & ((1u << (8 * pad)) - 1)) != 0) {
      *error = "non-canonical base64 padding";
      return false;
    }
    if (bytes > 0) *o++ = static_cast<uint8_t>(bits >> 16);
    if (bytes > 1) *o++ = static_cast<uint8_t>(bits >> 8);
    if (bytes > 2) *o++ = static_cast<uint8_t>(bits);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Writer

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_in_scope_.empty()) {
    if (!first_in_scope_.back()) buffer_.push_back(',');
    first_in_scope_.back() = false;
  }
}

void JsonWriter::maybe_flush() {
  if (sink_ && buffer_.size() >= (1u << 20)) flush();
}

void JsonWriter::flush() {
  if (sink_ && !buffer_.empty()) {
    sink_(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
}

void JsonWriter::begin_object() {
  before_value();
  buffer_.push_back('{');
  first_in_scope_.push_back(true);
}

void JsonWriter::end_object() {
  buffer_.push_back('}');
  first_in_scope_.pop_back();
  maybe_flush();
}

void JsonWriter::begin_array() {
  before_value();
  buffer_.push_back('[');
  first_in_scope_.push_back(true);
}

void JsonWriter::end_array() {
  buffer_.push_back(']');
  first_in_scope_.pop_back();
  maybe_flush();
}

void JsonWriter::key(const std::string& k) {
  string(k);
  buffer_.push_back(':');
  after_key_ = true;
}

void JsonWriter::string(const std::string& s) {
  before_value();
  buffer_.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': buffer_ += "\\\""; break;
      case '\\': buffer_ += "\\\\"; break;
      case '\n': buffer_ += "\\n"; break;
      case '\r': buffer_ += "\\r"; break;
      case '\t': buffer_ += "\\t"; break;
      case '\b': buffer_ += "\\b"; break;
      case '\f': buffer_ += "\\f"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof(esc), "\\u%04x", c);
          buffer_ += esc;
        } else {
          buffer_.push_back(static_cast<char>(c));
        }
    }
  }
  buffer_.push_back('"');
  maybe_flush();
}

void JsonWriter::int64(int64_t v) {
  before_value();
  buffer_ += std::to_string(v);
}

void JsonWriter::uint64(uint64_t v) {
  before_value();
  buffer_ += std::to_string(v);
}

// Shortest text that reads back to the same value (as JS prints numbers), at most %.9g / %.17g.
void JsonWriter::float32(float v) {
  before_value();
  if (!std::isfinite(v)) {
    buffer_ += "null";
    return;
  }
  char text[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(v));
    if (static_cast<float>(std::strtod(text, nullptr)) == v) break;
  }
  buffer_ += text;
}

void JsonWriter::float64(double v) {
  before_value();
  if (!std::isfinite(v)) {
    buffer_ += "null";
    return;
  }
  char text[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  buffer_ += text;
}

void JsonWriter::boolean(bool b) {
  before_value();
  buffer_ += b ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  buffer_ += "null";
}

void JsonWriter::base64(const void* data, size_t size) {
  before_value();
  buffer_.push_back('"');
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  // Chunks of whole 3-byte groups keep the encoding identical to one-shot encoding.
  const size_t chunk = 3 * (1u << 18);
  for (size_t off = 0; off < size; off += chunk) {
    base64_encode_into(bytes + off, std::min(chunk, size - off), &buffer_);
    maybe_flush();
  }
  buffer_.push_back('"');
}

void JsonWriter::value(const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::kNull: null(); break;
    case JsonValue::Type::kBool: boolean(v.as_bool()); break;
    case JsonValue::Type::kNumber:
      if (!v.number_text().empty()) {
        before_value();
        buffer_ += v.number_text();
      } else {
        float64(v.as_double());
      }
      break;
    case JsonValue::Type::kString: string(v.as_string()); break;
    case JsonValue::Type::kArray:
      begin_array();
      if (v.is_number_array()) {
        for (size_t i = 0; i < v.size(); ++i) {
          int64_t exact;
          if (v.int64_at(i, &exact) && std::fabs(v.number_at(i)) >= 9007199254740992.0) {
            int64(exact);
          } else {
            float64(v.number_at(i));
          }
        }
      } else {
        for (size_t i = 0; i < v.size(); ++i) value(v.at(i));
      }
      end_array();
      break;
    case JsonValue::Type::kObject:
      begin_object();
      for (const auto& m : v.members()) {
        key(m.first);
        value(m.second);
      }
      end_object();
      break;
  }
}

void JsonWriter::raw(const std::string& text) {
  buffer_ += text;
  maybe_flush();
}

}  // namespace attnkit
