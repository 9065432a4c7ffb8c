// attnkit: QAttention's work split and scratch sizes, shared by the driver and the schema functions so
// the peak reported before a call is the one the call allocates.
#pragma once
#include <cstddef>

#include "dispatch.h"
#include "qattention/problem.h"

namespace attnkit {

// Weight columns per projection task: fixed (not derived from the thread count) so the split, and
// with it every bit of the result, is the same for any number of threads.
constexpr size_t kQAttentionColumnBlock = 64;
// Query rows from which the keys are packed into panels before scoring (the pack pays off).
constexpr size_t kQAttentionPackedMinRows = 8;

struct QAttentionLayout {
  int threads = 1;
  size_t padded_head = 0;           // head_size rounded up to 8 (the qk/sv kernels' row granule)
  size_t column_block = 0;
  size_t gemm_workspace_bytes = 0;  // per worker
  size_t attention_floats = 0;      // per worker: Q, K, V, O rows and the S x T scores of one head
  size_t peak_scratch_bytes = 0;    // projection buffer + the larger per-phase worker scratch
};

QAttentionLayout qattention_layout(const QAttentionProblem& p, const KernelTable& kt, int threads);

}  // namespace attnkit
