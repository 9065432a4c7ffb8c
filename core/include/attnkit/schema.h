// attnkit: GroupQueryAttention shape inference and peak memory, as the light schema (seed 003) lists
// them. Both run the full validation, so a shape they return is one the op will produce, and an
// invalid call fails here with the op's own message.
#pragma once
#include <cstddef>

#include "attnkit/gqa.h"
#include "attnkit/qattention.h"
#include "attnkit/run_options.h"

namespace attnkit {

struct GqaOutputInfo {
  bool produced = false;  // false: not requested (the shape is still filled in for reference)
  DType dtype = DType::kFloat32;
  Shape shape;
};

struct GqaOutputShapes {
  GqaOutputInfo output;         // (B, S, N*H), dtype of query
  GqaOutputInfo present_key;    // (B, Nk, max(T, past), H | ceil(H/2)), cache dtype
  GqaOutputInfo present_value;
  GqaOutputInfo output_qk;      // (B, N, S, T), dtype of query; produced only with qk_output != 0
};

// The inputs must carry their data: seqlens_k, total_sequence_length and position_ids are read.
Status gqa_output_shapes(const GqaInputs& inputs, const GqaAttributes& attrs, const GqaRequest& request,
                         GqaOutputShapes* shapes);

// Scratch bytes group_query_attention will allocate for this call (outputs excluded; a present cache
// built internally because it was not requested is included). threads = 0 means the pool's default; the flash
// blocks are the planner's (RunOptions::flash_block_keys = 0).
Status gqa_peak_scratch_bytes(const GqaInputs& inputs, const GqaAttributes& attrs,
                              const GqaRequest& request, AttentionPath path, int threads, size_t* bytes);

// ---- QAttention (same contract: full validation first, so errors carry the op's own message) ----

struct QAttentionOutputShapes {
  GqaOutputInfo output;   // (B, S, D) float32
  GqaOutputInfo present;  // (2, B, N, P + S, H) float32; produced only when requested
};

// The inputs must carry their data: mask_index end positions are checked.
Status qattention_output_shapes(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                                const QAttentionRequest& request, QAttentionOutputShapes* shapes);

// Scratch bytes q_attention will allocate for this call (outputs excluded). threads = 0 means the
// pool's default. The value is computed by the same function the op uses to size its buffers.
Status qattention_peak_scratch_bytes(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                                     const QAttentionRequest& request, int threads, size_t* bytes);

}  // namespace attnkit
