// attnkit: com.microsoft.QAttention, the C++ API.
// Inputs, attributes and outputs carry ORT's names and layouts (shapes below): uint8
// activations, int8/uint8 weight, float32 everything else (or float16: bias, scales, past and outputs together,
// computed in float32 and rounded, as ORT's CPU EP runs it); results match ORT's CPU EP (1.30 and 1.31).
#pragma once
#include <cstddef>

#include "attnkit/run_options.h"
#include "attnkit/status.h"
#include "attnkit/tensor.h"

namespace attnkit {

struct QAttentionAttributes {
  int64_t num_heads = 0;                  // required, > 0, divides hidden_size
  int64_t unidirectional = 0;             // 1: causal (only when the query has more than one token)
  int64_t do_rotary = 0;                  // only 0: no reference definition of the rotation exists
  int64_t past_present_share_buffer = 0;  // only 0: past and present are always distinct tensors
  float mask_filter_value = -10000.0f;    // added to the score of a masked key
  float scale = 0.0f;                     // 0: 1/sqrt(head_size)
};

// Absent optional inputs are nullptr. The views must stay valid for the call; one may view a tensor of the call's
// own outputs (a decode loop passing the last present as the past), and the call then fills fresh tensors.
struct QAttentionInputs {
  const TensorView* input = nullptr;              // (B, S, D_i) uint8
  const TensorView* weight = nullptr;             // (D_i, 3D) int8 | uint8
  const TensorView* bias = nullptr;               // (3D) float32, or float16 (then so are the scales and past)
  const TensorView* input_scale = nullptr;        // scalar or [1] float32
  const TensorView* weight_scale = nullptr;       // scalar, [1] or (3D) float32
  const TensorView* mask_index = nullptr;         // int32: (B), (2B), (B, T), (B, S, T), (B, 1) / (1, 1) ignored
  const TensorView* input_zero_point = nullptr;   // scalar or [1] uint8
  const TensorView* weight_zero_point = nullptr;  // scalar, [1] or (3D), weight dtype
  const TensorView* past = nullptr;               // (2, B, N, P, H) float32
};

// Which optional outputs to produce. `output` is always produced; present is required with past.
struct QAttentionRequest {
  bool present = false;
};

struct QAttentionOutputs {
  Tensor output;   // (B, S, D) float32 (float16 for a float16 call)
  Tensor present;  // (2, B, N, P + S, H) like output, keys first
};

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionOutputs* outputs,
                   const RunOptions& options = RunOptions());

// The same op with present written over past: inputs.past is (2, B, N, C, H), each head's P past rows
// first, and its memory must be writable; the op writes the S new rows after them, so the past is neither
// read twice nor copied (a stateless wasm call uses it to skip one copy of the whole cache). past is
// required; request.present is ignored and outputs->present is left empty (the present is that buffer; where
// outputs->present is that buffer, it is left as it is).
// past_length is P; C may hold more rows than P + S, so one buffer of a model's context serves every
// decode step (P grows by S each call). past_length < 0: P = C - S.
Status q_attention_in_place(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                            QAttentionOutputs* outputs, const RunOptions& options = RunOptions(),
                            int64_t past_length = -1);

}  // namespace attnkit
