// attnkit: GroupQueryAttention shape inference and peak scratch memory (attnkit/schema.h).
// Shapes come from the validated GqaProblem; scratch bytes from the driver's own tiling plan, so the
// number reported is the number the driver allocates.
#include "attnkit/schema.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/thread_pool.h"
#include "gqa/driver.h"
#include "gqa/problem.h"

namespace attnkit {

Status gqa_output_shapes(const GqaInputs& inputs, const GqaAttributes& attrs, const GqaRequest& request,
                         GqaOutputShapes* shapes) {
  if (!shapes) return Status::Error("shapes must not be null");
  GqaProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_gqa(inputs, attrs, request, &p));
  const int64_t cache_last = p.bits == 4 ? (p.head_size + 1) / 2 : p.head_size;
  shapes->output = {true, p.dtype, {p.batch, p.seq, p.heads * p.head_size}};
  const Shape present{p.batch, p.kv_heads, p.present_len, cache_last};
  shapes->present_key = {request.present_key, p.cache_dtype, present};
  shapes->present_value = {request.present_value, p.cache_dtype, present};
  shapes->output_qk = {request.output_qk, p.dtype, {p.batch, p.heads, p.seq, p.total}};
  return Status::Ok();
}

Status gqa_peak_scratch_bytes(const GqaInputs& inputs, const GqaAttributes& attrs,
                              const GqaRequest& request, AttentionPath path, int threads, size_t* bytes) {
  if (!bytes) return Status::Error("bytes must not be null");
  GqaProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_gqa(inputs, attrs, request, &p));
  if (threads < 0) return Status::Error("threads = " + std::to_string(threads) + " must be >= 0");
  window_step(&p);
  const GqaTiling tiling = plan_gqa(p, gqa_uses_flash(p, path));
  const uint64_t need = gqa_scratch_bytes(p, tiling, resolve_threads(threads));  // SIZE_MAX: more than can be had
  *bytes = static_cast<size_t>(std::min<uint64_t>(need, std::numeric_limits<size_t>::max()));
  return Status::Ok();
}

}  // namespace attnkit
