// attnkit: QAttention driver — exact int32 projection, dequantize + bias, present, masked attention.
// Mirrors ORT's CPU kernel (attention_quant.cc + AttentionCPUBase): scores are alpha * Q.K in fp32 with
// the padding mask value added in fp32 (so a fully masked row keeps ORT's rounding), the causal part
// overwritten with -FLT_MAX, a plain softmax over all T keys, then probabilities times V.
// Work is split into fixed column blocks (projection) and (batch, head, query block) triples (attention), or,
// where the heads split evenly over the threads, into one task per head doing both; no value depends on which,
// so the bits never depend on the thread count.
#include <new>
#include <stdexcept>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "attnkit/qattention.h"
#include "common/half.h"
#include "common/tensor_storage.h"
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

// The projection qkv[m, c] for m = b*S + s, c in [0, 3D): int32 products, then in place float(acc) * dq[c] + bias[c].
// With a packed variant, the input is packed once (here, on the calling thread), and every task packs its own
// column block of the weight into its worker's buffer and computes that block from it: a product of its own, over
// the weight's columns at B + n0. Packed for the whole weight first, in a phase of its own, the strips went to
// memory and came back to whichever core computed them: the packer's stores were 6% of a 128-token call on one
// thread and 15% on two (`perf`).
class Projection {
 public:
  Projection(const QAttentionProblem& p, const KernelTable& kt, const QAttentionLayout& lay)
      : p_(p), gemm_(kt.gemm_u8x8), lay_(lay), M_(static_cast<size_t>(p.batch * p.seq)),
        K_(static_cast<size_t>(p.input_hidden)), columns_(static_cast<size_t>(3 * p.hidden)), zp_(columns_),
        dq_(columns_), bias_(p.inputs->bias->as<float>()), input_(p.inputs->input->as<uint8_t>()),
        weight_(static_cast<const uint8_t*>(p.inputs->weight->data)) {  // int8 or uint8: one byte per element
    for (size_t c = 0; c < columns_; ++c) {
      zp_[c] = p.weight_zp(static_cast<int64_t>(c));
      dq_[c] = p.dequant_scale(static_cast<int64_t>(c));
    }
    if (lay.packed_gemm) {
      buffer_ = raw_buffer<uint8_t>(lay.gemm_workspace_bytes);
      packed_a_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buffer_.get()) + 63) & ~uintptr_t(63));
      gemm_.pack_a(M_, K_, input_, K_, p.input_zp, packed_a_);
    }
  }

  // Packed form: columns [n0, n0 + nb) of qkv, nb <= the column block, through worker's strip buffer.
  void packed_columns(size_t n0, size_t nb, int worker, float* qkv) const {
    uint8_t* packed_b = packed_a_ + lay_.packed_b_offset + static_cast<size_t>(worker) * lay_.packed_b_stride;
    gemm_.pack_b(K_, nb, 0, nb, weight_ + n0, columns_, p_.weight_signed, zp_.data() + n0, packed_b);
    // The kernel dequantizes as it stores (the same float multiply then add as dequantize_block).
    const GemmU8X8Dequant dequant{dq_.data() + n0, bias_ + n0};
    gemm_.compute(M_, nb, K_, 0, nb, packed_a_, p_.input_zp, packed_b, reinterpret_cast<int32_t*>(qkv) + n0,
                  columns_, &dequant);
  }

  // All of qkv, split over the threads.
  void run(int threads, float* qkv) const {
    int32_t* acc = reinterpret_cast<int32_t*>(qkv);
    const size_t blocks = (columns_ + lay_.column_block - 1) / lay_.column_block;
    if (lay_.packed_gemm) {
      parallel_for(blocks, threads, [&](size_t block, int worker) {
        const size_t n0 = block * lay_.column_block;
        packed_columns(n0, std::min(lay_.column_block, columns_ - n0), worker, qkv);
      });
      return;
    }
    if (lay_.row_ranges > 0) {
      // A decode step: each task streams a contiguous range of the weight's rows over all columns, one ascending
      // stream (see gemm_u8x8.h). The int32 partial sums are exact, so their total is the same integer for any
      // split.
      const size_t ranges = lay_.row_ranges, per_range = (K_ + ranges - 1) / ranges;
      auto partials = raw_buffer<int32_t>((ranges - 1) * M_ * columns_);
      parallel_for(ranges, threads, [&](size_t range, int) {
        const size_t k0 = range * per_range, k1 = std::min(K_, k0 + per_range);
        int32_t* out = range == 0 ? acc : partials.get() + (range - 1) * M_ * columns_;
        gemm_.gemm(M_, columns_, k1 - k0, input_ + k0, K_, p_.input_zp, weight_ + k0 * columns_, columns_,
                   p_.weight_signed, zp_.data(), out, columns_, nullptr);
      });
      for (size_t range = 1; range < ranges; ++range) {
        const int32_t* part = partials.get() + (range - 1) * M_ * columns_;
        for (size_t i = 0; i < M_ * columns_; ++i) acc[i] = int32_t(uint32_t(acc[i]) + uint32_t(part[i]));
      }
      dequantize_block(M_, columns_, 0, columns_, dq_.data(), bias_, qkv);
      return;
    }
    std::vector<uint8_t> workspace(lay_.gemm_workspace_bytes * static_cast<size_t>(threads));
    parallel_for(blocks, threads, [&](size_t block, int worker) {
      const size_t n0 = block * lay_.column_block;
      const size_t nb = std::min(lay_.column_block, columns_ - n0);
      gemm_.gemm(M_, nb, K_, input_, K_, p_.input_zp, weight_ + n0, columns_, p_.weight_signed, zp_.data() + n0,
                 acc + n0, columns_, workspace.data() + static_cast<size_t>(worker) * lay_.gemm_workspace_bytes);
      dequantize_block(M_, columns_, n0, nb, dq_.data(), bias_, qkv);
    });
  }

 private:
  const QAttentionProblem& p_;
  const GemmU8X8Kernels& gemm_;
  const QAttentionLayout& lay_;
  const size_t M_, K_, columns_;
  std::vector<int32_t> zp_;
  std::vector<float> dq_;
  const float* bias_;
  const uint8_t* input_;
  const uint8_t* weight_;
  RawBuffer<uint8_t> buffer_{nullptr, PoolDeleter<uint8_t>{0}};
  uint8_t* packed_a_ = nullptr;
};

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
  // By key blocks, each summed from zero and then added into o, as GroupQueryAttention does (gqa/attention.cc,
  // add_block_values): one fp32 chain over a long past rounds by about sqrt(T) ulps of its partial sums. One token
  // after 16,383 (B=1, D=768, N=12): 4.4e-8 from the reference at an output peak of 1.6e-2, now 6.5e-9.
  float* block_sums = cursor;
  cursor += rows * Hp;
  for (int64_t j = 0; j == 0 || j < T; j += kQAttentionSumKeys) {
    const size_t keys = static_cast<size_t>(std::min<int64_t>(kQAttentionSumKeys, T - j));
    kt.sv.f32(rows, keys, Hp, scores + j, T, v + j * ldv, ldv * sizeof(float), j == 0 ? o : block_sums,
              j == 0 ? ldo : Hp, false);
    if (j > 0)
      for (int64_t r = 0; r < rows; ++r) kt.softmax.add(o + r * ldo, block_sums + r * Hp, Hp);
  }
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
  uint64_t gemm_bytes;  // with every size below, 64-bit on wasm32 too (scratch.h)
  if (lay.packed_gemm) {
    lay.packed_b_offset = (gemm.packed_a_bytes(M, K) + 63) / 64 * 64;
    lay.packed_b_stride = (gemm.packed_b_bytes(K, kQAttentionColumnBlock) + 63) / 64 * 64;
    lay.gemm_workspace_bytes = lay.packed_b_offset + static_cast<size_t>(threads) * lay.packed_b_stride + 64;
    gemm_bytes = lay.gemm_workspace_bytes;
  } else if (M <= kQAttentionDirectMaxRows) {
    // A range of at least kQAttentionMinRangeRows weight rows per task, at most one per thread.
    lay.row_ranges = std::max<size_t>(1, std::min<size_t>(threads, K / kQAttentionMinRangeRows));
    gemm_bytes = static_cast<uint64_t>(lay.row_ranges - 1) * M * columns * sizeof(int32_t);
  } else {
    lay.gemm_workspace_bytes = gemm.workspace_bytes(M, lay.column_block, K);
    gemm_bytes = lay.gemm_workspace_bytes * threads;
  }
  const uint64_t S = static_cast<uint64_t>(p.seq), T = static_cast<uint64_t>(p.total), Hp = lay.padded_head;
  lay.query_block = static_cast<size_t>(p.past == 0 ? std::min<uint64_t>(S, kQAttentionQueryBlock) : S);
  const uint64_t rows = lay.query_block;
  const uint64_t panel_floats = (T + kQkPanelKeys - 1) / kQkPanelKeys * kQkPanelKeys * Hp;
  lay.attention_floats = rows * T + panel_floats + 2 * T * Hp + 3 * rows * Hp + rows;
  // Shared per-head panels: no past, K read in place (head_size a multiple of 8), blocks that use panels.
  const bool shared = p.past == 0 && static_cast<size_t>(p.head_size) == Hp && S >= kQAttentionPackedMinRows;
  lay.shared_panel_floats = shared ? panel_floats + T * Hp : 0;
  // One task per head where the heads split evenly over the threads, two or more each (no thread waits on a
  // last head), and a head's Q, K and V columns are whole column blocks.
  const uint64_t heads = static_cast<uint64_t>(p.heads), workers = static_cast<uint64_t>(threads);
  lay.head_tasks = lay.packed_gemm && static_cast<size_t>(p.head_size) % lay.column_block == 0 &&
                   heads % workers == 0 && heads >= 2 * workers;
  const uint64_t fixed =
      static_cast<uint64_t>(M) * columns * sizeof(float) + columns * (sizeof(int32_t) + sizeof(float));
  if (lay.head_tasks) {  // the projection's buffers live on through the attention, with per-worker panels
    lay.peak_scratch_bytes =
        fixed + gemm_bytes + (lay.attention_floats + lay.shared_panel_floats) * workers * sizeof(float);
  } else {  // one phase after the other, with panels for every (batch, head)
    const uint64_t attention = lay.attention_floats * workers + lay.shared_panel_floats * heads * p.batch;
    lay.peak_scratch_bytes = fixed + std::max<uint64_t>(gemm_bytes, attention * sizeof(float));
  }
  lay.peak_scratch_bytes += qattention_float16_staging_bytes(p);
  return lay;
}

uint64_t qattention_float16_staging_bytes(const QAttentionProblem& p) {
  if (p.dtype != DType::kFloat16) return 0;
  const TensorView& in_ws = *p.inputs->weight_scale;
  const uint64_t inputs = 3 * static_cast<uint64_t>(p.hidden) + 1 + static_cast<uint64_t>(in_ws.elements()) +
                          (p.inputs->past ? static_cast<uint64_t>(p.inputs->past->elements()) : 0);
  const uint64_t present = 2 * static_cast<uint64_t>(p.batch) * p.heads * p.total * p.head_size;
  const uint64_t outputs = static_cast<uint64_t>(p.batch) * p.seq * p.hidden + (p.request.present ? present : 0);
  return (inputs + outputs) * sizeof(float);
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
  RawBuffer<float> scratch(nullptr, PoolDeleter<float>{0}), panels(nullptr, PoolDeleter<float>{0});
  float* output = outputs->output.as<float>();
  float* present = p.in_place ? static_cast<float*>(const_cast<void*>(p.inputs->past->data))
                  : request.present ? outputs->present.as<float>()
                                    : nullptr;
  const size_t columns = static_cast<size_t>(3 * p.hidden), H = static_cast<size_t>(p.head_size);
  const int64_t query_block = static_cast<int64_t>(lay.query_block);
  const int64_t row_blocks = (p.seq + query_block - 1) / query_block;
  // Several row blocks per head read K and V from the projection: each head's K panels are packed and its V rows
  // copied once, for all of them.
  const auto pack_shared = [&](int64_t b, int64_t n, float* shared) {
    const float* k = qkv.get() + static_cast<size_t>(b * p.seq) * columns + p.hidden + n * p.head_size;
    kt.qk.pack_f32(static_cast<size_t>(p.total), lay.padded_head, k, columns * sizeof(float), shared);
    // Then the head's V rows, contiguous (head_size == padded_head here).
    float* v_rows = shared + lay.shared_panel_floats - static_cast<size_t>(p.total) * lay.padded_head;
    for (int64_t j = 0; j < p.total; ++j)
      std::memcpy(v_rows + j * p.head_size, k + p.hidden + j * columns, H * sizeof(float));
  };
  const auto attend_block = [&](int64_t b, int64_t n, int64_t block, const float* shared, int worker) {
    const int64_t i0 = block * query_block, rows = std::min(query_block, p.seq - i0);
    attend(p, kt, lay, qkv.get(), b, n, i0, rows, shared,
           scratch.get() + lay.attention_floats * static_cast<size_t>(worker), output, present);
  };
  if (lay.head_tasks) {
    // One task per head: its Q, K and V columns of the projection, then its attention, on one thread. Split in
    // phases, half of a head's columns and panels were written on one core and read on the other: on this host
    // such lines read at 30-35 GB/s, a core's own at 85-110 (qattention_bench's host_limits).
    const Projection projection(p, kt, lay);
    scratch = raw_buffer<float>(lay.attention_floats * static_cast<size_t>(threads));
    if (lay.shared_panel_floats > 0) panels = raw_buffer<float>(lay.shared_panel_floats * static_cast<size_t>(threads));
    parallel_for(static_cast<size_t>(p.heads), threads, [&](size_t task, int worker) {
      const int64_t n = static_cast<int64_t>(task);
      for (int64_t part = 0; part < 3; ++part)
        for (size_t c = 0; c < H; c += lay.column_block)
          projection.packed_columns(static_cast<size_t>(part * p.hidden + n * p.head_size) + c,
                                    std::min(lay.column_block, H - c), worker, qkv.get());
      float* shared = panels ? panels.get() + static_cast<size_t>(worker) * lay.shared_panel_floats : nullptr;
      for (int64_t b = 0; b < p.batch; ++b) {
        if (shared) pack_shared(b, n, shared);
        for (int64_t block = 0; block < row_blocks; ++block) attend_block(b, n, block, shared, worker);
      }
    });
    return;
  }
  Projection(p, kt, lay).run(threads, qkv.get());  // its buffers go before the attention's come
  scratch = raw_buffer<float>(lay.attention_floats * static_cast<size_t>(threads));
  const size_t heads = static_cast<size_t>(p.batch * p.heads);
  if (lay.shared_panel_floats > 0) {
    panels = raw_buffer<float>(lay.shared_panel_floats * heads);
    parallel_for(heads, threads, [&](size_t task, int) {
      pack_shared(static_cast<int64_t>(task) / p.heads, static_cast<int64_t>(task) % p.heads,
                  panels.get() + task * lay.shared_panel_floats);
    });
  }
  parallel_for(heads * static_cast<size_t>(row_blocks), threads, [&](size_t task, int worker) {
    const size_t head_task = task / static_cast<size_t>(row_blocks);
    attend_block(static_cast<int64_t>(head_task) / p.heads, static_cast<int64_t>(head_task) % p.heads,
                 static_cast<int64_t>(task % static_cast<size_t>(row_blocks)),
                 panels ? panels.get() + head_task * lay.shared_panel_floats : nullptr, worker);
  });
}

Status run_validated(const QAttentionProblem& p, const QAttentionRequest& request, QAttentionOutputs* outputs,
                     const RunOptions& options) {
  const KernelTable& kt = kernel_table();
  const int threads = resolve_threads(options.threads);
  const QAttentionLayout lay = qattention_layout(p, kt, threads);
  const auto out_of_memory = [&] {
    return Status::OutOfMemory("out of memory: QAttention needs " + std::to_string(lay.peak_scratch_bytes) +
                               " bytes of scratch");
  };
  if (lay.peak_scratch_bytes > std::numeric_limits<size_t>::max()) return out_of_memory();
  try {
    run_q_attention(p, kt, threads, lay, request, outputs);
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::length_error&) {  // a vector past its max_size (2 GiB on wasm32)
    return out_of_memory();
  }
  if (options.peak_scratch_bytes) *options.peak_scratch_bytes = static_cast<size_t>(lay.peak_scratch_bytes);
  return Status::Ok();
}

}  // namespace

QAttentionFloat32Inputs::QAttentionFloat32Inputs(const QAttentionInputs& half) : inputs(half) {
  const std::pair<const TensorView**, Tensor*> staged[] = {{&inputs.bias, &bias_},
                                                           {&inputs.input_scale, &input_scale_},
                                                           {&inputs.weight_scale, &weight_scale_},
                                                           {&inputs.past, &past_}};
  for (int i = 0; i < 4; ++i) {
    const auto [view, wide] = staged[i];
    if (!*view || (*view)->dtype != DType::kFloat16) continue;
    wide->reset_uninitialized(DType::kFloat32, (*view)->shape);
    const uint16_t* from = (*view)->as<uint16_t>();
    float* to = wide->as<float>();
    for (int64_t e = 0; e < wide->elements(); ++e) to[e] = f16_to_float(from[e]);
    views_[i] = wide->view();
    *view = &views_[i];
  }
}

Tensor rounded_to_float16(const Tensor& wide) {
  Tensor half;
  half.reset_uninitialized(DType::kFloat16, wide.shape);
  const float* from = wide.as<float>();
  uint16_t* to = half.as<uint16_t>();
  for (int64_t i = 0; i < wide.elements(); ++i) to[i] = float_to_f16(from[i]);
  return half;
}

namespace {

// ORT's CPU EP has a float32 QAttention kernel only and runs a float16 node between casts (its
// InsertCastTransformer): bias, scales and past widened, output and present rounded to nearest even. So does
// this: the two then differ only where their float32 results do.
Status run_float16(const QAttentionProblem& p, const QAttentionAttributes& attrs, const QAttentionRequest& request,
                   QAttentionOutputs* outputs, const RunOptions& options) {
  const QAttentionInputs& in = *p.inputs;
  const uint64_t staging = qattention_float16_staging_bytes(p);
  const auto out_of_memory = [&] {
    return Status::OutOfMemory("out of memory: a float16 QAttention needs " + std::to_string(staging) +
                               " bytes of float32 copies");
  };
  if (staging > std::numeric_limits<size_t>::max() / 2) return out_of_memory();
  size_t inner_peak = 0;
  RunOptions inner = options;
  inner.peak_scratch_bytes = &inner_peak;
  try {
    QAttentionFloat32Inputs wide(in);
    QAttentionOutputs out32;
    ATTNKIT_RETURN_IF_ERROR(q_attention(wide.inputs, attrs, request, &out32, inner));
    outputs->output = rounded_to_float16(out32.output);
    outputs->present = request.present ? rounded_to_float16(out32.present) : Tensor();
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::length_error&) {  // a vector past its max_size (2 GiB on wasm32)
    return out_of_memory();
  }
  if (options.peak_scratch_bytes) *options.peak_scratch_bytes = inner_peak + static_cast<size_t>(staging);
  return Status::Ok();
}

bool inputs_view(const QAttentionInputs& in, const QAttentionOutputs& out) {
  return inputs_view_outputs({in.input, in.weight, in.bias, in.input_scale, in.weight_scale, in.mask_index,
                              in.input_zero_point, in.weight_zero_point, in.past},
                             {&out.output, &out.present});
}

}  // namespace

Status q_attention(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                   const QAttentionRequest& request, QAttentionOutputs* outputs, const RunOptions& options) {
  if (!outputs) return Status::Error("outputs must not be null");
  if (inputs_view(inputs, *outputs)) {  // see inputs_view_outputs
    QAttentionOutputs fresh;
    ATTNKIT_RETURN_IF_ERROR(q_attention(inputs, attrs, request, &fresh, options));
    *outputs = std::move(fresh);
    return Status::Ok();
  }
  QAttentionProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_qattention(inputs, attrs, request, &p));
  if (p.dtype == DType::kFloat16) return run_float16(p, attrs, request, outputs, options);
  return run_validated(p, request, outputs, options);
}

Status q_attention_in_place(const QAttentionInputs& inputs, const QAttentionAttributes& attrs,
                            QAttentionOutputs* outputs, const RunOptions& options, int64_t past_length) {
  if (!outputs) return Status::Error("outputs must not be null");
  if (inputs_view(inputs, *outputs)) {  // the past written in place may be the caller's own present: left as it is
    QAttentionOutputs fresh;
    ATTNKIT_RETURN_IF_ERROR(q_attention_in_place(inputs, attrs, &fresh, options, past_length));
    outputs->output = std::move(fresh.output);
    return Status::Ok();
  }
  QAttentionProblem p;
  // The in-place form requests present itself (validate_qattention).
  ATTNKIT_RETURN_IF_ERROR(
      validate_qattention(inputs, attrs, QAttentionRequest(), &p, /*in_place=*/true, past_length));
  return run_validated(p, p.request, outputs, options);
}

}  // namespace attnkit
