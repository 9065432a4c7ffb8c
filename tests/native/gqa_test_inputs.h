// attnkit tests: building GroupQueryAttention inputs in C++ (owned tensors, deterministic data), and the
// output-vs-reference bound. Shared by the validation, reference, schema and op tests so every test states only
// what it changes.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attnkit/gqa.h"
#include "common/half.h"
#include "gqa_reference.h"

namespace attnkit {
namespace testing_gqa {

struct OwnedTensor {
  DType dtype = DType::kFloat32;
  Shape shape;
  std::vector<uint8_t> bytes;
};

// The case format's splitmix64 stream (DESIGN.md), so a failing test can be replayed as a case file.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {
    uint64_t u = next() >> 32;
    return lo + (hi - lo) * (static_cast<double>(u >> 8) / 16777216.0);
  }

 private:
  uint64_t state_;
};

inline void put_float(OwnedTensor* t, int64_t i, float x) {
  switch (t->dtype) {
    case DType::kFloat32: std::memcpy(&t->bytes[i * 4], &x, 4); break;
    case DType::kFloat16: {
      uint16_t h = float_to_f16(x);
      std::memcpy(&t->bytes[i * 2], &h, 2);
      break;
    }
    case DType::kBFloat16: {
      uint16_t h = float_to_bf16(x);
      std::memcpy(&t->bytes[i * 2], &h, 2);
      break;
    }
    default: break;
  }
}

inline OwnedTensor zero_tensor(DType dtype, Shape shape) {
  OwnedTensor t{dtype, shape, {}};
  t.bytes.assign(static_cast<size_t>(shape_elements(shape)) * dtype_size(dtype), 0);
  return t;
}

inline OwnedTensor random_tensor(DType dtype, Shape shape, uint64_t seed, double lo = -1.0,
                                 double hi = 1.0) {
  OwnedTensor t = zero_tensor(dtype, shape);
  SplitMix rng(seed);
  const int64_t n = shape_elements(shape);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kInt8 || dtype == DType::kUInt8) {
      t.bytes[i] = static_cast<uint8_t>((rng.next() >> 32) & 0xFF);
    } else {
      put_float(&t, i, static_cast<float>(rng.uniform(lo, hi)));
    }
  }
  return t;
}

inline OwnedTensor float_tensor(DType dtype, Shape shape, const std::vector<float>& values) {
  OwnedTensor t = zero_tensor(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) put_float(&t, static_cast<int64_t>(i), values[i]);
  return t;
}

template <typename T>
OwnedTensor int_tensor(DType dtype, Shape shape, const std::vector<T>& values) {
  OwnedTensor t = zero_tensor(dtype, shape);
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(T));
  return t;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape == b.shape && a.dtype == b.dtype && a.storage == b.storage;
}

// The stateless op on `path` with 1 and with 3 threads: both must run, with the same output bits (results do not
// depend on the thread count). Call through ASSERT_NO_FATAL_FAILURE.
inline void run_one_and_three_threads(const GqaInputs& in, const GqaAttributes& attrs, const GqaRequest& request,
                                      AttentionPath path, GqaOutputs* one, GqaOutputs* three,
                                      int flash_block_keys = 0) {
  RunOptions options;
  options.path = path;
  options.flash_block_keys = flash_block_keys;
  options.threads = 1;
  const Status st = group_query_attention(in, attrs, request, one, options);
  ASSERT_TRUE(st.ok()) << st.message();
  options.threads = 3;
  ASSERT_TRUE(group_query_attention(in, attrs, request, three, options).ok());
  EXPECT_TRUE(same_bytes(one->output, three->output)) << "output differs between 1 and 3 threads";
}

// A GQA call: attributes, request, and named input tensors (ORT input names).
struct GqaCase {
  GqaAttributes attrs;
  GqaRequest request;
  std::map<std::string, OwnedTensor> tensors;
  // Views whose data pointer is forced (e.g. nullptr, or a fake address for a never-read huge shape).
  std::map<std::string, TensorView> raw_views;

  OwnedTensor& at(const std::string& name) { return tensors.at(name); }
  void set(const std::string& name, OwnedTensor t) { tensors[name] = std::move(t); }
  void erase(const std::string& name) {
    tensors.erase(name);
    raw_views.erase(name);
  }

  GqaInputs inputs() {
    views_.clear();
    for (auto& [name, t] : tensors) views_[name] = TensorView{t.dtype, t.shape, t.bytes.data()};
    for (auto& [name, v] : raw_views) views_[name] = v;
    GqaInputs in;
    auto get = [&](const char* name) -> const TensorView* {
      auto it = views_.find(name);
      return it == views_.end() ? nullptr : &it->second;
    };
    in.query = get("query");
    in.key = get("key");
    in.value = get("value");
    in.past_key = get("past_key");
    in.past_value = get("past_value");
    in.seqlens_k = get("seqlens_k");
    in.total_sequence_length = get("total_sequence_length");
    in.cos_cache = get("cos_cache");
    in.sin_cache = get("sin_cache");
    in.position_ids = get("position_ids");
    in.attention_bias = get("attention_bias");
    in.head_sink = get("head_sink");
    in.k_scale = get("k_scale");
    in.v_scale = get("v_scale");
    in.q_norm_weight = get("q_norm_weight");
    in.k_norm_weight = get("k_norm_weight");
    return in;
  }

 private:
  std::map<std::string, TensorView> views_;
};

struct CaseSpec {
  int64_t batch = 1, seq = 1, past = 0, heads = 2, kv_heads = 1, head_size = 8;
  DType dtype = DType::kFloat32;
  bool packed = false;
  // Per-batch seqlens_k; empty = every entry full (past + seq - 1).
  std::vector<int32_t> seqlens;
  // total_sequence_length; 0 = past + seq.
  int64_t total = 0;
  // Past buffer length (dim 2); -1 = `past`. Given as an input only when > 0 or past_always.
  int64_t past_capacity = -1;
  bool past_always = false;
  uint64_t seed = 1;
};

// Query/key/value (or packed QKV), past (when any), seqlens_k and total_sequence_length.
inline GqaCase make_case(const CaseSpec& s) {
  GqaCase c;
  c.attrs.num_heads = s.heads;
  c.attrs.kv_num_heads = s.kv_heads;
  const int64_t h = s.head_size, total = s.total ? s.total : s.past + s.seq;
  if (s.packed) {
    c.set("query", random_tensor(s.dtype, {s.batch, s.seq, (s.heads + 2 * s.kv_heads) * h}, s.seed));
  } else {
    c.set("query", random_tensor(s.dtype, {s.batch, s.seq, s.heads * h}, s.seed));
    c.set("key", random_tensor(s.dtype, {s.batch, s.seq, s.kv_heads * h}, s.seed + 1));
    c.set("value", random_tensor(s.dtype, {s.batch, s.seq, s.kv_heads * h}, s.seed + 2));
  }
  const int64_t capacity = s.past_capacity >= 0 ? s.past_capacity : s.past;
  if (capacity > 0 || s.past_always) {
    c.set("past_key", random_tensor(s.dtype, {s.batch, s.kv_heads, capacity, h}, s.seed + 3));
    c.set("past_value", random_tensor(s.dtype, {s.batch, s.kv_heads, capacity, h}, s.seed + 4));
  }
  std::vector<int32_t> seqlens = s.seqlens;
  if (seqlens.empty()) seqlens.assign(s.batch, static_cast<int32_t>(total - 1));
  c.set("seqlens_k", int_tensor<int32_t>(DType::kInt32, {s.batch}, seqlens));
  c.set("total_sequence_length",
        int_tensor<int32_t>(DType::kInt32, {}, {static_cast<int32_t>(total)}));
  return c;
}

// cos/sin caches (max_pos, half) of the usual RoPE angles pos * 10000^(-i/half).
inline void add_rotary(GqaCase* c, DType dtype, int64_t max_pos, int64_t half, bool interleaved) {
  std::vector<float> cs(max_pos * half), sn(max_pos * half);
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double angle = p * std::pow(10000.0, -static_cast<double>(i) / half);
      cs[p * half + i] = static_cast<float>(std::cos(angle));
      sn[p * half + i] = static_cast<float>(std::sin(angle));
    }
  c->set("cos_cache", float_tensor(dtype, {max_pos, half}, cs));
  c->set("sin_cache", float_tensor(dtype, {max_pos, half}, sn));
  c->attrs.do_rotary = 1;
  c->attrs.rotary_interleaved = interleaved ? 1 : 0;
}

// Unit roundoff of the output dtype (half an ulp, relative).
inline double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    default: return 0.0;
  }
}

// Compares one (row-major) result against the reference, row by row (rows of `row` elements).
// Bound: the fp32 pipeline (fp32 dot products over <= 256 channels, polynomial exp, fp32 sums over
// <= 429 keys with probabilities summing to 1) stays within 2e-6 * max(1, max|ref| of the row) — the
// issue's fp32 bound. A 16-bit output is then rounded once: |round(y) - y| <= u|y| with u = 2^-11
// (fp16) / 2^-8 (bf16), plus 2^-25 for fp16 subnormals, so the total is u(|ref| + e) + e + 2^-25.
inline void expect_close(const std::vector<double>& ref, const void* got, DType dtype, int64_t row,
                         const std::string& what) {
  const double u = unit_roundoff(dtype);
  const int64_t rows = static_cast<int64_t>(ref.size()) / row;
  double worst = 0.0;
  int64_t worst_at = -1;
  for (int64_t r = 0; r < rows; ++r) {
    double row_max = 1.0;
    for (int64_t k = 0; k < row; ++k) row_max = std::max(row_max, std::fabs(ref[r * row + k]));
    const double e = 2e-6 * row_max;
    for (int64_t k = 0; k < row; ++k) {
      const int64_t i = r * row + k;
      const double tol = u * (std::fabs(ref[i]) + e) + e + (u > 0 ? std::ldexp(1.0, -25) : 0.0);
      const double err = std::fabs(reference::load_float(got, dtype, i) - ref[i]);
      if (!(err <= tol) && (worst_at < 0 || err / tol > worst)) worst = err / tol, worst_at = i;
    }
  }
  EXPECT_LT(worst_at, 0) << what << ": element " << worst_at << " is off by " << worst
                         << "x its bound; got " << reference::load_float(got, dtype, std::max<int64_t>(worst_at, 0))
                         << ", reference " << ref[std::max<int64_t>(worst_at, 0)];
}

}  // namespace testing_gqa
}  // namespace attnkit
