// attnkit: QAttention's work split and scratch sizes, shared by the driver and the schema functions so
// the peak reported before a call is the one the call allocates.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dispatch.h"
#include "qattention/problem.h"

namespace attnkit {

// Weight columns per projection task: fixed (not derived from the thread count), so the split never
// depends on it; a multiple of every packed variant's column granule (16 or 64).
constexpr size_t kQAttentionColumnBlock = 64;
// Input rows up to which the projection calls the one-shot gemm instead of packing the weight: each variant
// streams it unpacked for so few rows (kGemmDirectMaxRows), a range of its rows per task.
constexpr size_t kQAttentionDirectMaxRows = kGemmDirectMaxRows;
constexpr size_t kQAttentionMinRangeRows = 64;
// Query rows from which the keys are packed into panels before scoring (the pack pays off).
constexpr size_t kQAttentionPackedMinRows = 8;
// Query rows per attention task without past: a 96 x T score block stays in L2, prefill yields heads x S/96
// tasks instead of one per head, and 96 rows split into whole 12-row kernel tiles. Each row is scored and
// normalized on its own, so the blocking changes no bits.
constexpr size_t kQAttentionQueryBlock = 96;
// Keys per block of the probabilities-by-V product, whose block sums then join the output rows (qattention.cc).
constexpr int64_t kQAttentionSumKeys = 512;

// The large sizes are 64-bit on wasm32 too: the call checks peak_scratch_bytes against size_t before it allocates,
// so every size it takes from them then fits.
struct QAttentionLayout {
  int threads = 1;
  size_t padded_head = 0;           // head_size rounded up to 8 (the qk/sv kernels' row granule)
  size_t column_block = 0;
  bool packed_gemm = false;         // the variant has a packed form: A packed once, B by each column block's task
  uint64_t packed_b_offset = 0;      // packed form: where the workers' B strips start in the gemm buffer (A first)
  uint64_t packed_b_stride = 0;      // packed form: bytes of one worker's packed column block
  uint64_t gemm_workspace_bytes = 0;  // packed form: the whole buffer; column blocks: per worker
  bool head_tasks = false;          // one task per head: its projection columns, then its attention
  size_t row_ranges = 0;            // a few input rows: the weight's rows split into this many tasks, else 0
  size_t query_block = 0;           // query rows per attention task
  uint64_t attention_floats = 0;     // per worker: Q, K, V, O and block-sum rows, query_block x T scores, K panels
  uint64_t shared_panel_floats = 0;  // K panels packed once for all of a head's row blocks, then its V rows; or 0
  uint64_t peak_scratch_bytes = 0;   // projection buffer + the larger per-phase scratch (head tasks: the sum)
};

QAttentionLayout qattention_layout(const QAttentionProblem& p, const KernelTable& kt, int threads);

// A float16 call's float32 copies of bias, scales and past, and its float32 outputs before rounding; 0 for float32.
uint64_t qattention_float16_staging_bytes(const QAttentionProblem& p);

}  // namespace attnkit
