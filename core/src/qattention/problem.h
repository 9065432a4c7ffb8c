// attnkit: QAttention after validation — every size and mask rule derived once.
// validate_qattention() is the only place that reads shapes and attribute rules; the driver, the
// reference oracle and the schema functions all start from a QAttentionProblem, so they cannot
// disagree on semantics (spec/ort-semantics.md §4, probed on ORT 1.30).
#pragma once
#include <cstddef>
#include <cstdint>

#include "attnkit/qattention.h"

namespace attnkit {

enum class QMaskKind {
  kNone,        // absent, or the ignored (B, 1) / (1, 1) spelling
  kEnd,         // (B): keys j >= min(mask[b], T) masked
  kEndStart,    // (2B): also keys j < min(mask[B + b], T) masked
  kKeys,        // (B, T): mask[b, j] <= 0 masked
  kQueryKeys,   // (B, S, T): mask[b, i, j] <= 0 masked
};

struct QAttentionProblem {
  const QAttentionInputs* inputs = nullptr;
  QAttentionAttributes attrs;
  QAttentionRequest request;

  int64_t batch = 0;         // B
  int64_t seq = 0;           // S
  int64_t input_hidden = 0;  // D_i, the projection's reduction length (>= D for pruned models)
  int64_t hidden = 0;        // D = weight dim 1 / 3
  int64_t heads = 0;         // N
  int64_t head_size = 0;     // H = D / N
  int64_t past = 0;          // P (0 without past)
  int64_t total = 0;         // T = P + S
  DType dtype = DType::kFloat32;  // bias, scales, past and the outputs: float32, or float16 (run through float32)
  bool in_place = false;     // q_attention_in_place: past is (2, B, N, C, H), C >= T, and is the present
  int64_t present_rows = 0;  // rows per head in present: T, or in place the past buffer's C

  bool weight_signed = false;     // int8 weight (else uint8)
  bool per_column_scale = false;  // weight_scale has 3D values
  bool per_column_zp = false;     // weight_zero_point has 3D values
  int32_t input_zp = 0;           // 0 when input_zero_point is absent
  float input_scale = 0.0f;

  float alpha = 0.0f;            // score scale: attrs.scale, or 1/sqrt(H) when it is 0 (float, like ORT)
  bool causal = false;           // unidirectional && S > 1
  QMaskKind mask = QMaskKind::kNone;

  // Zero point of weight column c (0 when absent) and dequantization scale input_scale * weight_scale[c]
  // computed in float, as ORT does.
  int32_t weight_zp(int64_t c) const;
  float dequant_scale(int64_t c) const;

  // Whether the padding mask hides key j from query i of batch entry b (causal excluded).
  bool key_masked(int64_t b, int64_t i, int64_t j) const;
};

// A float16 call's inputs with bias, scales and past widened to float32 copies (the rest viewed as given): ORT's
// CPU EP runs float16 QAttention so, through its float32 kernel between casts. Neither copyable nor movable, since
// `inputs` points into it.
class QAttentionFloat32Inputs {
 public:
  explicit QAttentionFloat32Inputs(const QAttentionInputs& half);
  QAttentionFloat32Inputs(const QAttentionFloat32Inputs&) = delete;
  QAttentionFloat32Inputs& operator=(const QAttentionFloat32Inputs&) = delete;

  QAttentionInputs inputs;

 private:
  Tensor bias_, input_scale_, weight_scale_, past_;
  TensorView views_[4];
};

// A float32 result rounded to float16, nearest even.
Tensor rounded_to_float16(const Tensor& wide);

// Checks every shape, dtype, attribute and data-dependent rule and derives the problem. Errors name
// the input or attribute and the rule. Never reads out of bounds; rejects sizes that would overflow or
// need more than kQAttentionMaxBytes for one tensor.
// in_place: q_attention_in_place's form, whose past has room for the new rows after each head's P = past_length
// rows (dim 3 >= P + S; past_length < 0: P = dim 3 - S).
Status validate_qattention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                           const QAttentionRequest& request, QAttentionProblem* problem, bool in_place = false,
                           int64_t past_length = -1);

constexpr int64_t kQAttentionMaxBytes = int64_t(16) << 30;

}  // namespace attnkit
