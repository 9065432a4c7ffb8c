// attnkit reference: QAttention in plain double precision, the oracle for every QAttention test.
// Written straight from spec/ort-semantics.md §4 and the ORT 1.30 probes: exact int64 projection, then
// double arithmetic throughout, except where ORT's result depends on a float32 step (see the .cc).
#pragma once
#include <vector>

#include "attnkit/qattention.h"
#include "qattention/problem.h"

namespace attnkit {
namespace reference {

struct QAttentionReferenceResult {
  std::vector<double> output;  // (B, S, D)
  Shape output_shape;
  Tensor present;              // (2, B, N, P + S, H) in the call's dtype when requested, else empty
};

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionReferenceResult* result);

}  // namespace reference
}  // namespace attnkit
