// attnkit: QAttention validation — every rule of spec/ort-semantics.md §4.1/§4.2 and the ORT 1.30
// behaviour probed with onnxruntime-node (mask spellings, negative end positions, past without present).
// Each error is one line naming the input or attribute and the rule broken.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "common/half.h"
#include "common/tensor_storage.h"
#include "gemm_u8x8/gemm_u8x8.h"
#include "qattention/problem.h"

namespace attnkit {
namespace {

std::string dims(const TensorView& t) { return shape_to_string(t.shape); }

Status fail(const std::string& message) { return Status::Error(message); }

bool one_element(const TensorView& t) {
  return t.shape.empty() || (t.shape.size() == 1 && t.shape[0] == 1);
}

Status require_dtype(const char* name, const TensorView& t, DType want, const char* why) {
  if (t.dtype != want) {
    return fail(std::string(name) + ": must be " + dtype_name(want) + ", got " + dtype_name(t.dtype) +
                (why[0] ? std::string(" (") + why + ")" : std::string()));
  }
  return Status::Ok();
}

Status require_rank(const char* name, const TensorView& t, size_t rank, const char* what) {
  if (t.shape.size() != rank) {
    return fail(std::string(name) + ": must have rank " + std::to_string(rank) + " " + what + ", got shape " +
                dims(t));
  }
  for (int64_t d : t.shape) {
    if (d < 0) return fail(std::string(name) + ": negative dimension in shape " + dims(t));
  }
  return Status::Ok();
}

// Scalar / one element, or (3D) per column.
Status check_per_column(const char* name, const TensorView& t, int64_t columns, bool* per_column) {
  if (one_element(t)) {
    *per_column = false;
    return Status::Ok();
  }
  if (t.shape.size() == 1 && t.shape[0] == columns) {
    *per_column = true;
    return Status::Ok();
  }
  return fail(std::string(name) + ": must be a scalar, one element or (3 * hidden_size) = (" +
              std::to_string(columns) + ") per column, got shape " + dims(t));
}

// a * b * ... with overflow and the 16 GiB cap checked; `what` names the tensor in the error.
Status checked_bytes(std::initializer_list<int64_t> factors, int64_t elem_bytes, const std::string& what,
                     int64_t* bytes = nullptr) {
  int64_t n = elem_bytes;
  for (int64_t f : factors) {
    if (f != 0 && n > kQAttentionMaxBytes / f) {
      return fail(what + ": would need more than 16 GiB; the shapes are too large");
    }
    n *= f;
  }
  if (n > kQAttentionMaxBytes) return fail(what + ": would need more than 16 GiB; the shapes are too large");
  if (bytes) *bytes = n;
  return Status::Ok();
}

Status check_attributes(const QAttentionAttributes& a) {
  if (a.num_heads <= 0) return fail("num_heads: must be positive, got " + std::to_string(a.num_heads));
  if (a.unidirectional != 0 && a.unidirectional != 1) {
    return fail("unidirectional: must be 0 or 1, got " + std::to_string(a.unidirectional));
  }
  if (a.do_rotary != 0) {
    return fail("do_rotary: only 0 is supported (ORT's CPU QAttention ignores it, so no reference rotation "
                "exists to match), got " + std::to_string(a.do_rotary));
  }
  if (a.past_present_share_buffer != 0) {
    return fail("past_present_share_buffer: only 0 is supported (past and present are always distinct "
                "tensors here, so there is no shared buffer to name), got " +
                std::to_string(a.past_present_share_buffer));
  }
  if (std::isnan(a.scale)) return fail("scale: must not be NaN");
  if (std::isnan(a.mask_filter_value)) return fail("mask_filter_value: must not be NaN");
  return Status::Ok();
}

Status check_mask(const TensorView& m, QAttentionProblem* p) {
  ATTNKIT_RETURN_IF_ERROR(require_dtype("mask_index", m, DType::kInt32, ""));
  const int64_t B = p->batch, S = p->seq, T = p->total;
  const std::string bst = " (batch=" + std::to_string(B) + ", sequence=" + std::to_string(S) +
                          ", total_sequence_length=" + std::to_string(T) + ")";
  for (int64_t d : m.shape) {
    if (d < 0) return fail("mask_index: negative dimension in shape " + dims(m));
  }
  switch (m.shape.size()) {
    case 1: {
      if (m.shape[0] == B) {
        p->mask = QMaskKind::kEnd;
      } else if (m.shape[0] == 2 * B) {
        p->mask = QMaskKind::kEndStart;
      } else {
        return fail("mask_index: 1D mask must have batch_size (end positions) or 2 * batch_size (end, then "
                    "start positions) elements" + bst + ", got shape " + dims(m));
      }
      // End positions must be >= 0 (ORT rejects negatives); values beyond T mean "nothing masked".
      const int32_t* v = m.as<int32_t>();
      for (int64_t b = 0; b < B; ++b) {
        if (v[b] < 0) {
          return fail("mask_index: end position " + std::to_string(v[b]) + " at index " + std::to_string(b) +
                      " is negative; end positions must be >= 0");
        }
      }
      return Status::Ok();
    }
    case 2:
      // (B, T) first: where the total is 1 token, (B, 1) is that mask, and ORT applies it.
      if (m.shape[0] == B && m.shape[1] == T) {
        p->mask = QMaskKind::kKeys;
        return Status::Ok();
      }
      // Else ORT treats (B, 1) and (1, 1) as a placeholder and ignores its values.
      if (m.shape[1] == 1 && (m.shape[0] == B || m.shape[0] == 1)) {
        p->mask = QMaskKind::kNone;
        return Status::Ok();
      }
      return fail("mask_index: 2D mask must be (batch_size, total_sequence_length)" + bst + ", got shape " +
                  dims(m));
    case 3:
      if (m.shape[0] == B && m.shape[1] == S && m.shape[2] == T) {
        p->mask = QMaskKind::kQueryKeys;
        return Status::Ok();
      }
      return fail("mask_index: 3D mask must be (batch_size, sequence_length, total_sequence_length)" + bst +
                  ", got shape " + dims(m));
    case 4:
      return fail("mask_index: 4D (Megatron) masks are not supported by the QAttention CPU kernel, got shape " +
                  dims(m));
    default:
      return fail("mask_index: must be 1D (B) or (2B), 2D (B, T) or 3D (B, S, T), got shape " + dims(m));
  }
}

}  // namespace

int32_t QAttentionProblem::weight_zp(int64_t c) const {
  const TensorView* zp = inputs->weight_zero_point;
  if (!zp) return 0;
  const int64_t i = per_column_zp ? c : 0;
  return weight_signed ? int32_t(zp->as<int8_t>()[i]) : int32_t(zp->as<uint8_t>()[i]);
}

float QAttentionProblem::dequant_scale(int64_t c) const {
  const float* ws = inputs->weight_scale->as<float>();
  return input_scale * ws[per_column_scale ? c : 0];
}

bool QAttentionProblem::key_masked(int64_t b, int64_t i, int64_t j) const {
  const int32_t* m = mask == QMaskKind::kNone ? nullptr : inputs->mask_index->as<int32_t>();
  switch (mask) {
    case QMaskKind::kNone: return false;
    case QMaskKind::kEnd: return j >= std::min<int64_t>(m[b], total);
    case QMaskKind::kEndStart:
      return j >= std::min<int64_t>(m[b], total) || j < std::min<int64_t>(m[batch + b], total);
    case QMaskKind::kKeys: return m[b * total + j] <= 0;
    case QMaskKind::kQueryKeys: return m[(b * seq + i) * total + j] <= 0;
  }
  return false;
}

Status validate_qattention(const QAttentionInputs& in, const QAttentionAttributes& attrs,
                           const QAttentionRequest& request, QAttentionProblem* p, bool in_place,
                           int64_t past_length) {
  *p = QAttentionProblem();
  p->inputs = &in;
  p->attrs = attrs;
  p->request = request;
  p->in_place = in_place;
  if (in_place) p->request.present = true;
  ATTNKIT_RETURN_IF_ERROR(check_attributes(attrs));

  if (!in.input) return fail("input: required input is missing");
  if (!in.weight) return fail("weight: required input is missing");
  if (!in.bias) return fail("bias: required input is missing");
  if (!in.input_scale) return fail("input_scale: required input is missing");
  if (!in.weight_scale) return fail("weight_scale: required input is missing");
  const std::pair<const TensorView*, const char*> all[] = {
      {in.input, "input"}, {in.weight, "weight"}, {in.bias, "bias"}, {in.input_scale, "input_scale"},
      {in.weight_scale, "weight_scale"}, {in.mask_index, "mask_index"}, {in.input_zero_point, "input_zero_point"},
      {in.weight_zero_point, "weight_zero_point"}, {in.past, "past"}};
  for (const auto& [view, name] : all) ATTNKIT_RETURN_IF_ERROR(check_tensor_storage(view, name));

  const TensorView& x = *in.input;
  ATTNKIT_RETURN_IF_ERROR(require_dtype("input", x, DType::kUInt8, "the CPU kernel takes uint8 activations only"));
  ATTNKIT_RETURN_IF_ERROR(require_rank("input", x, 3, "(batch, sequence, input_hidden_size)"));
  p->batch = x.shape[0];
  p->seq = x.shape[1];
  p->input_hidden = x.shape[2];
  if (p->batch == 0 || p->seq == 0 || p->input_hidden == 0) {
    return fail("input: dimensions must be positive, got shape " + dims(x));
  }
  if (p->input_hidden > int64_t(kGemmU8X8MaxK)) {
    return fail("input: input_hidden_size " + std::to_string(p->input_hidden) + " exceeds " +
                std::to_string(kGemmU8X8MaxK) + ", beyond which the int32 projection can overflow");
  }

  const TensorView& w = *in.weight;
  if (w.dtype != DType::kInt8 && w.dtype != DType::kUInt8) {
    return fail(std::string("weight: must be int8 or uint8, got ") + dtype_name(w.dtype));
  }
  p->weight_signed = w.dtype == DType::kInt8;
  ATTNKIT_RETURN_IF_ERROR(require_rank("weight", w, 2, "(input_hidden_size, 3 * hidden_size)"));
  if (w.shape[0] != p->input_hidden) {
    return fail("weight: dim 0 must equal input_hidden_size " + std::to_string(p->input_hidden) + ", got shape " +
                dims(w));
  }
  if (w.shape[1] == 0 || w.shape[1] % 3 != 0) {
    return fail("weight: dim 1 must be 3 * hidden_size (a positive multiple of 3), got shape " + dims(w));
  }
  p->hidden = w.shape[1] / 3;
  p->heads = attrs.num_heads;
  if (p->hidden % p->heads != 0) {
    return fail("num_heads: hidden_size " + std::to_string(p->hidden) + " must be divisible by num_heads " +
                std::to_string(p->heads));
  }
  p->head_size = p->hidden / p->heads;
  const int64_t columns = 3 * p->hidden;

  const TensorView& bias = *in.bias;
  if (bias.dtype != DType::kFloat32 && bias.dtype != DType::kFloat16) {
    return fail(std::string("bias: must be float32 or float16, got ") + dtype_name(bias.dtype));
  }
  p->dtype = bias.dtype;
  if (p->dtype == DType::kFloat16 && in_place) {
    return fail("bias: float16 runs through the stateless q_attention only (in float32, as ORT's CPU EP runs it); "
                "the in-place form and QAttentionKvCache take float32");
  }
  if (bias.shape.size() != 1 || bias.shape[0] != columns) {
    return fail("bias: must be (3 * hidden_size) = (" + std::to_string(columns) + "), got shape " + dims(bias));
  }

  ATTNKIT_RETURN_IF_ERROR(require_dtype("input_scale", *in.input_scale, p->dtype, "like bias"));
  if (!one_element(*in.input_scale)) {
    return fail("input_scale: must be a scalar or one element, got shape " + dims(*in.input_scale));
  }
  p->input_scale = p->dtype == DType::kFloat16 ? f16_to_float(in.input_scale->as<uint16_t>()[0])
                                               : in.input_scale->as<float>()[0];

  ATTNKIT_RETURN_IF_ERROR(require_dtype("weight_scale", *in.weight_scale, p->dtype, "like bias"));
  ATTNKIT_RETURN_IF_ERROR(check_per_column("weight_scale", *in.weight_scale, columns, &p->per_column_scale));

  if (in.input_zero_point) {
    ATTNKIT_RETURN_IF_ERROR(require_dtype("input_zero_point", *in.input_zero_point, DType::kUInt8,
                                          "the dtype of input"));
    if (!one_element(*in.input_zero_point)) {
      return fail("input_zero_point: must be a scalar or one element, got shape " + dims(*in.input_zero_point));
    }
    p->input_zp = in.input_zero_point->as<uint8_t>()[0];
  }
  if (in.weight_zero_point) {
    ATTNKIT_RETURN_IF_ERROR(require_dtype("weight_zero_point", *in.weight_zero_point, w.dtype, "the dtype of weight"));
    ATTNKIT_RETURN_IF_ERROR(check_per_column("weight_zero_point", *in.weight_zero_point, columns, &p->per_column_zp));
  }

  if (in.past) {
    const TensorView& past = *in.past;
    ATTNKIT_RETURN_IF_ERROR(require_dtype("past", past, p->dtype, "like bias"));
    ATTNKIT_RETURN_IF_ERROR(require_rank("past", past, 5, "(2, batch, num_heads, past_sequence_length, head_size)"));
    if (past.shape[0] != 2 || past.shape[1] != p->batch || past.shape[2] != p->heads ||
        past.shape[4] != p->head_size) {
      return fail("past: must be (2, batch=" + std::to_string(p->batch) + ", num_heads=" + std::to_string(p->heads) +
                  ", past_sequence_length, head_size=" + std::to_string(p->head_size) + "), got shape " + dims(past));
    }
    p->past = past.shape[3];
    if (in_place) {
      const int64_t capacity = past.shape[3];
      p->past = past_length >= 0 ? past_length : capacity - p->seq;
      if (p->past < 0 || p->past > capacity - p->seq) {
        return fail("past: the in-place form needs room for the " + std::to_string(p->seq) + " new rows after each " +
                    "head's " + (past_length >= 0 ? std::to_string(past_length) + " " : "") +
                    "past rows (dim 3 >= past + sequence length), got shape " + dims(past));
      }
      p->present_rows = capacity;
    } else if (!request.present) {
      return fail("present: must be requested when past is given (ORT fails without it)");
    }
  } else if (in_place) {
    return fail("past: the in-place form needs the cache as past");
  }
  p->total = p->past + p->seq;
  if (!in_place) p->present_rows = p->total;

  // Every buffer the call allocates, checked before any allocation.
  ATTNKIT_RETURN_IF_ERROR(checked_bytes({p->batch, p->seq, columns}, 4, "projection"));
  ATTNKIT_RETURN_IF_ERROR(checked_bytes({p->batch, p->seq, p->hidden}, 4, "output"));
  ATTNKIT_RETURN_IF_ERROR(checked_bytes({2, p->batch, p->heads, p->total, p->head_size}, 4, "present"));
  ATTNKIT_RETURN_IF_ERROR(checked_bytes({p->seq, p->total}, 4, "attention scores"));
  ATTNKIT_RETURN_IF_ERROR(checked_bytes({p->total, p->head_size + 8}, 8, "key/value scratch"));

  if (in.mask_index) ATTNKIT_RETURN_IF_ERROR(check_mask(*in.mask_index, p));

  p->alpha = attrs.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(p->head_size)) : attrs.scale;
  p->causal = attrs.unidirectional == 1 && p->seq > 1;
  return Status::Ok();
}

}  // namespace attnkit
