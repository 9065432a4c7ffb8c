// attnkit: QAttention driver — exact int32 projection, dequantize + bias, present, masked attention.
// Mirrors ORT's CPU kernel (attention_quant.cc + AttentionCPUBase): scores are alpha * Q.K in fp32 with
// the padding mask value added in fp32 (so a fully masked row keeps ORT's rounding), the causal part
// overwritten with -FLT_MAX, a plain softmax over all T keys, then probabilities times V.
// Work is split into fixed column blocks (projection) and (batch, head) pairs (attention), so the
// bits never depend on the thread count.
#include <new>
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "attnkit/qattention.h"
#include "common/thread_pool.h"
#include "dispatch.h"
#include "qattention/problem.h"
#include "qattention/scratch.h"

namespace attnkit {
namespace {

// Uninitialized float/int buffer (value-initializing gigabytes of scratch would cost a pass over it).
template <typename T>
std::unique_ptr<T[]> raw_buffer(size_t n) {
  return std::unique_ptr<T[]>(new T[n == 0 ? 1 : n]);
}

// qkv[m, c] for m = b*S + s, c in [0, 3D): int32 projection, then in place float(acc) * dq[c] + bias[c].
void project(const QAttentionProblem& p, const KernelTable& kt, int threads, const QAttentionLayout& lay,
             float* qkv) {
  const size_t M = static_cast<size_t>(p.batch * p.seq);
  const size_t K = static_cast<size_t>(p.input_hidden);
  const size_t columns = static_cast<size_t>(3 * p.hidden);
  std::vector<int32_t> zp(columns);
  std::vector<float> dq(columns);
  for (size_t c = 0; c < columns; ++c) {
    zp[c] = p.weight_zp(static_cast<int64_t>(c));
    dq[c] = p.dequant_scale(static_cast<int64_t>(c));
  }
  const float* bias = p.inputs->bias->as<float>();
  std::vector<uint8_t> workspace(lay.gemm_workspace_bytes * static_cast<size_t>(threads));
  int32_t* acc = reinterpret_cast<int32_t*>(qkv);
  const size_t blocks = (columns + lay.column_block - 1) / lay.column_block;
  parallel_for(blocks, threads, [&](size_t block, int worker) {
    const size_t n0 = block * lay.column_block;
    const size_t nb = std::min(lay.column_block, columns - n0);
    kt.gemm_u8x8.gemm(M, nb, K, p.inputs->input->as<uint8_t>(), K, p.input_zp,
                      static_cast<const uint8_t*>(p.inputs->weight->data) + n0, columns, p.weight_signed,
                      zp.data() + n0, acc + n0, columns,
                      workspace.data() + static_cast<size_t>(worker) * lay.gemm_workspace_bytes);
    // int32 -> float in place: same size, each element read before it is overwritten.
    for (size_t m = 0; m < M; ++m) {
      for (size_t c = n0; c < n0 + nb; ++c) {
        const int32_t v = acc[m * columns + c];
        qkv[m * columns + c] = static_cast<float>(v) * dq[c] + bias[c];
      }
    }
  });
}

// One (batch, head) pair: gather K/V (past rows, then new rows) into padded rows, write present, score,
// mask, softmax, multiply by V, scatter into output.
void attend(const QAttentionProblem& p, const KernelTable& kt, const QAttentionLayout& lay, const float* qkv,
            int64_t b, int64_t n, float* scratch, float* output, float* present) {
  const int64_t S = p.seq, T = p.total, P = p.past, H = p.head_size, D = p.hidden;
  const size_t Hp = lay.padded_head;
  const size_t columns = static_cast<size_t>(3 * D);
  float* q = scratch;
  float* k = q + S * Hp;
  float* v = k + T * Hp;
  float* o = v + T * Hp;
  float* scores = o + S * Hp;
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
  const float* past = P > 0 ? p.inputs->past->as<float>() : nullptr;
  const size_t past_k = static_cast<size_t>(((0 * p.batch + b) * p.heads + n) * P * H);
  const size_t past_v = static_cast<size_t>(((1 * p.batch + b) * p.heads + n) * P * H);
  std::fill(q, scores, 0.0f);  // the head padding (H..Hp) must be zero for the dot products
  for (int64_t j = 0; j < T; ++j) {
    float* kr = k + j * Hp;
    float* vr = v + j * Hp;
    if (j < P) {
      std::memcpy(kr, past + past_k + j * H, row_bytes);
      std::memcpy(vr, past + past_v + j * H, row_bytes);
    } else {
      const float* tok = qkv + static_cast<size_t>(b * S + (j - P)) * columns;
      std::memcpy(kr, tok + D + n * H, row_bytes);
      std::memcpy(vr, tok + 2 * D + n * H, row_bytes);
    }
  }
  for (int64_t i = 0; i < S; ++i) {
    std::memcpy(q + i * Hp, qkv + static_cast<size_t>(b * S + i) * columns + n * H, row_bytes);
  }
  if (present) {
    float* pk = present + static_cast<size_t>(((0 * p.batch + b) * p.heads + n) * T * H);
    float* pv = present + static_cast<size_t>(((1 * p.batch + b) * p.heads + n) * T * H);
    for (int64_t j = 0; j < T; ++j) {
      std::memcpy(pk + j * H, k + j * Hp, row_bytes);
      std::memcpy(pv + j * H, v + j * Hp, row_bytes);
    }
  }

  if (static_cast<size_t>(S) >= kQAttentionPackedMinRows) {
    // Prefill: the K panels are packed once and reused by every query row.
    float* panels = scores + S * T;
    kt.qk.pack_f32(T, Hp, k, Hp * sizeof(float), panels);
    kt.qk.packed(S, T, Hp, q, Hp, panels, p.alpha, scores, T);
  } else {
    kt.qk.f32(S, T, Hp, q, Hp, k, Hp * sizeof(float), p.alpha, scores, T);
  }
  const float filter = p.attrs.mask_filter_value;
  const float lowest = std::numeric_limits<float>::lowest();
  for (int64_t i = 0; i < S; ++i) {
    float* row = scores + i * T;
    if (p.mask != QMaskKind::kNone) {
      for (int64_t j = 0; j < T; ++j) {
        if (p.key_masked(b, i, j)) row[j] = row[j] + filter;
      }
    }
    if (p.causal) {
      for (int64_t j = P + i + 1; j < T; ++j) row[j] = lowest;
    }
    const float max = kt.softmax.reduce_max(row, T);
    const float sum = kt.softmax.exp_sum(row, T, max);
    kt.softmax.scale(row, T, 1.0f / sum);
  }
  kt.sv.f32(S, T, Hp, scores, T, v, Hp * sizeof(float), o, Hp, false);
  for (int64_t i = 0; i < S; ++i) {
    std::memcpy(output + static_cast<size_t>(b * S + i) * D + n * H, o + i * Hp, row_bytes);
  }
}

}  // namespace

QAttentionLayout qattention_layout(const QAttentionProblem& p, const KernelTable& kt, int threads) {
  QAttentionLayout lay;
  lay.threads = threads;
  lay.padded_head = static_cast<size_t>((p.head_size + 7) / 8 * 8);
  lay.column_block = kQAttentionColumnBlock;
  const size_t M = static_cast<size_t>(p.batch * p.seq);
  lay.gemm_workspace_bytes = kt.gemm_u8x8.workspace_bytes(M, lay.column_block, static_cast<size_t>(p.input_hidden));
  const size_t S = static_cast<size_t>(p.seq), T = static_cast<size_t>(p.total);
  lay.attention_floats = 2 * S * lay.padded_head + 2 * T * lay.padded_head + S * T;
  if (S >= kQAttentionPackedMinRows) lay.attention_floats += (T + kQkPanelKeys - 1) / kQkPanelKeys * kQkPanelKeys * lay.padded_head;
  const size_t columns = static_cast<size_t>(3 * p.hidden);
  lay.peak_scratch_bytes = M * columns * sizeof(float) + columns * (sizeof(int32_t) + sizeof(float)) +
                           std::max(lay.gemm_workspace_bytes * threads,
                                    lay.attention_floats * sizeof(float) * threads);
  return lay;
}

namespace {

void run_q_attention(const QAttentionProblem& p, const KernelTable& kt, int threads, const QAttentionLayout& lay,
                     const QAttentionRequest& request, QAttentionOutputs* outputs) {
  outputs->output.reset(DType::kFloat32, {p.batch, p.seq, p.hidden});
  if (request.present) {
    outputs->present.reset(DType::kFloat32, {2, p.batch, p.heads, p.total, p.head_size});
  } else {
    outputs->present = Tensor();
  }
  auto qkv = raw_buffer<float>(static_cast<size_t>(p.batch * p.seq * 3 * p.hidden));
  project(p, kt, threads, lay, qkv.get());

  auto scratch = raw_buffer<float>(lay.attention_floats * static_cast<size_t>(threads));
  float* output = outputs->output.as<float>();
  float* present = request.present ? outputs->present.as<float>() : nullptr;
  parallel_for(static_cast<size_t>(p.batch * p.heads), threads, [&](size_t task, int worker) {
    const int64_t b = static_cast<int64_t>(task) / p.heads;
    const int64_t n = static_cast<int64_t>(task) % p.heads;
    attend(p, kt, lay, qkv.get(), b, n, scratch.get() + lay.attention_floats * static_cast<size_t>(worker),
           output, present);
  });
}

}  // namespace

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionOutputs* outputs, const RunOptions& options) {
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  const KernelTable& kt = kernel_table();
  const int threads = resolve_threads(options.threads);
  const QAttentionLayout lay = qattention_layout(p, kt, threads);
  try {
    run_q_attention(p, kt, threads, lay, request, outputs);
  } catch (const std::bad_alloc&) {
    return Status::Error("out of memory: QAttention needs " + std::to_string(lay.peak_scratch_bytes) +
                         " bytes of scratch");
  }
  if (options.peak_scratch_bytes) *options.peak_scratch_bytes = lay.peak_scratch_bytes;
  return Status::Ok();
}

}  // namespace attnkit
