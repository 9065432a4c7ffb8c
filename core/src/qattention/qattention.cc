// attnkit: QAttention driver — exact int32 projection, dequantize + bias, present, masked attention.
// Mirrors ORT's CPU kernel (attention_quant.cc + AttentionCPUBase): scores are alpha * Q.K in fp32 with
// the padding mask value added in fp32 (so a fully masked row keeps ORT's rounding), the causal part
// overwritten with -FLT_MAX, a plain softmax over all T keys, then probabilities times V.
// Work is split into fixed column blocks (projection) and (batch, head, query block) triples
// (attention), so the bits never depend on the thread count.
#include <new>
#include <stdexcept>
#include <algorithm>
#include <cstdint>
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

// Uninitialized scratch from the tensor pool (attnkit/tensor.h): zeroing it would cost a pass over it, and
// a fresh allocation per call would page-fault it in again.
template <typename T>
struct PoolDeleter {
  size_t bytes;
  void operator()(T* p) const { detail::pool_free(p, bytes); }
};
template <typename T>
using RawBuffer = std::unique_ptr<T[], PoolDeleter<T>>;

template <typename T>
RawBuffer<T> raw_buffer(size_t n) {
  const size_t bytes = (n == 0 ? 1 : n) * sizeof(T);
  return RawBuffer<T>(static_cast<T*>(detail::pool_allocate(bytes)), PoolDeleter<T>{bytes});
}

// Dequantizes columns [n0, n0 + nb) of the int32 projection in place: float(acc) * dq[c] + bias[c]
// (same size, each element read before it is overwritten).
void dequantize_block(size_t M, size_t columns, size_t n0, size_t nb, const float* dq, const float* bias,
                      float* qkv) {
  for (size_t m = 0; m < M; ++m) {
    float* row = qkv + m * columns + n0;
    const int32_t* acc = reinterpret_cast<const int32_t*>(row);
    for (size_t c = 0; c < nb; ++c) row[c] = static_cast<float>(acc[c]) * dq[n0 + c] + bias[n0 + c];
  }
}

// qkv[m, c] for m = b*S + s, c in [0, 3D): int32 projection, then in place float(acc) * dq[c] + bias[c].
// With a packed variant, the input is packed once, and every task packs its own column block of the weight into
// its worker's buffer and computes that block from it: a product of its own, over the weight's columns at B + n0.
// Packed for the whole weight first, in a phase of its own, the strips went to memory and came back to whichever
// core computed them: the packer's stores were 6% of a 128-token call on one thread and 15% on two (`perf`).
void project(const QAttentionProblem& p, const KernelTable& kt, int threads, const QAttentionLayout& lay,
             float* qkv) {
  const GemmU8X8Kernels& gemm = kt.gemm_u8x8;
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
  const uint8_t* input = p.inputs->input->as<uint8_t>();
  const void* weight = p.inputs->weight->data;
  int32_t* acc = reinterpret_cast<int32_t*>(qkv);
  const size_t blocks = (columns + lay.column_block - 1) / lay.column_block;
  if (lay.packed_gemm) {
    auto buffer = raw_buffer<uint8_t>(lay.gemm_workspace_bytes);
    uint8_t* packed_a =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer.get()) + 63) & ~uintptr_t(63));
    gemm.pack_a(M, K, input, K, p.input_zp, packed_a);
    parallel_for(blocks, threads, [&](size_t block, int worker) {
      const size_t n0 = block * lay.column_block;
      const size_t nb = std::min(lay.column_block, columns - n0);
      uint8_t* packed_b = packed_a + lay.packed_b_offset + static_cast<size_t>(worker) * lay.packed_b_stride;
      // int8 or uint8: one byte per element, so column n0 is n0 bytes on
      gemm.pack_b(K, nb, 0, nb, static_cast<const uint8_t*>(weight) + n0, columns, p.weight_signed, zp.data() + n0,
                  packed_b);
      // The kernel dequantizes as it stores (the same float multiply then add as dequantize_block).
      const GemmU8X8Dequant dequant{dq.data() + n0, bias + n0};
      gemm.compute(M, nb, K, 0, nb, packed_a, p.input_zp, packed_b, acc + n0, columns, &dequant);
    });
    return;
  }
  if (lay.row_ranges > 0) {
    // A decode step: each task streams a contiguous range of the weight's rows over all columns, one ascending
    // stream (see gemm_u8x8.h). The int32 partial sums are exact, so their total is the same integer for any split.
    const size_t ranges = lay.row_ranges, per_range = (K + ranges - 1) / ranges;
    auto partials = raw_buffer<int32_t>((ranges - 1) * M * columns);
    parallel_for(ranges, threads, [&](size_t range, int) {
      const size_t k0 = range * per_range, k1 = std::min(K, k0 + per_range);
      int32_t* out = range == 0 ? acc : partials.get() + (range - 1) * M * columns;
      gemm.gemm(M, columns, k1 - k0, input + k0, K, p.input_zp, static_cast<const uint8_t*>(weight) + k0 * columns,
                columns, p.weight_signed, zp.data(), out, columns, nullptr);
    });
    for (size_t range = 1; range < ranges; ++range) {
      const int32_t* part = partials.get() + (range - 1) * M * columns;
      for (size_t i = 0; i < M * columns; ++i) acc[i] = int32_t(uint32_t(acc[i]) + uint32_t(part[i]));
    }
    dequantize_block(M, columns, 0, columns, dq.data(), bias, qkv);
    return;
  }
  std::vector<uint8_t> workspace(lay.gemm_workspace_bytes * static_cast<size_t>(threads));
  parallel_for(blocks, threads, [&](size_t block, int worker) {
    const size_t n0 = block * lay.column_block;
    const size_t nb = std::min(lay.column_block, columns - n0);
    gemm.gemm(M, nb, K, input, K, p.input_zp, static_cast<const uint8_t*>(weight) + n0, columns, p.weight_signed,
              zp.data() + n0, acc + n0, columns,
              workspace.data() + static_cast<size_t>(worker) * lay.gemm_workspace_bytes);
    dequantize_block(M, columns, n0, nb, dq.data(), bias, qkv);
  });
}

// Query rows [i0, i0 + rows) of one (batch, head): score against all T keys, mask, softmax, multiply by
// V, write into output; the first row block of a head also writes its present rows.
// When head_size is a multiple of 8 the kernels read Q, K, V straight from the projection (and from
// past through present), else the rows are gathered into zero-padded scratch rows.
// shared_panels: this head's K panels when the caller packed them for all its row blocks, else nullptr.
void attend(const QAttentionProblem& p, const KernelTable& kt, const QAttentionLayout& lay, const float* qkv,
            int64_t b, int64_t n, int64_t i0, int64_t rows, const float* shared_panels, float* scratch,
            float* output, float* present) {
  const int64_t S = p.seq, T = p.total, P = p.past, H = p.head_size, D = p.hidden;
  const size_t Hp = lay.padded_head;
  const bool direct = static_cast<size_t>(H) == Hp;
  const size_t columns = static_cast<size_t>(3 * D);
  const size_t row_bytes = static_cast<size_t>(H) * sizeof(float);
  const float* tokens = qkv + static_cast<size_t>(b * S) * columns;  // this batch entry's projected rows
  const size_t head_floats = static_cast<size_t>(p.present_rows * H);  // in place, rows of the cache's capacity
  float* present_k = present ? present + static_cast<size_t>((0 * p.batch + b) * p.heads + n) * head_floats : nullptr;
  float* present_v = present ? present + static_cast<size_t>((1 * p.batch + b) * p.heads + n) * head_floats : nullptr;
  // This head's past rows: in the past tensor, or, in place, already where present keeps them.
  const float* past = P > 0 ? p.inputs->past->as<float>() : nullptr;
  const float* past_k = p.in_place ? present_k : past ? past + ((0 * p.batch + b) * p.heads + n) * P * H : nullptr;
  const float* past_v = p.in_place ? present_v : past ? past + ((1 * p.batch + b) * p.heads + n) * P * H : nullptr;

  float* scores = scratch;
  float* panels = scores + lay.query_block * T;
  const size_t panel_floats = (T + kQkPanelKeys - 1) / kQkPanelKeys * kQkPanelKeys * Hp;
  float* cursor = panels + panel_floats;

  // K and V rows: row j is k + j*ld (floats), Hp readable floats with zeros past H.
  const float* k;
  const float* v;
  size_t ld;
  if (direct && P == 0) {
    k = tokens + D + n * H;
    v = tokens + 2 * D + n * H;
    ld = columns;
    if (present && i0 == 0) {
      for (int64_t j = 0; j < T; ++j) {
        std::memcpy(present_k + j * H, k + j * ld, row_bytes);
        std::memcpy(present_v + j * H, v + j * ld, row_bytes);
      }
    }
  } else {
    // Past then new rows. With past there is one row block per head, so gathering straight into
    // present writes it exactly once.
    float* kg = direct && present ? present_k : cursor;
    float* vg = direct && present ? present_v : cursor + T * Hp;
    if (!(direct && present)) cursor += 2 * T * Hp;
    ld = direct ? static_cast<size_t>(H) : Hp;
    int64_t j0 = 0;
    if (direct && present && P > 0) {
      // Present's first P rows of this head are past's, contiguous in both: one copy each instead of a call
      // per 256-byte row (a wasm decode step after 511 tokens made 12K of them), and none in place.
      if (!p.in_place) {
        std::memcpy(kg, past_k, static_cast<size_t>(P) * row_bytes);
        std::memcpy(vg, past_v, static_cast<size_t>(P) * row_bytes);
      }
      j0 = P;
    }
    for (int64_t j = j0; j < T; ++j) {
      float* kr = kg + j * ld;
      float* vr = vg + j * ld;
      const float* ks = j < P ? past_k + j * H : tokens + (j - P) * columns + D + n * H;
      const float* vs = j < P ? past_v + j * H : tokens + (j - P) * columns + 2 * D + n * H;
      std::memcpy(kr, ks, row_bytes);
      std::memcpy(vr, vs, row_bytes);
      if (!direct) {
        std::fill(kr + H, kr + Hp, 0.0f);  // the dot products run over Hp
        std::fill(vr + H, vr + Hp, 0.0f);
      }
    }
    if (present && !direct && i0 == 0) {  // one row block per head writes present (in place: its new rows)
      for (int64_t j = p.in_place ? P : 0; j < T; ++j) {
        std::memcpy(present_k + j * H, kg + j * ld, row_bytes);
        std::memcpy(present_v + j * H, vg + j * ld, row_bytes);
      }
    }
    k = kg;
    v = vg;
  }

  const float* q;
  size_t ldq;
  float* o;
  size_t ldo;
  if (direct) {
    q = tokens + i0 * columns + n * H;
    ldq = columns;
    o = output + static_cast<size_t>(b * S + i0) * D + n * H;
    ldo = static_cast<size_t>(D);
  } else {
    float* qg = cursor;
    cursor += rows * Hp;
    for (int64_t i = 0; i < rows; ++i) {
      std::memcpy(qg + i * Hp, tokens + (i0 + i) * columns + n * H, row_bytes);
      std::fill(qg + i * Hp + H, qg + (i + 1) * Hp, 0.0f);
    }
    q = qg;
    ldq = Hp;
    o = cursor;
    cursor += rows * Hp;
    ldo = Hp;
  }

  // The caller copied this head's V rows next to its shared K panels, contiguous: SV reads them a column
  // tile at a time down all T rows, which at the projection's row stride (3 * hidden floats) ran 15-25%
  // slower.
  size_t ldv = ld;
  if (shared_panels) {
    v = shared_panels + panel_floats;
    ldv = Hp;
  }
  if (static_cast<size_t>(rows) >= kQAttentionPackedMinRows) {
    // Prefill: the K panels are packed once (per head, or per block with past) and reused by every row.
    if (!shared_panels) kt.qk.pack_f32(T, Hp, k, ld * sizeof(float), panels);
    kt.qk.packed(rows, T, Hp, q, ldq, shared_panels ? shared_panels : panels, p.alpha, scores, T);
  } else {
    kt.qk.f32(rows, T, Hp, q, ldq, k, ld * sizeof(float), p.alpha, scores, T);
  }
  const float filter = p.attrs.mask_filter_value;
  const float lowest = std::numeric_limits<float>::lowest();
  // Each row's 1/sum scales its H outputs after the SV product instead of its T probabilities before.
  float* inv_sums = cursor;
  cursor += rows;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    float* row = scores + r * T;
    if (p.mask != QMaskKind::kNone) {
      for (int64_t j = 0; j < T; ++j) {
        if (p.key_masked(b, i, j)) row[j] = row[j] + filter;
      }
    }
    if (p.causal) {
      for (int64_t j = P + i + 1; j < T; ++j) row[j] = lowest;
    }
    const float max = kt.softmax.reduce_max(row, T);
    inv_sums[r] = 1.0f / kt.softmax.exp_sum(row, T, max);  // the row's max contributes exp(0) = 1
  }
  kt.sv.f32(rows, T, Hp, scores, T, v, ldv * sizeof(float), o, ldo, false);
  for (int64_t r = 0; r < rows; ++r) {
    kt.softmax.scale(o + r * ldo, static_cast<size_t>(H), inv_sums[r]);
    if (!direct) std::memcpy(output + static_cast<size_t>(b * S + i0 + r) * D + n * H, o + r * Hp, row_bytes);
  }
}

}  // namespace

QAttentionLayout qattention_layout(const QAttentionProblem& p, const KernelTable& kt, int threads) {
  QAttentionLayout lay;
  lay.threads = threads;
  lay.padded_head = static_cast<size_t>((p.head_size + 7) / 8 * 8);
  lay.column_block = kQAttentionColumnBlock;
  const size_t M = static_cast<size_t>(p.batch * p.seq);
  const size_t K = static_cast<size_t>(p.input_hidden);
  const size_t columns = static_cast<size_t>(3 * p.hidden);
  const GemmU8X8Kernels& gemm = kt.gemm_u8x8;
  // A decode step (few rows) skips the packed form: the one-shot gemm streams the weight unpacked.
  lay.packed_gemm =
      gemm.column_granule != 0 && kQAttentionColumnBlock % gemm.column_granule == 0 && M > kQAttentionDirectMaxRows;
  size_t gemm_bytes;
  if (lay.packed_gemm) {
    lay.packed_b_offset = (gemm.packed_a_bytes(M, K) + 63) / 64 * 64;
    lay.packed_b_stride = (gemm.packed_b_bytes(K, kQAttentionColumnBlock) + 63) / 64 * 64;
    lay.gemm_workspace_bytes = lay.packed_b_offset + static_cast<size_t>(threads) * lay.packed_b_stride + 64;
    gemm_bytes = lay.gemm_workspace_bytes;
  } else if (M <= kQAttentionDirectMaxRows) {
    // A range of at least kQAttentionMinRangeRows weight rows per task, at most one per thread.
    lay.row_ranges = std::max<size_t>(1, std::min<size_t>(threads, K / kQAttentionMinRangeRows));
    gemm_bytes = (lay.row_ranges - 1) * M * columns * sizeof(int32_t);
  } else {
    lay.gemm_workspace_bytes = gemm.workspace_bytes(M, lay.column_block, K);
    gemm_bytes = lay.gemm_workspace_bytes * threads;
  }
  const size_t S = static_cast<size_t>(p.seq), T = static_cast<size_t>(p.total), Hp = lay.padded_head;
  lay.query_block = p.past == 0 ? std::min(S, kQAttentionQueryBlock) : S;
  const size_t rows = lay.query_block;
  const size_t panel_floats = (T + kQkPanelKeys - 1) / kQkPanelKeys * kQkPanelKeys * Hp;
  lay.attention_floats = rows * T + panel_floats + 2 * T * Hp + 2 * rows * Hp + rows;
  // Shared per-head panels: no past, K read in place (head_size a multiple of 8), blocks that use panels.
  const bool shared = p.past == 0 && static_cast<size_t>(p.head_size) == Hp && S >= kQAttentionPackedMinRows;
  lay.shared_panel_floats = shared ? panel_floats + T * Hp : 0;
  const size_t heads = static_cast<size_t>(p.batch * p.heads);
  lay.peak_scratch_bytes = M * columns * sizeof(float) + columns * (sizeof(int32_t) + sizeof(float)) +
                           std::max(gemm_bytes, (lay.attention_floats * threads + lay.shared_panel_floats * heads) *
                                                    sizeof(float));
  return lay;
}

namespace {

void run_q_attention(const QAttentionProblem& p, const KernelTable& kt, int threads, const QAttentionLayout& lay,
                     const QAttentionRequest& request, QAttentionOutputs* outputs) {
  // attend() writes every output row (the SV product overwrites, T >= 1) and every present row (past, then new):
  // zeroing them first cost a decode step (S=1, 511 past tokens) a pass over its 3 MB present.
  outputs->output.reset_uninitialized(DType::kFloat32, {p.batch, p.seq, p.hidden});
  if (request.present && !p.in_place) {
    outputs->present.reset_uninitialized(DType::kFloat32, {2, p.batch, p.heads, p.total, p.head_size});
  } else {
    outputs->present = Tensor();
  }
  auto qkv = raw_buffer<float>(static_cast<size_t>(p.batch * p.seq * 3 * p.hidden));
  project(p, kt, threads, lay, qkv.get());

  auto scratch = raw_buffer<float>(lay.attention_floats * static_cast<size_t>(threads));
  float* output = outputs->output.as<float>();
  float* present = p.in_place ? static_cast<float*>(const_cast<void*>(p.inputs->past->data))
                  : request.present ? outputs->present.as<float>()
                                    : nullptr;
  const size_t heads = static_cast<size_t>(p.batch * p.heads);
  // Several row blocks per head read K and V from the projection: pack each head's K panels and copy its V
  // rows once.
  RawBuffer<float> panels(nullptr, PoolDeleter<float>{0});
  if (lay.shared_panel_floats > 0) {
    panels = raw_buffer<float>(lay.shared_panel_floats * heads);
    const size_t columns = static_cast<size_t>(3 * p.hidden);
    parallel_for(heads, threads, [&](size_t task, int) {
      const int64_t b = static_cast<int64_t>(task) / p.heads, n = static_cast<int64_t>(task) % p.heads;
      const float* k = qkv.get() + static_cast<size_t>(b * p.seq) * columns + p.hidden + n * p.head_size;
      float* shared = panels.get() + task * lay.shared_panel_floats;
      kt.qk.pack_f32(static_cast<size_t>(p.total), lay.padded_head, k, columns * sizeof(float), shared);
      // Then the head's V rows, contiguous (head_size == padded_head here).
      float* v_rows = shared + lay.shared_panel_floats - static_cast<size_t>(p.total) * lay.padded_head;
      for (int64_t j = 0; j < p.total; ++j)
        std::memcpy(v_rows + j * p.head_size, k + p.hidden + j * columns, static_cast<size_t>(p.head_size) * sizeof(float));
    });
  }
  const int64_t row_blocks = (p.seq + static_cast<int64_t>(lay.query_block) - 1) / static_cast<int64_t>(lay.query_block);
  parallel_for(heads * static_cast<size_t>(row_blocks), threads, [&](size_t task, int worker) {
    const size_t head_task = task / static_cast<size_t>(row_blocks);
    const int64_t i0 = static_cast<int64_t>(task) % row_blocks * static_cast<int64_t>(lay.query_block);
    const int64_t rows = std::min(static_cast<int64_t>(lay.query_block), p.seq - i0);
    attend(p, kt, lay, qkv.get(), static_cast<int64_t>(head_task) / p.heads, static_cast<int64_t>(head_task) % p.heads,
           i0, rows, panels ? panels.get() + head_task * lay.shared_panel_floats : nullptr,
           scratch.get() + lay.attention_floats * static_cast<size_t>(worker), output, present);
  });
}

Status run_validated(const QAttentionProblem& p, const QAttentionRequest& request, QAttentionOutputs* outputs,
                     const RunOptions& options) {
  const KernelTable& kt = kernel_table();
  const int threads = resolve_threads(options.threads);
  const QAttentionLayout lay = qattention_layout(p, kt, threads);
  const auto out_of_memory = [&] {
    return Status::Error("out of memory: QAttention needs " + std::to_string(lay.peak_scratch_bytes) +
                         " bytes of scratch");
  };
  try {
    run_q_attention(p, kt, threads, lay, request, outputs);
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::length_error&) {  // a vector past its max_size (2 GiB on wasm32)
    return out_of_memory();
  }
  if (options.peak_scratch_bytes) *options.peak_scratch_bytes = lay.peak_scratch_bytes;
  return Status::Ok();
}

}  // namespace

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionOutputs* outputs, const RunOptions& options) {
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  return run_validated(p, request, outputs, options);
}

Status q_attention_in_place(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                            QAttentionOutputs* outputs, const RunOptions& options, int64_t past_length) {
  QAttentionProblem p;
  // The in-place form requests present itself (validate_qattention).
  ATTNKIT_RETURN_IF_ERROR(
      validate_qattention(inputs, attrs, QAttentionRequest(), &p, /*in_place=*/true, past_length));
  return run_validated(p, p.request, outputs, options);
}

}  // namespace attnkit
