// attnkit: com.microsoft.GroupQueryAttention, the C++ API.
// Inputs, attributes and outputs carry ORT's names and layouts (below), so a model's tensors can be passed
// through unchanged; results match ORT's CPU EP (1.30 and 1.31).
#pragma once
#include <string>

#include "attnkit/run_options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

struct GqaAttributes {
  int64_t num_heads = 0;            // required, > 0
  int64_t kv_num_heads = 0;         // required, > 0, divides num_heads
  float scale = 0.0f;               // 0: 1/sqrt(head_size)
  float softcap = 0.0f;             // <= 0: off (as ORT); finite
  int64_t local_window_size = -1;   // -1: off; W keys including the current one
  int64_t do_rotary = 0;
  int64_t rotary_interleaved = 0;
  int64_t smooth_softmax = 0;       // only 1 enables it (the schema default -1 means off)
  int64_t qk_output = 0;            // 0 none, 1 before softmax, 2 after softmax
  int64_t causal = 1;
  std::string k_quant_type = "NONE";  // NONE | PER_TENSOR | PER_CHANNEL
  std::string v_quant_type = "NONE";
  int64_t kv_cache_bit_width = 0;     // 0 unquantized; 8 (int8 cache) or 4 (uint8, packed nibbles)
  int64_t sliding_window_cache = 0;
  float qk_norm_epsilon = 1e-6f;    // >= 0; with q/k_norm_weight
};

// Absent optional inputs are nullptr. The views must stay valid for the call; one may view a tensor of the call's
// own outputs (a decode loop passing the last present as the past), and the call then fills fresh tensors.
// Shapes (B batch, S new tokens, N num_heads, Nk kv_num_heads, H head size, P past rows, T total_sequence_length);
// float inputs take query's dtype unless said otherwise.
struct GqaInputs {
  const TensorView* query = nullptr;   // (B, S, N*H); packed QKV, with key and value absent: (B, S, (N + 2 Nk) * H)
  const TensorView* key = nullptr;     // (B, S, Nk*H), or (B, 0, Nk*H) to attend over the past alone
  const TensorView* value = nullptr;   // (B, S, Nk*H)
  // (B, Nk, P, H): query's dtype (or float16/bfloat16 under float32 query); int8 for an 8-bit quantized cache;
  // uint8 (B, Nk, P, ceil(H/2)) for a 4-bit one, two nibbles a byte
  const TensorView* past_key = nullptr;
  const TensorView* past_value = nullptr;             // as past_key
  const TensorView* seqlens_k = nullptr;              // int32, B elements: each batch's token count minus 1
  const TensorView* total_sequence_length = nullptr;  // int32, one element: the largest token count of the batch
  const TensorView* cos_cache = nullptr;       // (>= T positions, rotary dim / 2: a multiple of 8, <= H/2), do_rotary
  const TensorView* sin_cache = nullptr;       // as cos_cache
  const TensorView* position_ids = nullptr;    // int64 (B, >= S): the new tokens' rotary positions
  const TensorView* attention_bias = nullptr;  // (1 or B, 1 or N, S, T): added to the scores
  const TensorView* head_sink = nullptr;       // (N): per head, one more score whose value is zero
  const TensorView* k_scale = nullptr;  // float32, 1 element (PER_TENSOR) or Nk*H (PER_CHANNEL), of any shape
  const TensorView* v_scale = nullptr;  // as k_scale
  // (H) each, dtype of query, given together with do_rotary = 1 and separate key/value: every new query and key
  // head row x becomes x / sqrt(mean(x^2) + qk_norm_epsilon) * weight before rotary, as ORT's WebGPU EP computes
  // (its CPU EP refuses these inputs).
  const TensorView* q_norm_weight = nullptr;
  const TensorView* k_norm_weight = nullptr;
};

// Which optional outputs to produce. `output` is always produced.
struct GqaRequest {
  bool present_key = true;
  bool present_value = true;
  bool output_qk = false;   // requires qk_output != 0
};

struct GqaOutputs {
  Tensor output;         // (B, S, N*H), dtype of query
  Tensor present_key;    // (B, Nk, max(T, past), H | ceil(H/2)), cache dtype
  Tensor present_value;
  Tensor output_qk;      // (B, N, S, T), dtype of query; columns >= T_b hold 0
};

Status group_query_attention(const GqaInputs& inputs, const GqaAttributes& attrs,
                             const GqaRequest& request, GqaOutputs* outputs,
                             const RunOptions& options = RunOptions());

// The shared-buffer form (ORT's past_present_share_buffer): inputs.past_key/past_value are the cache
// AND the present, so their memory must be writable; new rows are written at [P_b, P_b + L) and nothing
// else is read or copied, so a decode step touches the cache once. total_sequence_length must not
// exceed the cache's dim 2. request.present_* are ignored; outputs->present_* are left empty (or as they are where
// one of them is the cache itself). The two caches must not overlap.
Status group_query_attention_in_place(const GqaInputs& inputs, const GqaAttributes& attrs,
                                      const GqaRequest& request, GqaOutputs* outputs,
                                      const RunOptions& options = RunOptions());

}  // namespace attnkit
