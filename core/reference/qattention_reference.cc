// attnkit reference: QAttention, double precision, no tiling, no kernels.
// Two float32 steps are kept because ORT's observable result depends on them (probed on 1.30):
//  - the dequantization scale is input_scale * weight_scale[c] computed in float;
//  - a padding-masked score is fl32(fl32(score) + mask_filter_value): ORT adds the mask inside its fp32
//    GEMM, so a fully masked row's logits are rounded to ~1e-3 steps and its softmax differs from the
//    unmasked one by up to ~1e-4; modelling it keeps the reference within 1e-6 of ORT there too.
// The causal exclusion is the value -FLT_MAX (overwriting, not adding), as in ORT's PrepareMask. float16 runs
// through float32, as ORT's CPU EP runs it.
#include "qattention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnkit {
namespace reference {

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionReferenceResult* result) {
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  if (p.dtype == DType::kFloat16) {  // float32 between casts, as ORT's CPU EP runs it; present rounded to float16
    QAttentionFloat32Inputs wide(inputs);
    ATTNKIT_RETURN_IF_ERROR(q_attention(wide.inputs, attrs, request, result));
    if (request.present) result->present = rounded_to_float16(result->present);
    return Status::Ok();
  }
  const int64_t B = p.batch, S = p.seq, Di = p.input_hidden, D = p.hidden, N = p.heads, H = p.head_size;
  const int64_t P = p.past, T = p.total, C = 3 * D;

  // Projection: exact integer sums, then the float dequantization scale and the bias.
  const uint8_t* x = inputs.input->as<uint8_t>();
  const float* bias = inputs.bias->as<float>();
  std::vector<double> proj(static_cast<size_t>(B * S * C));
  for (int64_t m = 0; m < B * S; ++m) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t zw = p.weight_zp(c);
      int64_t acc = 0;
      for (int64_t k = 0; k < Di; ++k) {
        const int64_t w = p.weight_signed ? int64_t(inputs.weight->as<int8_t>()[k * C + c])
                                          : int64_t(inputs.weight->as<uint8_t>()[k * C + c]);
        acc += (int64_t(x[m * Di + k]) - p.input_zp) * (w - zw);
      }
      proj[m * C + c] = double(acc) * double(p.dequant_scale(c)) + double(bias[c]);
    }
  }

  result->output.assign(static_cast<size_t>(B * S * D), 0.0);
  result->output_shape = {B, S, D};
  if (request.present) {
    result->present.reset(DType::kFloat32, {2, B, N, T, H});
  } else {
    result->present = Tensor();
  }
  const float* past = P > 0 ? inputs.past->as<float>() : nullptr;
  const double lowest = double(std::numeric_limits<float>::lowest());
  const float filter = attrs.mask_filter_value;

  std::vector<double> keys(static_cast<size_t>(T * H)), values(static_cast<size_t>(T * H));
  std::vector<double> logits(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t n = 0; n < N; ++n) {
      // K/V of all T positions: the past rows first, then this call's tokens.
      for (int64_t j = 0; j < T; ++j) {
        for (int64_t d = 0; d < H; ++d) {
          double k, v;
          if (j < P) {
            k = past[(((0 * B + b) * N + n) * P + j) * H + d];
            v = past[(((1 * B + b) * N + n) * P + j) * H + d];
          } else {
            const int64_t row = (b * S + (j - P)) * C;
            k = proj[row + D + n * H + d];
            v = proj[row + 2 * D + n * H + d];
          }
          keys[j * H + d] = k;
          values[j * H + d] = v;
          if (request.present) {
            float* pr = result->present.as<float>();
            pr[(((0 * B + b) * N + n) * T + j) * H + d] = static_cast<float>(k);
            pr[(((1 * B + b) * N + n) * T + j) * H + d] = static_cast<float>(v);
          }
        }
      }
      for (int64_t i = 0; i < S; ++i) {
        const double* q = &proj[(b * S + i) * C + n * H];
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < H; ++d) dot += q[d] * keys[j * H + d];
          double logit = double(p.alpha) * dot;
          if (p.key_masked(b, i, j)) logit = double(static_cast<float>(logit) + filter);
          if (p.causal && j > P + i) logit = lowest;
          logits[j] = logit;
        }
        const double mx = *std::max_element(logits.begin(), logits.end());
        double den = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          logits[j] = std::exp(logits[j] - mx);
          den += logits[j];
        }
        double* out = &result->output[(b * S + i) * D + n * H];
        for (int64_t j = 0; j < T; ++j) {
          const double w = logits[j] / den;
          for (int64_t d = 0; d < H; ++d) out[d] += w * values[j * H + d];
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace reference
}  // namespace attnkit
