// attnkit: QAttention shape inference and peak scratch memory (attnkit/schema.h). Both validate first and
// size from the same QAttentionLayout the driver allocates with, so they cannot drift from the op.
#include "attnkit/schema.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/thread_pool.h"
#include "dispatch.h"
#include "qattention/problem.h"
#include "qattention/scratch.h"

namespace attnkit {

Status qattention_output_shapes(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                                const QAttentionRequest& request, QAttentionOutputShapes* shapes) {
  if (!shapes) return Status::Error("shapes must not be null");
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  shapes->output = {true, p.dtype, {p.batch, p.seq, p.hidden}};
  shapes->present = {request.present, p.dtype, {2, p.batch, p.heads, p.total, p.head_size}};
  return Status::Ok();
}

Status qattention_peak_scratch_bytes(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                                     const QAttentionRequest& request, int threads, size_t* bytes) {
  if (!bytes) return Status::Error("bytes must not be null");
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  if (threads < 0) return Status::Error("threads = " + std::to_string(threads) + " must be >= 0");
  const uint64_t need = qattention_layout(p, kernel_table(), resolve_threads(threads)).peak_scratch_bytes;
  *bytes = static_cast<size_t>(std::min<uint64_t>(need, std::numeric_limits<size_t>::max()));  // SIZE_MAX: too much
  return Status::Ok();
}

}  // namespace attnkit
