// attnkit: GroupQueryAttention after validation — every size, phase and per-batch length derived once.
// validate_gqa() is the only place that reads shapes and attribute rules; the driver, the reference
// oracle and the schema functions all start from a GqaProblem, so they cannot disagree on semantics.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "attnkit/gqa.h"

namespace attnkit {

enum class KvQuant { kNone, kPerTensor, kPerChannel };

struct GqaProblem {
  const GqaInputs* inputs = nullptr;
  GqaAttributes attrs;
  GqaRequest request;

  int64_t batch = 0;          // B
  int64_t seq = 0;            // S, new query tokens
  int64_t kv_seq = 0;         // L, new key/value tokens (S, or 0 for shared KV)
  int64_t heads = 0;          // N
  int64_t kv_heads = 0;       // Nk
  int64_t group = 0;          // N / Nk; query head h reads kv head h / group
  int64_t head_size = 0;      // H
  int64_t total = 0;          // total_sequence_length (max over batch of T_b)
  int64_t past_capacity = 0;  // M, dim 2 of past_key (0 without past)
  int64_t present_len = 0;    // Mp = max(total, M)

  bool packed_qkv = false;    // key/value absent: query holds [Q | K | V] per token
  bool has_past = false;
  bool first_prompt = false;  // S == total: past contents ignored
  bool shared_kv = false;     // L == 0: keys come entirely from past

  DType dtype = DType::kFloat32;        // T: query, key, value, output, cos/sin, bias, sink
  DType cache_dtype = DType::kFloat32;  // present/past element type (uint8 = packed int4)
  KvQuant quant = KvQuant::kNone;
  int bits = 0;                         // 0, 8 or 4
  int64_t cache_row_bytes = 0;          // bytes of one (b, kv head, position) row in the cache

  float alpha = 0.0f;          // score scale: attrs.scale or 1/sqrt(H), as float like ORT
  bool causal = true;
  int64_t window = -1;         // local_window_size (W keys including the current one), -1 off
  float softcap = 0.0f;        // > 0: on
  bool use_sink = false;       // smooth_softmax == 1 or head_sink given
  int qk_output = 0;

  bool rotary = false;
  bool rotary_interleaved = false;
  int64_t rotary_dim = 0;      // R = 2 * cos_cache dim 1
  int64_t rotary_max_pos = 0;  // cos_cache dim 0
  bool qk_norm = false;        // q/k_norm_weight: each new query and key head row is RMS-normalized before rotary
  float qk_norm_epsilon = 0.0f;
  std::vector<float> q_norm_weight, k_norm_weight;  // as fp32, filled by the op before it runs (qk_norm only)

  int64_t bias_batch = 0;      // attention_bias dim 0 (1 or B), 0 when absent
  int64_t bias_heads = 0;      // attention_bias dim 1 (1 or N)

  // sliding_window_cache = 1 (§2.9): past and present hold at most window_capacity rows, an entry's latest
  // window_rows(T_b) tokens in order. Validation leaves the per-batch lengths below in absolute positions;
  // window_step() then turns them into the rows one step attends over.
  bool window_cache = false;
  int64_t window_capacity = 0;  // C = past_key dim 2
  bool window_staging = false;  // set by window_step: the step attends over a staging cache of present_len rows

  // Set by GqaKvCache, which checks what it stores: the past rows [0, P_b) hold no fp16 inf or NaN, so the kernels'
  // finite forms (QkGemmKernels::f16_finite) may read them.
  bool past_f16_finite = false;

  // Per batch entry b:
  std::vector<int64_t> total_len;      // T_b = seqlens_k[b] + 1: keys [0, T_b) are valid
  std::vector<int64_t> past_len;       // P_b: rows copied from past; new rows written at [P_b, P_b + L)
  std::vector<int64_t> causal_offset;  // query i sees keys j < min(causal_offset + i + 1, T_b)
  std::vector<int64_t> positions;      // rotary position of (b, s), B*S entries (rotary only)
  std::vector<int64_t> past_src;       // first past row copied to present row 0 (window cache; else 0)
  std::vector<int64_t> key_position;   // absolute position of present row 0: attention_bias column of key 0

  // Visible key range [lo, hi) for query row i of entry b (causal, window, causal=0).
  void visible_keys(int64_t b, int64_t i, int64_t* lo, int64_t* hi) const {
    int64_t tb = total_len[b];
    int64_t end = causal ? std::min<int64_t>(causal_offset[b] + i + 1, tb) : tb;
    int64_t start = (window >= 0 && end > window) ? end - window : 0;
    *lo = start;
    *hi = end;
  }

  int64_t window_rows(int64_t t) const;
};

// Rows a window cache of `capacity` rows and window W holds after `tokens` tokens: all of them up to the capacity;
// past it, the oldest capacity - W + 1 rows are evicted at once, which leaves W - 1 rows and the new token's, so a
// decoding step moves rows only every capacity - W + 1 tokens.
inline int64_t window_cache_rows(int64_t tokens, int64_t capacity, int64_t window) {
  const int64_t evict = capacity - window + 1;
  return tokens <= capacity ? tokens : tokens - evict * ((tokens - capacity + evict - 1) / evict);
}

inline int64_t GqaProblem::window_rows(int64_t t) const { return window_cache_rows(t, window_capacity, window); }

// Checks every shape, dtype, attribute and data-dependent rule (spec §2.1, §8) and derives the
// problem. Errors name the input or attribute and the rule. Never reads out of bounds.
Status validate_gqa(const GqaInputs& inputs, const GqaAttributes& attrs, const GqaRequest& request,
                    GqaProblem* problem);

// For a window cache, rewrites the absolute lengths into one step's cache rows (no-op otherwise). Where every
// entry's queries see only the past rows its final window keeps (decoding, short chunks), each keeps the last
// window_rows(T_b) - S of them and the step runs in the C-row buffer itself. Otherwise (window_staging) it keeps
// all window_rows(P_b) past rows in a staging cache of present_len rows, whose last window_rows(T_b) rows the
// caller then copies to rows [0, window_rows(T_b)). T_b and P_b are the step's absolute lengths.
void window_step(GqaProblem* problem);

// group_query_attention_in_place for GqaKvCache, which checks what it stores and says whether its past rows are
// free of fp16 inf and NaN (past_f16_finite: the kernels may then read them in their finite forms).
Status gqa_kv_cache_step(const GqaInputs& inputs, const GqaAttributes& attrs, GqaOutputs* outputs,
                         const RunOptions& options, bool past_f16_finite);

}  // namespace attnkit
