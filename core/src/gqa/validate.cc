// attnkit: GroupQueryAttention validation — every shape, dtype, attribute and data-dependent rule
// of spec/ort-semantics.md §2.1, §3 and §8, checked before anything is allocated or read out of
// bounds, and the derived GqaProblem (phase, per-batch lengths, rotary positions) the driver,
// the reference oracle and the schema functions all share.
#include <cctype>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "common/tensor_storage.h"
#include "gqa/problem.h"

namespace attnkit {
namespace {

// Outputs and the internal cache are capped at 16 GiB: larger requests are almost surely a
// malformed shape, and refusing them up front keeps a bad case from exhausting memory.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 34;
// A naive score block holds 64 rows of total_sequence_length floats per worker; 2^26 keeps one
// block within 16 GiB and is far beyond any real context length.
constexpr int64_t kMaxTotalSequence = int64_t(1) << 26;

std::string str(int64_t v) { return std::to_string(v); }

Status fail(const std::string& message) { return Status::Error(message); }

bool is_attention_float(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// Product of non-negative factors, or -1 when it exceeds int64.
int64_t checked_product(std::initializer_list<int64_t> factors) {
  int64_t n = 1;
  for (int64_t f : factors) {
    if (f < 0) return -1;
    if (f != 0 && n > std::numeric_limits<int64_t>::max() / f) return -1;
    n *= f;
  }
  return n;
}

Status expect_rank(const TensorView& t, const char* name, size_t rank) {
  if (t.shape.size() != rank)
    return fail(std::string(name) + ": rank must be " + str(static_cast<int64_t>(rank)) +
                ", got shape " + shape_to_string(t.shape));
  return Status::Ok();
}

Status expect_dtype(const TensorView& t, const char* name, DType want, const char* like) {
  if (t.dtype != want)
    return fail(std::string(name) + ": dtype must be " + dtype_name(want) + like + ", got " +
                dtype_name(t.dtype));
  return Status::Ok();
}

Status expect_dim(const TensorView& t, const char* name, size_t dim, int64_t want, const char* what) {
  if (t.shape[dim] != want)
    return fail(std::string(name) + ": dim " + str(static_cast<int64_t>(dim)) + " must equal " +
                what + " " + str(want) + ", got " + str(t.shape[dim]));
  return Status::Ok();
}

Status check_byte_limit(const char* name, int64_t bytes) {
  if (bytes < 0 || bytes > kMaxTensorBytes)
    return fail(std::string(name) + ": " + (bytes < 0 ? std::string("byte count overflows")
                                                      : str(bytes) + " bytes") +
                " exceeds the 16 GiB limit of one tensor");
  return Status::Ok();
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

Status parse_quant_type(const std::string& value, const char* name, KvQuant* quant) {
  std::string u = upper(value);
  if (u == "NONE") *quant = KvQuant::kNone;
  else if (u == "PER_TENSOR") *quant = KvQuant::kPerTensor;
  else if (u == "PER_CHANNEL") *quant = KvQuant::kPerChannel;
  else
    return fail(std::string(name) + " = \"" + value +
                "\" is not supported (NONE, PER_TENSOR or PER_CHANNEL)");
  return Status::Ok();
}

Status check_attributes(const GqaAttributes& a, const GqaRequest& request, GqaProblem* p) {
  if (a.num_heads <= 0) return fail("num_heads = " + str(a.num_heads) + " must be positive");
  if (a.kv_num_heads <= 0) return fail("kv_num_heads = " + str(a.kv_num_heads) + " must be positive");
  // Far above any model; keeps every head-count product below int64 overflow.
  constexpr int64_t kMaxHeads = int64_t(1) << 24;
  if (a.num_heads > kMaxHeads || a.kv_num_heads > kMaxHeads)
    return fail("num_heads / kv_num_heads must be at most " + str(kMaxHeads));
  if (a.num_heads % a.kv_num_heads != 0)
    return fail("num_heads = " + str(a.num_heads) + " must be a multiple of kv_num_heads = " +
                str(a.kv_num_heads));
  if (a.qk_output < 0 || a.qk_output > 2)
    return fail("qk_output = " + str(a.qk_output) +
                " is not supported (0 none, 1 before softmax, 2 after softmax)");
  if (a.qk_output != 0 && !request.output_qk)
    return fail("qk_output = " + str(a.qk_output) + " requires the output_qk output to be requested");
  // ORT returns uninitialised memory in this case; refusing it is the only honest answer.
  if (a.qk_output == 0 && request.output_qk)
    return fail("output_qk was requested but qk_output = 0; set qk_output to 1 or 2");
  if (a.causal != 0 && a.causal != 1) return fail("causal = " + str(a.causal) + " must be 0 or 1");
  if (a.local_window_size < -1)
    return fail("local_window_size = " + str(a.local_window_size) + " must be -1 (off) or positive");
  // With the W-keys rule a zero window leaves no visible key at all (softmax over nothing); ORT's
  // kernels disagree on what that means, so it is refused rather than guessed.
  if (a.local_window_size == 0)
    return fail("local_window_size = 0 leaves no visible key; use -1 (off) or a positive window");
  if (a.causal == 0 && a.local_window_size != -1)
    return fail("local_window_size must be -1 when causal = 0, got " + str(a.local_window_size));
  // 0 or less is off, as in ORT's kernel (spec §1); NaN and inf would make every score NaN.
  if (!std::isfinite(a.softcap))
    return fail("softcap = " + std::to_string(a.softcap) + " must be finite (0 or less: off)");
  if (!std::isfinite(a.scale)) return fail("scale = " + std::to_string(a.scale) + " must be finite");
  if (a.do_rotary != 0 && a.do_rotary != 1)
    return fail("do_rotary = " + str(a.do_rotary) + " must be 0 or 1");
  if (a.rotary_interleaved != 0 && a.rotary_interleaved != 1)
    return fail("rotary_interleaved = " + str(a.rotary_interleaved) + " must be 0 or 1");
  if (a.sliding_window_cache != 0 && a.sliding_window_cache != 1)
    return fail("sliding_window_cache = " + str(a.sliding_window_cache) + " must be 0 or 1");
  p->window_cache = a.sliding_window_cache == 1;
  if (p->window_cache && a.local_window_size <= 0)
    return fail("sliding_window_cache = 1 needs local_window_size > 0 (the window the cache holds), got " +
                str(a.local_window_size));
  if (p->window_cache && a.qk_output != 0)
    return fail("qk_output = " + str(a.qk_output) + " is not supported with sliding_window_cache = 1 (as in ORT)");

  KvQuant kq, vq;
  ATTNKIT_RETURN_IF_ERROR(parse_quant_type(a.k_quant_type, "k_quant_type", &kq));
  ATTNKIT_RETURN_IF_ERROR(parse_quant_type(a.v_quant_type, "v_quant_type", &vq));
  if (kq != vq)
    return fail("k_quant_type = \"" + a.k_quant_type + "\" must equal v_quant_type = \"" +
                a.v_quant_type + "\"");
  p->quant = kq;
  if (kq == KvQuant::kNone) {
    if (a.kv_cache_bit_width != 0)
      return fail("kv_cache_bit_width = " + str(a.kv_cache_bit_width) +
                  " must be 0 when the cache is not quantized (k_quant_type NONE)");
  } else if (a.kv_cache_bit_width != 4 && a.kv_cache_bit_width != 8) {
    return fail("kv_cache_bit_width = " + str(a.kv_cache_bit_width) +
                " must be 4 or 8 with a quantized cache");
  }
  p->bits = static_cast<int>(a.kv_cache_bit_width);
  return Status::Ok();
}

// query / key / value: layout, head size, dtype T.
Status check_qkv(const GqaInputs& in, GqaProblem* p) {
  const TensorView& q = *in.query;
  ATTNKIT_RETURN_IF_ERROR(expect_rank(q, "query", 3));
  if (!is_attention_float(q.dtype))
    return fail(std::string("query: dtype must be float32, float16 or bfloat16, got ") +
                dtype_name(q.dtype));
  p->dtype = q.dtype;
  p->batch = q.shape[0];
  p->seq = q.shape[1];
  if (p->batch <= 0) return fail("query: dim 0 (batch_size) must be positive, got " + str(p->batch));
  const int64_t n = p->heads, nk = p->kv_heads;
  if (!in.key) {
    if (in.value) return fail("value: must be absent when key is absent (packed QKV)");
    p->packed_qkv = true;
    const int64_t all_heads = n + 2 * nk;
    if (q.shape[2] % all_heads != 0)
      return fail("query: packed QKV dim 2 = " + str(q.shape[2]) +
                  " must be a multiple of num_heads + 2 * kv_num_heads = " + str(all_heads));
    p->head_size = q.shape[2] / all_heads;
    p->kv_seq = p->seq;
  } else {
    if (!in.value) return fail("value: required when key is given");
    if (q.shape[2] % n != 0)
      return fail("query: dim 2 = " + str(q.shape[2]) + " must be a multiple of num_heads = " + str(n));
    p->head_size = q.shape[2] / n;
    const char* names[2] = {"key", "value"};
    const TensorView* kv[2] = {in.key, in.value};
    for (int i = 0; i < 2; ++i) {
      const TensorView& t = *kv[i];
      ATTNKIT_RETURN_IF_ERROR(expect_rank(t, names[i], 3));
      ATTNKIT_RETURN_IF_ERROR(expect_dtype(t, names[i], p->dtype, " like query"));
      ATTNKIT_RETURN_IF_ERROR(expect_dim(t, names[i], 0, p->batch, "batch_size"));
      ATTNKIT_RETURN_IF_ERROR(expect_dim(t, names[i], 2, nk * p->head_size,
                                         "kv_num_heads * head_size ="));
    }
    // The key against the query first: where only the key's length is off, the message names the key.
    p->kv_seq = in.key->shape[1];
    if (p->kv_seq != p->seq && p->kv_seq != 0)
      return fail("key: dim 1 must equal sequence_length " + str(p->seq) +
                  " (or 0 to reuse the past as shared KV), got " + str(p->kv_seq));
    if (in.value->shape[1] != p->kv_seq)
      return fail("value: dim 1 must equal key dim 1 " + str(p->kv_seq) + ", got " +
                  str(in.value->shape[1]));
  }
  if (p->head_size <= 0 || p->head_size % 8 != 0)
    return fail("head_size = " + str(p->head_size) + " must be a positive multiple of 8");
  p->shared_kv = p->kv_seq == 0;
  return Status::Ok();
}

// past_key / past_value and the cache dtype, including the quantized layouts of §3.
Status check_cache(const GqaInputs& in, GqaProblem* p) {
  const int64_t h = p->head_size;
  if (p->quant == KvQuant::kNone) {
    p->cache_dtype = p->dtype;
    p->cache_row_bytes = h * static_cast<int64_t>(dtype_size(p->dtype));
  } else if (p->bits == 8) {
    p->cache_dtype = DType::kInt8;
    p->cache_row_bytes = h;
  } else {
    p->cache_dtype = DType::kUInt8;
    p->cache_row_bytes = (h + 1) / 2;
  }
  if (!in.past_key != !in.past_value)
    return fail(std::string(in.past_key ? "past_value" : "past_key") +
                ": past_key and past_value must be given together");
  p->has_past = in.past_key != nullptr;
  p->past_capacity = 0;
  if (!p->has_past) return Status::Ok();
  // A 16-bit float cache under float32 activations halves the cache (ORT 1.30 runs it too): the
  // past's dtype then decides the cache dtype.
  const DType past_dtype = in.past_key->dtype;
  if (p->quant == KvQuant::kNone && p->dtype == DType::kFloat32 &&
      (past_dtype == DType::kFloat16 || past_dtype == DType::kBFloat16)) {
    p->cache_dtype = past_dtype;
    p->cache_row_bytes = h * static_cast<int64_t>(dtype_size(past_dtype));
  }
  const char* names[2] = {"past_key", "past_value"};
  const TensorView* past[2] = {in.past_key, in.past_value};
  const char* like = p->quant == KvQuant::kNone ? " (the dtype of query, or float16/bfloat16 under float32; cache not quantized)"
                     : p->bits == 8             ? " (8-bit quantized cache)"
                                                : " (4-bit quantized cache, packed nibbles)";
  for (int i = 0; i < 2; ++i) {
    const TensorView& t = *past[i];
    ATTNKIT_RETURN_IF_ERROR(expect_rank(t, names[i], 4));
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(t, names[i], p->cache_dtype, like));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(t, names[i], 0, p->batch, "batch_size"));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(t, names[i], 1, p->kv_heads, "kv_num_heads"));
    const int64_t last = p->bits == 4 ? (h + 1) / 2 : h;
    ATTNKIT_RETURN_IF_ERROR(
        expect_dim(t, names[i], 3, last, p->bits == 4 ? "ceil(head_size / 2) =" : "head_size"));
  }
  p->past_capacity = in.past_key->shape[2];
  if (in.past_value->shape[2] != p->past_capacity)
    return fail("past_value: dim 2 must equal past_key dim 2 " + str(p->past_capacity) + ", got " +
                str(in.past_value->shape[2]));
  return Status::Ok();
}

// sliding_window_cache = 1: the past is the window-sized buffer the present is written back to.
Status check_window_cache(const GqaProblem& p) {
  if (!p.window_cache) return Status::Ok();
  if (!p.has_past)
    return fail("past_key: sliding_window_cache = 1 needs past_key and past_value (their dim 2 is the cache capacity)");
  if (p.past_capacity < p.window)
    return fail("past_key: dim 2 = " + str(p.past_capacity) + " (the cache capacity) must be >= local_window_size " +
                str(p.window) + " with sliding_window_cache = 1");
  if (p.shared_kv)
    return fail("key: dim 1 = 0 (shared KV) is not supported with sliding_window_cache = 1");
  return Status::Ok();
}

Status check_scales(const GqaInputs& in, const GqaProblem& p) {
  const char* names[2] = {"k_scale", "v_scale"};
  const TensorView* scales[2] = {in.k_scale, in.v_scale};
  for (int i = 0; i < 2; ++i) {
    const TensorView* s = scales[i];
    if (p.quant == KvQuant::kNone) {
      if (s)
        return fail(std::string(names[i]) +
                    ": only used with a quantized cache, but k_quant_type is NONE");
      continue;
    }
    if (!s)
      return fail(std::string(names[i]) + ": required with a quantized cache (k_quant_type " +
                  (p.quant == KvQuant::kPerTensor ? "PER_TENSOR" : "PER_CHANNEL") + ")");
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(*s, names[i], DType::kFloat32, ""));
    const int64_t want = p.quant == KvQuant::kPerTensor ? 1 : p.kv_heads * p.head_size;
    if (s->elements() != want)
      return fail(std::string(names[i]) + " shape mismatch: expected " + str(want) +
                  " elements (" + (p.quant == KvQuant::kPerTensor ? "PER_TENSOR" : "PER_CHANNEL: kv_num_heads * head_size") +
                  "), got shape " + shape_to_string(s->shape));
    // ORT runs a NaN or infinite scale into NaN or zero rows (inconsistently across its paths): refused here.
    const float* values = static_cast<const float*>(s->data);
    for (int64_t k = 0; values && k < want; ++k)
      if (!std::isfinite(values[k]))
        return fail(std::string(names[i]) + "[" + str(k) + "] = " +
                    (std::isnan(values[k]) ? "NaN" : values[k] > 0 ? "inf" : "-inf") + ": a scale must be finite");
  }
  return Status::Ok();
}

// seqlens_k and total_sequence_length: ORT's accepted shapes (legacy (B,1) / (1,B) included).
Status check_lengths_inputs(const GqaInputs& in, GqaProblem* p) {
  const TensorView& sk = *in.seqlens_k;
  ATTNKIT_RETURN_IF_ERROR(expect_dtype(sk, "seqlens_k", DType::kInt32, ""));
  const int64_t b = p->batch;
  if (sk.shape.empty()) return fail("seqlens_k must be at least 1D, got a scalar");
  if (sk.elements() != b)
    return fail("seqlens_k must have batch_size = " + str(b) + " elements, got shape " +
                shape_to_string(sk.shape));
  const bool ok_shape = (sk.shape.size() == 1) ||
                        (sk.shape.size() == 2 && (sk.shape[0] == 1 || sk.shape[1] == 1));
  if (!ok_shape)
    return fail("seqlens_k has unexpected shape " + shape_to_string(sk.shape) + " (expected [" +
                str(b) + "], [" + str(b) + ", 1] or [1, " + str(b) + "])");

  const TensorView& ts = *in.total_sequence_length;
  ATTNKIT_RETURN_IF_ERROR(expect_dtype(ts, "total_sequence_length", DType::kInt32, ""));
  if (ts.shape.size() > 1 || ts.elements() != 1)
    return fail("total_sequence_length must be a scalar or a 1-D tensor of one element, got shape " +
                shape_to_string(ts.shape));
  p->total = *ts.as<int32_t>();
  if (p->total <= 0)
    return fail("total_sequence_length must be positive, got " + str(p->total));
  if (p->total > kMaxTotalSequence)
    return fail("total_sequence_length = " + str(p->total) + " exceeds the supported maximum " +
                str(kMaxTotalSequence));
  return Status::Ok();
}

// Phase (first prompt, token generation, chunked prefill, shared KV) and per-batch lengths, §2.2/§2.7.
Status derive_lengths(const GqaInputs& in, GqaProblem* p) {
  const int64_t s = p->seq, t = p->total, m = p->past_capacity;
  p->first_prompt = s == t;
  if (!p->first_prompt && s > 1 && p->batch != 1)
    return fail("query: sequence_length = " + str(s) + " differs from total_sequence_length = " +
                str(t) + " (chunked prefill with past context), which requires batch_size 1, got " +
                str(p->batch));
  if (!p->first_prompt && s < 1)
    return fail("query: sequence_length must be positive, got " + str(s));
  if (p->shared_kv) {
    if (!p->has_past) return fail("key: dim 1 = 0 (shared KV) requires past_key and past_value");
    if (t > m)
      return fail("past_key: dim 2 = " + str(m) +
                  " must be >= total_sequence_length " + str(t) + " when key has 0 tokens (shared KV)");
  }
  // A window cache keeps its capacity; entries may run past it (their oldest rows are evicted).
  p->present_len = p->window_cache ? m : std::max(t, m);
  const int32_t* sk = in.seqlens_k->as<int32_t>();
  p->total_len.assign(p->batch, 0);
  p->past_len.assign(p->batch, 0);
  p->causal_offset.assign(p->batch, 0);
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t v = sk[b];
    const std::string at = "seqlens_k[" + str(b) + "] = " + str(v);
    if (v < 0 || (!p->window_cache && v >= p->present_len))
      return fail(at + " is out of range [0, " + str(p->present_len) + ")");
    const int64_t tb = v + 1;
    // total_sequence_length is the batch maximum; attention_bias and output_qk rows have exactly
    // that many columns, so a longer entry would read or write past them.
    if (tb > t)
      return fail(at + " exceeds total_sequence_length - 1 = " + str(t - 1) +
                  " (total_sequence_length is the maximum over the batch)");
    // A window cache writes every new token at its entry's end, so no entry may be padded.
    if ((!p->first_prompt || p->window_cache) && tb < s)
      return fail(at + " is too small for sequence_length " + str(s) +
                  (p->first_prompt ? " (sliding_window_cache = 1 does not take padded prompts)" : ""));
    p->total_len[b] = tb;
    if (p->shared_kv) {
      p->past_len[b] = tb;
      p->causal_offset[b] = p->first_prompt ? 0 : tb - s;
    } else if (p->first_prompt) {
      p->past_len[b] = 0;
      p->causal_offset[b] = 0;
    } else {
      const int64_t pb = tb - s;
      if (pb > m && !p->window_cache)
        return fail(at + " needs " + str(pb) + " past rows but past_key holds " + str(m) +
                    (p->has_past ? "" : " (no past_key given)"));
      p->past_len[b] = pb;
      p->causal_offset[b] = pb;
    }
  }
  // After the per-entry rules, which say more. ORT 1.31 sizes a grown present as past + new rows exactly; a total
  // between them, or beyond, it refuses.
  if (!p->window_cache && t > m && t != m + p->kv_seq)
    return fail("total_sequence_length must equal past_sequence_length + kv_sequence_length for a dynamic cache, "
                "or be no greater than past_sequence_length for a static cache; got total_sequence_length = " +
                str(t) + ", past_sequence_length = " + str(m) + ", kv_sequence_length = " + str(p->kv_seq));
  return Status::Ok();
}

// cos/sin caches and rotary positions (§2.4), with the first-prompt position_ids rule.
Status check_rotary(const GqaInputs& in, const GqaAttributes& a, GqaProblem* p) {
  if (!in.cos_cache != !in.sin_cache)
    return fail(std::string(in.cos_cache ? "sin_cache" : "cos_cache") +
                ": cos_cache and sin_cache must be given together");
  if (in.position_ids) {
    const TensorView& pos = *in.position_ids;
    ATTNKIT_RETURN_IF_ERROR(expect_rank(pos, "position_ids", 2));
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(pos, "position_ids", DType::kInt64, ""));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(pos, "position_ids", 0, p->batch, "batch_size"));
    if (pos.shape[1] < p->seq)
      return fail("position_ids: dim 1 must be >= sequence_length " + str(p->seq) + ", got " +
                  str(pos.shape[1]));
  }
  p->rotary = a.do_rotary == 1;
  p->rotary_interleaved = a.rotary_interleaved == 1;
  if (!p->rotary) {
    if (in.cos_cache) return fail("cos_cache: given but do_rotary = 0");
    return Status::Ok();
  }
  if (!in.cos_cache) return fail("cos_cache: required when do_rotary = 1 (with sin_cache)");
  const int64_t h = p->head_size;
  if (h % 16 != 0)
    return fail("head_size = " + str(h) + " must be a multiple of 16 when do_rotary = 1");
  const char* names[2] = {"cos_cache", "sin_cache"};
  const TensorView* caches[2] = {in.cos_cache, in.sin_cache};
  for (int i = 0; i < 2; ++i) {
    const TensorView& c = *caches[i];
    ATTNKIT_RETURN_IF_ERROR(expect_rank(c, names[i], 2));
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(c, names[i], p->dtype, " like query"));
  }
  const TensorView& cos = *in.cos_cache;
  if (in.sin_cache->shape != cos.shape)
    return fail("sin_cache: shape " + shape_to_string(in.sin_cache->shape) +
                " must equal cos_cache shape " + shape_to_string(cos.shape));
  if (cos.shape[0] < p->total)
    return fail("cos_cache: dim 0 = " + str(cos.shape[0]) + " must be >= total_sequence_length " +
                str(p->total));
  const int64_t half = cos.shape[1];
  if (half <= 0 || half % 8 != 0 || half > (h / 16) * 8)
    return fail("cos_cache: dim 1 = " + str(half) +
                " must be a positive multiple of 8 and at most head_size / 2 = " + str(h / 2));
  p->rotary_dim = 2 * half;
  p->rotary_max_pos = cos.shape[0];

  const int64_t bsz = p->batch, s = p->seq;
  p->positions.assign(bsz * s, 0);
  const int64_t* ids = in.position_ids ? in.position_ids->as<int64_t>() : nullptr;
  for (int64_t b = 0; b < bsz; ++b) {
    for (int64_t i = 0; i < s; ++i) {
      int64_t pos;
      std::string source;
      if (ids && p->first_prompt) {
        // ORT reads only position_ids[0][0] on the first prompt and offsets it by the token index.
        // Checked before adding so a huge id cannot overflow.
        const bool base_ok = ids[0] >= 0 && ids[0] < p->rotary_max_pos;
        pos = base_ok ? ids[0] + i : ids[0];
        source = base_ok ? "position_ids[0][0] + " + str(i) : std::string("position_ids[0][0]");
      } else if (ids) {
        // ORT indexes the flat buffer with a row stride of sequence_length.
        pos = ids[b * s + i];
        source = "position_ids[" + str(b) + "][" + str(i) + "]";
      } else {
        pos = p->first_prompt ? i : p->total_len[b] - s + i;
        source = "rotary position of batch " + str(b) + " token " + str(i);
      }
      if (pos < 0 || pos >= p->rotary_max_pos)
        return fail(source + " = " + str(pos) + " is out of range [0, " + str(p->rotary_max_pos) +
                    ") of cos_cache dim 0");
      p->positions[b * s + i] = pos;
    }
  }
  return Status::Ok();
}

Status check_bias_and_sink(const GqaInputs& in, const GqaAttributes& a, GqaProblem* p) {
  p->bias_batch = p->bias_heads = 0;
  if (in.attention_bias) {
    const TensorView& bias = *in.attention_bias;
    ATTNKIT_RETURN_IF_ERROR(expect_rank(bias, "attention_bias", 4));
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(bias, "attention_bias", p->dtype, " like query"));
    if (bias.shape[0] != 1 && bias.shape[0] != p->batch)
      return fail("attention_bias: dim 0 must be 1 or batch_size " + str(p->batch) + ", got " +
                  str(bias.shape[0]));
    if (bias.shape[1] != 1 && bias.shape[1] != p->heads)
      return fail("attention_bias: dim 1 must be 1 or num_heads " + str(p->heads) + ", got " +
                  str(bias.shape[1]));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(bias, "attention_bias", 2, p->seq, "sequence_length"));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(bias, "attention_bias", 3, p->total, "total_sequence_length"));
    p->bias_batch = bias.shape[0];
    p->bias_heads = bias.shape[1];
  }
  if (in.head_sink) {
    const TensorView& sink = *in.head_sink;
    ATTNKIT_RETURN_IF_ERROR(expect_rank(sink, "head_sink", 1));
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(sink, "head_sink", p->dtype, " like query"));
    ATTNKIT_RETURN_IF_ERROR(expect_dim(sink, "head_sink", 0, p->heads, "num_heads"));
  }
  // With both, the sink is head_sink's (smooth_softmax's is 0), as ORT 1.31 runs it (spec §2.1).
  p->use_sink = a.smooth_softmax == 1 || in.head_sink != nullptr;
  return Status::Ok();
}

// q_norm_weight / k_norm_weight (the RMSNorm prologue of Qwen3- and Gemma 3-style layers): ORT's CPU EP refuses
// them; its WebGPU EP runs them under these rules, with the same messages, which attnkit keeps.
Status check_qk_norm(const GqaInputs& in, const GqaAttributes& a, GqaProblem* p) {
  if (!in.q_norm_weight && !in.k_norm_weight) return Status::Ok();
  if (!in.q_norm_weight || !in.k_norm_weight)
    return fail("q_norm_weight and k_norm_weight must be provided together");
  if (!p->rotary) return fail("q_norm_weight / k_norm_weight require do_rotary=1");
  if (p->packed_qkv) return fail("q_norm_weight / k_norm_weight are not supported when QKV is packed");
  const std::pair<const TensorView*, const char*> weights[] = {{in.q_norm_weight, "q_norm_weight"},
                                                                 {in.k_norm_weight, "k_norm_weight"}};
  for (const auto& [view, name] : weights) {
    ATTNKIT_RETURN_IF_ERROR(expect_dtype(*view, name, p->dtype, " like query"));
    if (view->shape.size() != 1 || view->shape[0] != p->head_size)
      return fail(std::string(name) + ": must be a 1-D tensor of shape [head_size=" + str(p->head_size) +
                  "], got " + shape_to_string(view->shape));
  }
  // ORT's WebGPU EP takes any epsilon; a negative one turns rows into NaN, so it is refused here.
  if (!(a.qk_norm_epsilon >= 0.0f) || std::isinf(a.qk_norm_epsilon))
    return fail("qk_norm_epsilon = " + std::to_string(a.qk_norm_epsilon) + " must be finite and >= 0");
  p->qk_norm = true;
  p->qk_norm_epsilon = a.qk_norm_epsilon;
  return Status::Ok();
}

// Output and internal-cache byte counts, refused before anything is allocated.
Status check_sizes(const GqaProblem& p) {
  const int64_t elem = static_cast<int64_t>(dtype_size(p.dtype));
  ATTNKIT_RETURN_IF_ERROR(check_byte_limit(
      "output", checked_product({p.batch, p.seq, p.heads, p.head_size, elem})));
  // The cache is materialised whether or not present_* is requested (attention reads from it).
  const int64_t cache = checked_product({p.batch, p.kv_heads, p.present_len, p.cache_row_bytes});
  ATTNKIT_RETURN_IF_ERROR(check_byte_limit("present_key", cache));
  if (p.request.output_qk)
    ATTNKIT_RETURN_IF_ERROR(check_byte_limit(
        "output_qk", checked_product({p.batch, p.heads, p.seq, p.total, elem})));
  return Status::Ok();
}

}  // namespace

void window_step(GqaProblem* problem) {
  GqaProblem& p = *problem;
  if (!p.window_cache) return;
  const int64_t s = p.seq;
  // The first of a step's queries sees W - 1 keys before its own: the step can run in place when each entry's
  // final window still holds them (or every past row it has) and all of its new rows.
  p.window_staging = false;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t past_rows = p.window_rows(p.past_len[b]), kept = p.window_rows(p.total_len[b]) - s;
    if (kept < std::min(past_rows, p.window - 1)) p.window_staging = true;
  }
  int64_t rows = p.window_capacity;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t past_rows = p.window_rows(p.past_len[b]);
    const int64_t kept = p.window_staging ? past_rows : p.window_rows(p.total_len[b]) - s;
    p.past_src[b] = past_rows - kept;
    p.key_position[b] = p.past_len[b] - kept;
    p.past_len[b] = kept;
    p.total_len[b] = kept + s;
    p.causal_offset[b] = kept;
    rows = std::max(rows, kept + s);
  }
  p.present_len = rows;
}

Status validate_gqa(const GqaInputs& inputs, const GqaAttributes& attrs, const GqaRequest& request,
                    GqaProblem* problem) {
  GqaProblem& p = *problem;
  p = GqaProblem();
  p.inputs = &inputs;
  p.attrs = attrs;
  p.request = request;

  ATTNKIT_RETURN_IF_ERROR(check_attributes(attrs, request, &p));
  p.heads = attrs.num_heads;
  p.kv_heads = attrs.kv_num_heads;
  p.group = p.heads / p.kv_heads;

  if (!inputs.query) return fail("query: required input is missing");
  if (!inputs.seqlens_k) return fail("seqlens_k: required input is missing");
  if (!inputs.total_sequence_length) return fail("total_sequence_length: required input is missing");

  const std::pair<const TensorView*, const char*> all[] = {
      {inputs.query, "query"},         {inputs.key, "key"},
      {inputs.value, "value"},         {inputs.past_key, "past_key"},
      {inputs.past_value, "past_value"}, {inputs.seqlens_k, "seqlens_k"},
      {inputs.total_sequence_length, "total_sequence_length"},
      {inputs.cos_cache, "cos_cache"}, {inputs.sin_cache, "sin_cache"},
      {inputs.position_ids, "position_ids"}, {inputs.attention_bias, "attention_bias"},
      {inputs.head_sink, "head_sink"}, {inputs.k_scale, "k_scale"},
      {inputs.v_scale, "v_scale"},     {inputs.q_norm_weight, "q_norm_weight"},
      {inputs.k_norm_weight, "k_norm_weight"}};
  for (const auto& [view, name] : all) ATTNKIT_RETURN_IF_ERROR(check_tensor_storage(view, name));

  ATTNKIT_RETURN_IF_ERROR(check_qkv(inputs, &p));
  ATTNKIT_RETURN_IF_ERROR(check_cache(inputs, &p));
  ATTNKIT_RETURN_IF_ERROR(check_scales(inputs, p));
  p.window = attrs.local_window_size;
  p.window_capacity = p.past_capacity;
  ATTNKIT_RETURN_IF_ERROR(check_window_cache(p));
  ATTNKIT_RETURN_IF_ERROR(check_lengths_inputs(inputs, &p));
  ATTNKIT_RETURN_IF_ERROR(derive_lengths(inputs, &p));
  ATTNKIT_RETURN_IF_ERROR(check_sizes(p));
  ATTNKIT_RETURN_IF_ERROR(check_rotary(inputs, attrs, &p));
  ATTNKIT_RETURN_IF_ERROR(check_bias_and_sink(inputs, attrs, &p));
  ATTNKIT_RETURN_IF_ERROR(check_qk_norm(inputs, attrs, &p));

  p.alpha = attrs.scale != 0.0f ? attrs.scale : 1.0f / std::sqrt(static_cast<float>(p.head_size));
  p.causal = attrs.causal == 1;
  p.past_src.assign(p.batch, 0);
  p.key_position.assign(p.batch, 0);
  p.softcap = attrs.softcap;
  p.qk_output = static_cast<int>(attrs.qk_output);
  return Status::Ok();
}

}  // namespace attnkit
