// attnkit reference: GroupQueryAttention oracle (spec/ort-semantics.md §2, §3, §6).
// One straight loop nest per stage: normalize and rotate, build present, then score/mask/softmax/sum per query row.
// Rotary is evaluated in float with ORT's exact formula (mul, mul, then sub/add), because its result
// is what ORT stores in present and quantizes; scores, softmax and sums are double.
#include "gqa_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/half.h"

namespace attnkit {
namespace reference {
namespace {

float round_to(DType dtype, float x) {
  switch (dtype) {
    case DType::kFloat16: return f16_to_float(float_to_f16(x));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(x));
    default: return x;
  }
}

void store_float(void* data, DType dtype, int64_t index, float x) {
  switch (dtype) {
    case DType::kFloat32: static_cast<float*>(data)[index] = x; break;
    case DType::kFloat16: static_cast<uint16_t*>(data)[index] = float_to_f16(x); break;
    case DType::kBFloat16: static_cast<uint16_t*>(data)[index] = float_to_bf16(x); break;
    default: break;
  }
}

// Rotates one head row in place (only [0, rotary_dim)); float arithmetic, no contraction.
void rotate(const GqaProblem& p, int64_t position, float* x) {
  const int64_t half = p.rotary_dim / 2;
  const TensorView& cos = *p.inputs->cos_cache;
  const TensorView& sin = *p.inputs->sin_cache;
  std::vector<float> in(x, x + p.rotary_dim);
  for (int64_t i = 0; i < half; ++i) {
    const float c = load_float(cos.data, cos.dtype, position * half + i);
    const float s = load_float(sin.data, sin.dtype, position * half + i);
    const int64_t a = p.rotary_interleaved ? 2 * i : i;
    const int64_t b = p.rotary_interleaved ? 2 * i + 1 : i + half;
    const float xa_c = in[a] * c, xb_s = in[b] * s, xb_c = in[b] * c, xa_s = in[a] * s;
    x[a] = xa_c - xb_s;
    x[b] = xb_c + xa_s;
  }
}

// The q/k_norm_weight prologue, x * (1/sqrt(mean(x^2) + epsilon)) * w, in float like rotary (the normalized rows
// are what the cache stores and quantizes), its squares summed in the driver's fixed order: channel d into lane
// d % 16, the lanes then added in halves (0..7 += 8..15, 0..3 += 4..7, ...).
void rms_normalize(const GqaProblem& p, const TensorView* weight, float* x) {
  float lane[16] = {};
  for (int64_t d = 0; d < p.head_size; ++d) lane[d % 16] += x[d] * x[d];
  for (int k = 0; k < 8; ++k) lane[k] += lane[k + 8];
  for (int k = 0; k < 4; ++k) lane[k] += lane[k + 4];
  for (int k = 0; k < 2; ++k) lane[k] += lane[k + 2];
  lane[0] += lane[1];
  const float inv = 1.0f / std::sqrt(lane[0] / static_cast<float>(p.head_size) + p.qk_norm_epsilon);
  for (int64_t d = 0; d < p.head_size; ++d) x[d] = x[d] * inv * load_float(weight->data, weight->dtype, d);
}

// Raw (unrotated) head row of query head h / key or value kv head g at token t, as float.
enum class Part { kQuery, kKey, kValue };
std::vector<float> load_head_row(const GqaProblem& p, Part part, int64_t b, int64_t t, int64_t head) {
  const int64_t h = p.head_size, n = p.heads, nk = p.kv_heads;
  const TensorView* src;
  int64_t offset;
  if (p.packed_qkv) {
    src = p.inputs->query;
    const int64_t first = part == Part::kQuery ? 0 : part == Part::kKey ? n : n + nk;
    offset = (b * p.seq + t) * (n + 2 * nk) * h + (first + head) * h;
  } else if (part == Part::kQuery) {
    src = p.inputs->query;
    offset = (b * p.seq + t) * n * h + head * h;
  } else {
    src = part == Part::kKey ? p.inputs->key : p.inputs->value;
    offset = (b * p.kv_seq + t) * nk * h + head * h;
  }
  std::vector<float> row(h);
  for (int64_t d = 0; d < h; ++d) row[d] = load_float(src->data, src->dtype, offset + d);
  return row;
}

const float* scale_data(const GqaProblem& p, Part part) {
  const TensorView* s = part == Part::kKey ? p.inputs->k_scale : p.inputs->v_scale;
  return s ? s->as<float>() : nullptr;
}

float channel_scale(const GqaProblem& p, const float* scales, int64_t g, int64_t d) {
  return p.quant == KvQuant::kPerChannel ? scales[g * p.head_size + d] : scales[0];
}

// present per §2.6: zero-filled; rows [0, P_b) from past; rows [P_b, P_b + L) = new rows in the cache dtype.
void build_present(const GqaProblem& p, Part part, Tensor* present) {
  const int64_t row_elems = p.bits == 4 ? (p.head_size + 1) / 2 : p.head_size;
  present->reset(p.cache_dtype, {p.batch, p.kv_heads, p.present_len, row_elems});
  const TensorView* past = part == Part::kKey ? p.inputs->past_key : p.inputs->past_value;
  const float* scales = scale_data(p, part);
  const size_t row_bytes = static_cast<size_t>(p.cache_row_bytes);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      uint8_t* dst = present->storage.data() + ((b * p.kv_heads + g) * p.present_len) * row_bytes;
      if (p.past_len[b] > 0) {
        const uint8_t* src = static_cast<const uint8_t*>(past->data) +
                             ((b * p.kv_heads + g) * p.past_capacity) * row_bytes;
        std::memcpy(dst, src, static_cast<size_t>(p.past_len[b]) * row_bytes);
      }
      for (int64_t l = 0; l < p.kv_seq; ++l) {
        std::vector<float> x = load_head_row(p, part, b, l, g);
        if (part == Part::kKey && p.qk_norm) rms_normalize(p, p.inputs->k_norm_weight, x.data());
        if (part == Part::kKey && p.rotary) {
          rotate(p, p.positions[b * p.seq + l], x.data());
          // ORT holds the rotated key in T and quantizes that (a float cache stores it so anyway).
          for (float& v : x) v = round_to(p.dtype, v);
        }
        uint8_t* row = dst + (p.past_len[b] + l) * row_bytes;
        if (p.quant == KvQuant::kNone) {
          for (int64_t d = 0; d < p.head_size; ++d) store_float(row, p.cache_dtype, d, x[d]);
        } else {
          std::vector<float> s(p.head_size);
          for (int64_t d = 0; d < p.head_size; ++d) s[d] = channel_scale(p, scales, g, d);
          quantize_row(x.data(), s.data(), p.head_size, p.bits, row);
        }
      }
    }
  }
}

// The whole present cache dequantized to double, (B, Nk, Mp, H): attention reads K/V in their
// stored form, so the current step's own rows go through the cache dtype too.
std::vector<double> dequantize_present(const GqaProblem& p, Part part, const Tensor& present) {
  const float* scales = scale_data(p, part);
  const int64_t rows = p.batch * p.kv_heads * p.present_len, h = p.head_size;
  std::vector<double> out(static_cast<size_t>(rows * h));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t g = (r / p.present_len) % p.kv_heads;
    const uint8_t* row = present.storage.data() + r * p.cache_row_bytes;
    for (int64_t d = 0; d < h; ++d)
      out[r * h + d] = dequantize_value(
          row, p.cache_dtype, p.bits, d,
          p.quant == KvQuant::kNone ? 1.0f : channel_scale(p, scales, g, d));
  }
  return out;
}

// sliding_window_cache = 1 (§2.9): the step attends over a staging cache that holds all window_rows(P_b) past
// rows and the S new ones (row j is absolute position P_b - window_rows(P_b) + j); the present is the last
// window_rows(T_b) rows of it, at the front of a buffer of the past's capacity, zeros after them.
GqaProblem staging_problem(const GqaProblem& p, std::vector<int64_t>* first_position) {
  GqaProblem staged = p;
  staged.present_len = p.window_capacity;
  first_position->assign(static_cast<size_t>(p.batch), 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t past_rows = p.window_rows(p.past_len[b]);
    (*first_position)[b] = p.past_len[b] - past_rows;
    staged.past_len[b] = staged.causal_offset[b] = past_rows;
    staged.total_len[b] = past_rows + p.seq;
    staged.present_len = std::max(staged.present_len, past_rows + p.seq);
  }
  return staged;
}

void keep_window(const GqaProblem& p, const GqaProblem& staged, Tensor* present) {
  Tensor window;
  window.reset(p.cache_dtype, {p.batch, p.kv_heads, p.window_capacity, present->shape[3]});
  const int64_t row_bytes = p.cache_row_bytes;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t rows = p.window_rows(p.total_len[b]), from = staged.total_len[b] - rows;
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      const int64_t bg = b * p.kv_heads + g;
      std::memcpy(window.storage.data() + bg * p.window_capacity * row_bytes,
                  present->storage.data() + (bg * staged.present_len + from) * row_bytes,
                  static_cast<size_t>(rows * row_bytes));
    }
  }
  *present = std::move(window);
}

}  // namespace

float load_float(const void* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[index];
    case DType::kFloat16: return f16_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(data)[index]);
    default: return std::numeric_limits<float>::quiet_NaN();
  }
}

int quantize_value(float x, float scale, int bits) {
  const float inv = scale == 0.0f ? 1.0f : 1.0f / scale;
  const float y = x * inv;
  const float lo = bits == 4 ? -8.0f : -128.0f, hi = bits == 4 ? 7.0f : 127.0f;
  if (std::isnan(y)) return static_cast<int>(hi);  // ORT: std::max(lo, std::min(hi, NaN)) = hi
  return static_cast<int>(std::min(hi, std::max(lo, std::nearbyint(y))));
}

void quantize_row(const float* x, const float* scales, int64_t head_size, int bits, uint8_t* out) {
  if (bits == 8) {
    for (int64_t d = 0; d < head_size; ++d)
      out[d] = static_cast<uint8_t>(static_cast<int8_t>(quantize_value(x[d], scales[d], 8)));
    return;
  }
  for (int64_t k = 0; k < (head_size + 1) / 2; ++k) {
    const int lo = quantize_value(x[2 * k], scales[2 * k], 4);
    const int hi = 2 * k + 1 < head_size ? quantize_value(x[2 * k + 1], scales[2 * k + 1], 4) : 0;
    out[k] = static_cast<uint8_t>(((lo + 8) & 0xF) | (((hi + 8) & 0xF) << 4));
  }
}

double dequantize_value(const uint8_t* row, DType cache_dtype, int bits, int64_t d, float scale) {
  if (bits == 8) return static_cast<double>(static_cast<int8_t>(row[d])) * scale;
  if (bits == 4) {
    const int nibble = (d % 2 == 0) ? (row[d / 2] & 0xF) : (row[d / 2] >> 4);
    return static_cast<double>(nibble - 8) * scale;
  }
  return load_float(row, cache_dtype, d);
}

Status group_query_attention(const GqaInputs& inputs, const GqaAttributes& attrs,
                             const GqaRequest& request, GqaReferenceResult* result) {
  GqaProblem absolute;
  ATTNKIT_RETURN_IF_ERROR(validate_gqa(inputs, attrs, request, &absolute));
  // Key j of entry b is at absolute position first_position[b] + j (its attention_bias column).
  std::vector<int64_t> first_position(static_cast<size_t>(absolute.batch), 0);
  const GqaProblem p = absolute.window_cache ? staging_problem(absolute, &first_position) : absolute;
  const int64_t B = p.batch, S = p.seq, N = p.heads, H = p.head_size, T = p.total;

  build_present(p, Part::kKey, &result->present_key);
  build_present(p, Part::kValue, &result->present_value);
  const std::vector<double> keys = dequantize_present(p, Part::kKey, result->present_key);
  const std::vector<double> values = dequantize_present(p, Part::kValue, result->present_value);

  result->output_shape = {B, S, N * H};
  result->output.assign(static_cast<size_t>(B * S * N * H), 0.0);
  result->output_qk.clear();
  result->output_qk_shape.clear();
  if (request.output_qk) {
    result->output_qk_shape = {B, N, S, T};
    result->output_qk.assign(static_cast<size_t>(B * N * S * T), 0.0);
  }
  const double alpha = p.alpha;
  const double softcap = p.softcap;
  const TensorView* bias = inputs.attention_bias;
  const TensorView* sink = inputs.head_sink;

  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < N; ++h) {
      const int64_t g = h / p.group;
      for (int64_t i = 0; i < S; ++i) {
        std::vector<float> qf = load_head_row(p, Part::kQuery, b, i, h);
        if (p.qk_norm) rms_normalize(p, inputs.q_norm_weight, qf.data());
        if (p.rotary) rotate(p, p.positions[b * S + i], qf.data());
        // ORT keeps the rotated query in T, so a 16-bit query is rounded once here.
        for (float& v : qf) v = round_to(p.dtype, v);

        int64_t lo, hi;
        p.visible_keys(b, i, &lo, &hi);
        std::vector<double> x(static_cast<size_t>(hi - lo));
        for (int64_t j = lo; j < hi; ++j) {
          const double* k = &keys[static_cast<size_t>(((b * p.kv_heads + g) * p.present_len + j) * H)];
          double dot = 0.0;
          for (int64_t d = 0; d < H; ++d) dot += static_cast<double>(qf[d]) * k[d];
          double v = alpha * dot;
          if (softcap > 0.0) v = softcap * std::tanh(v / softcap);
          if (bias) {
            const int64_t bb = p.bias_batch == 1 ? 0 : b, bh = p.bias_heads == 1 ? 0 : h;
            v += load_float(bias->data, bias->dtype, ((bb * p.bias_heads + bh) * S + i) * T + first_position[b] + j);
          }
          x[j - lo] = v;
        }

        double m = -std::numeric_limits<double>::infinity();
        for (double v : x) m = std::max(m, v);
        double sink_logit = 0.0;
        if (p.use_sink) {
          sink_logit = sink ? static_cast<double>(load_float(sink->data, sink->dtype, h)) : 0.0;
          m = std::max(m, sink_logit);
        }
        // Every score at or below the lowest float (-inf or finfo.min masks; not NaN): fully masked, all
        // probabilities 0, unless a +inf or NaN sink makes them NaN.
        const bool fully_masked =
            std::all_of(x.begin(), x.end(), [](double v) { return v <= std::numeric_limits<float>::lowest(); }) &&
            (!p.use_sink || sink_logit < std::numeric_limits<double>::infinity());
        double den = p.use_sink ? std::exp(sink_logit - m) : 0.0;
        for (double v : x) den += std::exp(v - m);
        std::vector<double> prob(x.size());
        if (!fully_masked)
          for (size_t j = 0; j < x.size(); ++j) prob[j] = std::exp(x[j] - m) / den;

        if (request.output_qk) {
          double* qk_row = &result->output_qk[static_cast<size_t>(((b * N + h) * S + i) * T)];
          for (int64_t j = lo; j < hi; ++j)
            qk_row[j] = p.qk_output == 1 ? x[j - lo] : prob[j - lo];
        }
        if (fully_masked) continue;  // its output is 0 whatever its values hold (not 0 x NaN)
        double* out = &result->output[static_cast<size_t>((b * S + i) * N * H + h * H)];
        for (int64_t j = lo; j < hi; ++j) {
          const double* v = &values[static_cast<size_t>(((b * p.kv_heads + g) * p.present_len + j) * H)];
          for (int64_t d = 0; d < H; ++d) out[d] += prob[j - lo] * v[d];
        }
      }
    }
  }
  if (absolute.window_cache) {
    keep_window(absolute, p, &result->present_key);
    keep_window(absolute, p, &result->present_value);
  }
  return Status::Ok();
}

}  // namespace reference
}  // namespace attnkit
