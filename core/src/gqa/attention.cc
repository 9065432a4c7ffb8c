// attnkit: the attention stage of GroupQueryAttention over the present cache, naive and flash.
// A task is (batch, kv head, block of query rows): the G query heads sharing a kv head are stacked into one row
// tile so every K/V byte is read once per task. Flash keeps a running (max, sum, unnormalized output) per row;
// decoding with few tiles for the threads splits the keys into chunks instead (split_kv.cc).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/thread_pool.h"
#include "gqa/attention_tasks.h"
#include "softmax/exp_poly.h"  // not std::exp: the C runtimes' expf differ in the last bit

namespace attnkit {
namespace gqa_attention {

// Scores at or below this (a -inf mask, or the lowest float that exporters add as finfo.min) are masked. A row
// with no score above it is fully masked: probability 0 everywhere and an output of 0, the answer of ORT's fp32
// and quantized flash paths (its naive path, which it takes for fp16, softcap or a single key, gives NaN).
constexpr float kMaskedScore = std::numeric_limits<float>::lowest();

// Whether scores whose max is at or below kMaskedScore are all masked: reduce_max skips a NaN after the first
// element, and a NaN score must still reach the output.
bool all_masked(const float* x, size_t n) {
  return std::all_of(x, x + n, [](float v) { return v <= kMaskedScore; });
}

// A head's sink acts as one more key with a zero value. A -inf sink is no key at all; a +inf or NaN one makes the
// row NaN (exp(s - max) is NaN), as in ORT and the reference, masked keys or not.
bool sink_is_nan_source(float sink) { return !(sink < std::numeric_limits<float>::infinity()); }

Scratch carve(const GqaTiling& t, int64_t H, ScratchFloats& buf) {
  const size_t M = static_cast<size_t>(t.task_rows);
  const size_t span = static_cast<size_t>(t.flash ? t.kv_block : t.naive_span);
  Scratch s;
  float* at = buf.data();
  s.q_tile = at; at += M * H;
  s.o_tile = at; at += M * H;
  s.scores = at; at += static_cast<size_t>(t.score_rows) * span;
  s.row_max = at; at += M;
  s.row_sum = at; at += M;
  s.panels = at; at += static_cast<size_t>(t.panel_keys * H);
  s.v_block = at; at += static_cast<size_t>(t.v_widen_keys * H);
  s.block_sums = at; at += static_cast<size_t>(t.score_rows * H);
  s.bias = at; at += span;
  s.work = at;
  s.span = span;
  return s;
}

Tile tile_of(const AttentionContext& c, int64_t index) {
  const GqaProblem& p = c.p;
  const int64_t blk = c.query_blocks - 1 - index % c.query_blocks, bg = index / c.query_blocks;
  const int64_t b = bg / p.kv_heads, query_rows = c.t.query_rows;
  const size_t base = static_cast<size_t>(bg * p.present_len) * c.row_bytes;  // rows of (b, g) start at bg * Mp
  Tile tile{b, bg % p.kv_heads, blk * query_rows, std::min(p.seq, (blk + 1) * query_rows), c.present_key + base,
            c.present_value + base};
  if (c.read_past) {
    const size_t past_base = static_cast<size_t>(bg * p.past_capacity + p.past_src[b]) * c.row_bytes;
    tile.past_k = p.inputs->past_key->as<uint8_t>() + past_base;
    tile.past_v = p.inputs->past_value->as<uint8_t>() + past_base;
    tile.past_rows = std::min(p.past_len[b], p.past_capacity);
  }
  return tile;
}

bool approx_vnni_requested() {
  static const bool on = [] {
    const char* v = std::getenv("ATTNKIT_QKGEMM_S8_APPROX_VNNI");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// Keys [j0, j0 + n) of a tile, where the kernels read them.
struct BlockRows {
  const uint8_t* k;
  const uint8_t* v;
};

// Where the tasks copy the past into the present, a block's past rows are copied right before it is attended
// over, so the past is read from memory once. Where the attention reads the past where it lies (read_past), a
// block wholly inside it is read there, and its copy streams the present past the cache (two bytes of memory
// traffic per byte, not three); the block holding the new rows reads the present, copied with ordinary stores so
// that it is in cache too. Both hold the same bytes: the bits do not depend on which is read.
BlockRows block_rows(const AttentionContext& c, const Tile& tile, int64_t j0, int64_t n) {
  const size_t at = static_cast<size_t>(j0) * c.row_bytes;
  const bool from_past = c.read_past && j0 + n <= tile.past_rows;
  if (c.copy_key_into)
    fill_past_rows(c.p, tile.b, tile.g, j0, j0 + n, c.copy_key_into, c.copy_value_into,
                   from_past ? c.kt.kv.copy_streaming : copy_streaming_memcpy);
  if (from_past) return {tile.past_k + at, tile.past_v + at};
  return {tile.k + at, tile.v + at};
}

void copy_unread_past(const AttentionContext& c, const Tile& tile, int64_t r0, int64_t r1) {
  if (!c.copy_key_into) return;
  fill_past_rows(c.p, tile.b, tile.g, r0, r1, c.copy_key_into, c.copy_value_into,
                 c.read_past ? c.kt.kv.copy_streaming : copy_streaming_memcpy);
}

// Keys [0, finite_keys) of entry b are past rows known to hold no fp16 inf or NaN (GqaKvCache's): the kernels'
// finite forms read them, the exact ones the rest (the step's new rows). Each score, and each output's chain over
// the keys, is the same whether the kernels read a key range in one call or in two, so the split leaves the bits.
int64_t finite_keys(const AttentionContext& c, int64_t b) { return c.p.past_f16_finite ? c.p.past_len[b] : 0; }

// The part of keys [key0, key0 + n) below finite_keys, where the finite kernel differs from the exact one.
template <class Fn>
size_t finite_part(const AttentionContext& c, Fn finite, Fn exact, int64_t b, int64_t key0, int64_t n) {
  return finite == exact ? 0 : static_cast<size_t>(std::clamp<int64_t>(finite_keys(c, b) - key0, 0, n));
}

// scores[r * ldc + j] = alpha * q_r . k_(key0 + j) for j < n, reading the cache rows directly.
void direct_scores(const AttentionContext& c, int64_t b, int64_t key0, size_t M, size_t n, const float* Q,
                   const uint8_t* K, float* scores, size_t ldc) {
  const size_t H = static_cast<size_t>(c.p.head_size);
  const size_t split = finite_part(c, c.qk_direct_finite, c.qk_direct, b, key0, static_cast<int64_t>(n));
  if (split > 0) c.qk_direct_finite(M, split, H, Q, H, K, c.row_bytes, c.alpha, scores, ldc);
  if (split < n)
    c.qk_direct(M, n - split, H, Q, H, K + split * c.row_bytes, c.row_bytes, c.alpha, scores + split, ldc);
}

void pack_keys(const AttentionContext& c, const Scratch& s, int64_t b, int64_t key0, size_t n, const uint8_t* K) {
  const bool finite = key0 + static_cast<int64_t>(n) <= finite_keys(c, b);
  (finite ? c.qk_pack_finite : c.qk_pack)(n, static_cast<size_t>(c.p.head_size), K, c.row_bytes, s.panels);
}

// s.v_block = keys [key0, key0 + n) of V in fp32 (rows of H).
void widen_values(const AttentionContext& c, const Scratch& s, int64_t b, int64_t key0, size_t n, const uint8_t* V) {
  const size_t H = static_cast<size_t>(c.p.head_size);
  const size_t split = finite_part(c, c.sv_widen_finite, c.sv_widen, b, key0, static_cast<int64_t>(n));
  if (split > 0) c.sv_widen_finite(split, H, V, c.row_bytes, s.v_block);
  if (split < n) c.sv_widen(n - split, H, V + split * c.row_bytes, c.row_bytes, s.v_block + split * H);
}

// O (M rows of H) = (accumulate ? O : 0) + P * V over keys [key0, key0 + n).
void accumulate_values(const AttentionContext& c, int64_t b, int64_t key0, size_t M, size_t n, const float* P,
                       size_t ldp, const uint8_t* V, float* O, bool accumulate) {
  const size_t H = static_cast<size_t>(c.p.head_size);
  const size_t split = finite_part(c, c.sv_finite, c.sv, b, key0, static_cast<int64_t>(n));
  if (split > 0) c.sv_finite(M, split, H, P, ldp, V, c.row_bytes, O, H, accumulate);
  if (split == 0 || split < n)  // with no keys at all, the exact kernel zeroes O (or keeps it)
    c.sv(M, n - split, H, P + split, ldp, V + split * c.row_bytes, c.row_bytes, O, H, accumulate || split > 0);
}

// O (rows x H) = one key block's P . V where `first`, else O += it; sv_into(out) writes that product into out
// (stride H). A single fp32 chain of multiply-adds over a long context rounds by about sqrt(n) ulps of the output's
// scale, so a later block's sums start from zero in s.block_sums and only then join O: about sqrt(block) +
// sqrt(blocks) ulps instead. Four query rows after 131,068 int8 keys (N=32, Nk=8, H=128): 1.8e-7 from the fp64
// reference at an output peak of 1.2e-2 (ORT 1.31.1: 1.7e-7), now 1.1e-8; the added pass costs one add per output
// element and block.
template <class SvInto>
void add_block_values(const AttentionContext& c, const Scratch& s, size_t rows, float* O, bool first,
                      SvInto&& sv_into) {
  sv_into(first ? O : s.block_sums);
  if (!first) c.kt.softmax.add(O, s.block_sums, rows * static_cast<size_t>(c.p.head_size));
}

void load_q_tile(const AttentionContext& c, const Tile& tile, const Scratch& s) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, nq = tile.rows();
  for (int64_t hh = 0; hh < p.group; ++hh)
    for (int64_t i = tile.i0; i < tile.i1; ++i) prefetch_query_row(p, tile.b, tile.g * p.group + hh, i);
  for (int64_t hh = 0; hh < p.group; ++hh) {
    const int64_t h = tile.g * p.group + hh;
    for (int64_t i = tile.i0; i < tile.i1; ++i) {
      float* dst = s.q_tile + (hh * nq + (i - tile.i0)) * H;
      load_query_row(p, c.kt, tile.b, h, i, dst, s.work);
      if (p.quant == KvQuant::kPerChannel) {
        // Folding the K scale into the query keeps the integer-to-float step of the GEMM exact.
        const float* ks = p.inputs->k_scale->as<float>() + tile.g * H;
        for (int64_t d = 0; d < H; ++d) dst[d] *= ks[d];
      }
    }
  }
}

// scores[r * ld + (j - j0)] = alpha * q_r . k_j for keys [j0, j0 + n).
void compute_scores(const AttentionContext& c, const Scratch& s, const Tile& tile, int64_t M, int64_t j0,
                    int64_t n, float* scores, size_t ld) {
  const int64_t H = c.p.head_size, Bc = c.t.kv_block;
  for (int64_t b0 = 0; b0 < n; b0 += Bc) {
    const int64_t nb = std::min(Bc, n - b0);
    const uint8_t* k = tile.k + static_cast<size_t>(j0 + b0) * c.row_bytes;
    if (M >= c.packed_min_rows) {
      pack_keys(c, s, tile.b, j0 + b0, nb, k);
      c.kt.qk.packed(M, nb, H, s.q_tile, H, s.panels, c.alpha, scores + b0, ld);
    } else {
      direct_scores(c, tile.b, j0 + b0, M, nb, s.q_tile, k, scores + b0, ld);
    }
  }
}

// Applies softcap and bias to a row's visible keys [a, e) held at x[0, e - a); returns the bias row
// segment used (or nullptr).
void transform_scores(const AttentionContext& c, const Scratch& s, int64_t b, int64_t h, int64_t i,
                      int64_t a, int64_t e, float* x) {
  const GqaProblem& p = c.p;
  const size_t n = static_cast<size_t>(e - a);
  if (p.softcap > 0.0f) c.kt.softmax.softcap(x, n, p.softcap);
  if (p.inputs->attention_bias) {
    const int64_t bb = p.bias_batch == 1 ? 0 : b, bh = p.bias_heads == 1 ? 0 : h;
    const size_t offset =
        static_cast<size_t>(((bb * p.bias_heads + bh) * p.seq + i) * p.total + p.key_position[b] + a);
    load_float_row(c.kt, p.inputs->attention_bias->data, p.dtype, offset, n, s.bias);
    for (size_t k = 0; k < n; ++k) x[k] += s.bias[k];
  }
}

void write_output_row(const AttentionContext& c, const Tile& tile, int64_t hh, int64_t i, float* o, float inv_sum) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, h = tile.g * p.group + hh;
  if (inv_sum == 0.0f) {
    // A fully masked row is 0 whatever its value rows hold: the SV multiplied its zero probabilities into them
    // (0 x NaN is NaN), so the sum is not scaled but dropped.
    std::fill(o, o + H, 0.0f);
  } else if (c.v_scale) {
    const float* vs = c.v_scale + tile.g * H;
    for (int64_t d = 0; d < H; ++d) o[d] *= inv_sum * vs[d];
  } else {
    c.kt.softmax.scale(o, static_cast<size_t>(H), inv_sum);
  }
  store_float_row(c.kt, o, H, p.dtype, c.outputs->output.storage.data(),
                  static_cast<size_t>(((tile.b * p.seq + i) * p.heads + h) * H));
}

// The output rows a task writes are strided (one head of each position): fetching them for write
// together keeps their misses in flight at once.
void prefetch_output_rows(const AttentionContext& c, const Tile& tile) {
  const GqaProblem& p = c.p;
  const size_t elem = dtype_size(p.dtype), row = static_cast<size_t>(p.head_size) * elem;
  for (int64_t hh = 0; hh < p.group; ++hh)
    for (int64_t i = tile.i0; i < tile.i1; ++i) {
      const int64_t h = tile.g * p.group + hh;
      prefetch_bytes(c.outputs->output.storage.data() + static_cast<size_t>(((tile.b * p.seq + i) * p.heads + h)) * row,
                     row, true);
    }
}

void write_qk_row(const AttentionContext& c, const Tile& tile, int64_t hh, int64_t i, int64_t j0,
                  const float* row, int64_t n) {
  const GqaProblem& p = c.p;
  const int64_t h = tile.g * p.group + hh;
  const size_t offset = static_cast<size_t>(((tile.b * p.heads + h) * p.seq + i) * p.total + j0);
  store_float_row(c.kt, row, n, p.dtype, c.outputs->output_qk.storage.data(), offset);
}

void task_key_range(const GqaProblem& p, const Tile& tile, int64_t* lo_out, int64_t* hi_out) {
  int64_t kv_lo = std::numeric_limits<int64_t>::max(), kv_hi = 0;
  for (int64_t i = tile.i0; i < tile.i1; ++i) {
    int64_t lo, hi;
    p.visible_keys(tile.b, i, &lo, &hi);
    kv_lo = std::min(kv_lo, lo);
    kv_hi = std::max(kv_hi, hi);
  }
  *lo_out = kv_lo;
  *hi_out = std::max(kv_hi, kv_lo);
}

// Naive: materializes the task's score rows over its whole key span, then one softmax, then SV by key blocks.
void naive_task(const AttentionContext& c, Scratch& s, const Tile& tile) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, nq = tile.rows(), M = p.group * nq;
  int64_t kv_lo, kv_hi;
  task_key_range(p, tile, &kv_lo, &kv_hi);
  const int64_t span = kv_hi - kv_lo;
  load_q_tile(c, tile, s);
  compute_scores(c, s, tile, M, kv_lo, span, s.scores, s.span);
  for (int64_t r = 0; r < M; ++r) {
    const int64_t hh = r / nq, i = tile.i0 + r % nq, h = tile.g * p.group + hh;
    float* row = s.scores + r * s.span;
    int64_t lo, hi;
    p.visible_keys(tile.b, i, &lo, &hi);
    float* vis = row + (lo - kv_lo);
    const size_t n = static_cast<size_t>(std::max<int64_t>(0, hi - lo));
    std::fill(row, vis, 0.0f);
    std::fill(vis + n, row + span, 0.0f);
    float inv_sum = 0.0f;
    if (n > 0) {
      transform_scores(c, s, tile.b, h, i, lo, hi, vis);
      if (p.qk_output == 1 && p.request.output_qk) write_qk_row(c, tile, hh, i, kv_lo, row, span);
      float m = c.kt.softmax.reduce_max(vis, n);
      const bool sink = p.use_sink;
      if (m <= kMaskedScore && all_masked(vis, n) && !(sink && sink_is_nan_source(c.sink[h]))) {
        std::fill(vis, vis + n, 0.0f);  // fully masked (a sink's own term would be all of the sum: the same zeros)
      } else {
        if (sink) m = std::max(m, c.sink[h]);
        float sum = c.kt.softmax.exp_sum(vis, n, m);
        if (sink) sum += exp_poly::exp(c.sink[h] - m);
        c.kt.softmax.scale(vis, n, 1.0f / sum);
        inv_sum = 1.0f;
      }
      if (p.qk_output == 2 && p.request.output_qk) write_qk_row(c, tile, hh, i, kv_lo, row, span);
    }
    s.row_sum[r] = inv_sum;
  }
  for (int64_t j = 0; j == 0 || j < span; j += c.t.kv_block) {  // no keys at all: one call zeroes the outputs
    const int64_t n = std::min(c.t.kv_block, span - j);
    add_block_values(c, s, static_cast<size_t>(M), s.o_tile, j == 0, [&](float* out) {
      accumulate_values(c, tile.b, kv_lo + j, static_cast<size_t>(M), static_cast<size_t>(n), s.scores + j, s.span,
                        tile.v + static_cast<size_t>(kv_lo + j) * c.row_bytes, out, false);
    });
  }
  for (int64_t r = 0; r < M; ++r)
    write_output_row(c, tile, r / nq, tile.i0 + r % nq, s.o_tile + r * H, s.row_sum[r]);
}

// Flash rows are processed in segments of this many: a multiple of the x86 packed/SV micro-kernels'
// row tiles (6 rows on AVX512 and AVX2). Each segment multiplies only the keys one of its rows sees, so
// on the causal diagonal (and at a window's start) the masked corners are skipped, not computed.
constexpr int64_t kRowSegment = 12;
// Consecutive segments that see the same keys share one SV call of up to kFlashRunRows rows (their scores stay in
// L2). wasm, one thread, prefill S=T=512, old and new modules alternating, when its SV still converted V in every
// call: int8 34.2-35.0 -> 32.7-33.6 ms, int4 35.9-36.7 -> 33.6-34.3; 48-row runs gained half as much.
static_assert(kFlashRunRows % kRowSegment == 0, "a run is whole segments");

// Keys [j0, j0 + n) of one segment's rows r0..r1: the online-softmax update of those rows. Their score
// rows at scores + (r - r0)*span hold alpha * q.k for block keys [k0, k1) (relative to j0), the union of the
// rows' visible keys; each row's masked keys inside it become probability 0 for the SV product.
void flash_segment_softmax(const AttentionContext& c, Scratch& s, const Tile& tile, int64_t r0, int64_t r1,
                           int64_t j0, int64_t n, int64_t k0, int64_t k1, float* scores) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, nq = tile.rows();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i = tile.i0 + r % nq, h = tile.g * p.group + r / nq;
    float* row = scores + (r - r0) * s.span;
    int64_t lo, hi;
    p.visible_keys(tile.b, i, &lo, &hi);
    const int64_t a = std::max(lo, j0), e = std::min(hi, j0 + n);
    if (a >= e) {
      std::fill(row + k0, row + k1, 0.0f);
      continue;
    }
    float* vis = row + (a - j0);
    std::fill(row + k0, vis, 0.0f);
    std::fill(row + (e - j0), row + k1, 0.0f);
    transform_scores(c, s, tile.b, h, i, a, e, vis);
    const size_t count = static_cast<size_t>(e - a);
    const float block_max = c.kt.softmax.reduce_max(vis, count);
    if (block_max <= kMaskedScore && all_masked(vis, count)) {  // every key here is masked: it adds nothing
      std::fill(vis, vis + count, 0.0f);
      continue;
    }
    const float m_new = std::max(s.row_max[r], block_max);
    if (s.row_max[r] != kNegInf && m_new > s.row_max[r]) {
      const float factor = exp_poly::exp(s.row_max[r] - m_new);
      c.kt.softmax.scale(s.o_tile + r * H, static_cast<size_t>(H), factor);
      s.row_sum[r] *= factor;
    }
    const float block_sum = c.kt.softmax.exp_sum(vis, count, m_new);
    s.row_sum[r] += block_sum;
    // A NaN score makes the block's sum NaN, and the running max must carry it: reduce_max returns it only where it
    // comes first, and a max left at -inf would mark a split-KV chunk as empty (dropped) instead.
    s.row_max[r] = std::isnan(block_sum) ? block_sum : m_new;
  }
}

// Rows [r0, r1) of a flash task whose SV waits for one call over block keys [k0, k1).
struct SvRun {
  int64_t r0 = 0, r1 = 0, k0 = 0, k1 = 0;
};

void flash_rows(const AttentionContext& c, Scratch& s, const Tile& tile, int64_t c0, int64_t c1,
                bool start_with_sink) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, nq = tile.rows(), M = p.group * nq, Bc = c.t.kv_block;
  for (int64_t r = 0; r < M; ++r) {
    const int64_t h = tile.g * p.group + r / nq;
    // A sink acts as one extra key with score s and a zero value: it starts the running state (exp(s - s)).
    const float sink = start_with_sink ? c.sink[h] : kNegInf;
    s.row_max[r] = sink;
    s.row_sum[r] = sink == kNegInf ? 0.0f : sink_is_nan_source(sink) ? std::numeric_limits<float>::quiet_NaN() : 1.0f;
  }
  std::fill(s.o_tile, s.o_tile + M * H, 0.0f);
  // Few rows (decoding) read the cache rows directly; more rows amortize packing K once per block.
  const bool packed = M >= c.packed_min_rows;
  // Where the tiling says so, a prompt converts each V block once for all its SV calls.
  const bool widened = c.t.v_widen_keys > 0 && M > kRowSegment;
  for (int64_t j0 = c0; j0 < c1; j0 += Bc) {
    const int64_t n = std::min(Bc, c1 - j0);
    const BlockRows block = block_rows(c, tile, j0, n);
    const uint8_t* k = block.k;
    if (packed) {
      // SV first reads the block's V rows a column tile at a time, a strided pattern the hardware
      // prefetchers follow poorly from L3; ask for them into L2 while K is scored (after the packing, so they
      // do not queue ahead of the packer's own loads of K).
      pack_keys(c, s, tile.b, j0, n, k);
      const char* v = reinterpret_cast<const char*>(block.v);
      for (size_t at = 0; at < static_cast<size_t>(n) * c.row_bytes; at += 64) __builtin_prefetch(v + at, 0, 2);
    }
    if (widened) widen_values(c, s, tile.b, j0, static_cast<size_t>(n), block.v);
    // SV runs once per run of segments (kFlashRunRows), whose scores are held from s.scores on: every output is the
    // same chain over the same keys, so the bits do not depend on how rows are grouped.
    SvRun run;
    // The first block writes its sums into the zeroed output rows; later ones add theirs (add_block_values).
    const bool first = j0 == c0;
    const auto flush = [&] {
      const size_t rows = static_cast<size_t>(run.r1 - run.r0), keys = static_cast<size_t>(run.k1 - run.k0);
      if (rows > 0) {
        add_block_values(c, s, rows, s.o_tile + run.r0 * H, first, [&](float* out) {
          if (widened)
            c.kt.sv.f32(rows, keys, static_cast<size_t>(H), s.scores + run.k0, s.span,
                        reinterpret_cast<const uint8_t*>(s.v_block + run.k0 * H),
                        static_cast<size_t>(H) * sizeof(float), out, static_cast<size_t>(H), false);
          else
            accumulate_values(c, tile.b, j0 + run.k0, rows, keys, s.scores + run.k0, s.span,
                              block.v + static_cast<size_t>(run.k0) * c.row_bytes, out, false);
        });
      }
      run = SvRun();
    };
    for (int64_t r0 = 0; r0 < M; r0 += kRowSegment) {
      const int64_t r1 = std::min(M, r0 + kRowSegment);
      // Keys [k0, k1) of the block that some row of the segment sees.
      int64_t k0 = n, k1 = 0;
      for (int64_t r = r0; r < r1; ++r) {
        int64_t lo, hi;
        p.visible_keys(tile.b, tile.i0 + r % nq, &lo, &hi);
        const int64_t a = std::max(lo, j0) - j0, e = std::min(hi, j0 + n) - j0;
        if (a < e) {
          k0 = std::min(k0, a);
          k1 = std::max(k1, e);
        }
      }
      if (k0 >= k1) continue;  // the whole segment is masked here: its running state stays as is
      if (run.r1 != r0 || run.k0 != k0 || run.k1 != k1 || r0 - run.r0 >= kFlashRunRows) {
        flush();
        run = SvRun{r0, r0, k0, k1};
      }
      const int64_t rows = r1 - r0;
      float* scores = s.scores + (r0 - run.r0) * s.span;
      if (packed) {
        // Packed panels start every 16 keys: the segment's first panel holds k0.
        const int64_t p0 = k0 / static_cast<int64_t>(kQkPanelKeys) * static_cast<int64_t>(kQkPanelKeys);
        c.kt.qk.packed(rows, k1 - p0, H, s.q_tile + r0 * H, H, s.panels + p0 * H, c.alpha, scores + p0, s.span);
      } else {
        direct_scores(c, tile.b, j0 + k0, rows, k1 - k0, s.q_tile + r0 * H, k + k0 * c.row_bytes, scores + k0,
                      s.span);
      }
      flash_segment_softmax(c, s, tile, r0, r1, j0, n, k0, k1, scores);
      run.r1 = r1;
    }
    flush();
  }
}

void flash_task(const AttentionContext& c, Scratch& s, const Tile& tile) {
  const int64_t H = c.p.head_size, nq = tile.rows(), M = c.p.group * nq;
  int64_t kv_lo, kv_hi;
  task_key_range(c.p, tile, &kv_lo, &kv_hi);
  load_q_tile(c, tile, s);
  flash_rows(c, s, tile, kv_lo, kv_hi, c.p.use_sink);
  copy_unread_past(c, tile, 0, kv_lo);
  copy_unread_past(c, tile, kv_hi, c.p.past_len[tile.b]);
  prefetch_output_rows(c, tile);
  for (int64_t r = 0; r < M; ++r) {
    const float sum = s.row_sum[r];
    write_output_row(c, tile, r / nq, tile.i0 + r % nq, s.o_tile + r * H, sum == 0.0f ? 0.0f : 1.0f / sum);
  }
}

}  // namespace gqa_attention

using namespace gqa_attention;

void run_attention(const GqaProblem& p, const KernelTable& kt, const GqaTiling& t, int threads,
                   uint8_t* present_key, uint8_t* present_value, GqaOutputs* outputs, bool in_place) {
  AttentionContext c{p, kt, t, outputs};
  c.row_bytes = static_cast<size_t>(p.cache_row_bytes);
  c.packed_min_rows = packed_qk_min_rows(p.cache_dtype);
  c.alpha = p.alpha;
  c.present_key = present_key;
  c.present_value = present_value;
  c.query_blocks = (p.seq + t.query_rows - 1) / t.query_rows;
  // Split-KV decoding copies each chunk's past rows itself, and so do flash tasks where flash_tasks_copy_past.
  if (!in_place && (t.kv_chunk > 0 || flash_tasks_copy_past(p, t, in_place))) {
    c.copy_key_into = present_key;
    c.copy_value_into = present_value;
  }
  c.read_past = attention_reads_past(p, t, in_place);
  switch (p.cache_dtype) {
    case DType::kFloat16: c.qk_direct = kt.qk.f16; c.qk_pack = kt.qk.pack_f16; c.sv = kt.sv.f16; break;
    case DType::kBFloat16: c.qk_direct = kt.qk.bf16; c.qk_pack = kt.qk.pack_bf16; c.sv = kt.sv.bf16; break;
    case DType::kInt8: c.qk_direct = kt.qk.s8; c.qk_pack = kt.qk.pack_s8; c.sv = kt.sv.s8; break;
    case DType::kUInt8: c.qk_direct = kt.qk.s4; c.qk_pack = kt.qk.pack_s4; c.sv = kt.sv.s4; break;
    default: c.qk_direct = kt.qk.f32; c.qk_pack = kt.qk.pack_f32; c.sv = kt.sv.f32; break;
  }
  c.qk_direct_finite = c.qk_direct;
  c.qk_pack_finite = c.qk_pack;
  c.sv_finite = c.sv;
  c.sv_widen = c.sv_widen_finite = sv_widen_for(kt.sv, p.cache_dtype);
  if (p.cache_dtype == DType::kFloat16 && p.past_f16_finite) {
    c.qk_direct_finite = kt.qk.f16_finite;
    c.qk_pack_finite = kt.qk.pack_f16_finite;
    c.sv_finite = kt.sv.f16_finite;
    c.sv_widen_finite = kt.sv.widen_f16_finite;
  }
  if (p.quant == KvQuant::kPerTensor) c.alpha *= p.inputs->k_scale->as<float>()[0];
  if (p.quant == KvQuant::kPerTensor && p.bits == 8 && approx_vnni_requested() && kt.qk.s8_approx_vnni)
    c.qk_direct = kt.qk.s8_approx_vnni;
  std::vector<float> v_scale, sink;
  if (p.quant != KvQuant::kNone) {
    const float* vs = p.inputs->v_scale->as<float>();
    v_scale.resize(static_cast<size_t>(p.kv_heads * p.head_size));
    for (size_t k = 0; k < v_scale.size(); ++k) v_scale[k] = p.quant == KvQuant::kPerChannel ? vs[k] : vs[0];
    c.v_scale = v_scale.data();
  }
  if (p.use_sink) {
    sink.assign(static_cast<size_t>(p.heads), 0.0f);
    if (p.inputs->head_sink) load_float_row(kt, p.inputs->head_sink->data, p.dtype, 0, p.heads, sink.data());
    c.sink = sink.data();
  }

  const int64_t H = p.head_size;
  const size_t tiles = static_cast<size_t>(p.batch * p.kv_heads * c.query_blocks);
  std::vector<ScratchFloats> scratch(static_cast<size_t>(gqa_attention_workers(p, t, threads)));
  for (auto& buf : scratch) buf.resize(static_cast<size_t>(t.worker_floats));

  if (t.kv_chunk > 0) return run_split_kv(c, tiles, threads, in_place, scratch);
  parallel_for(tiles, threads, [&](size_t task, int worker) {
    Scratch s = carve(t, H, scratch[worker]);
    const Tile tile = tile_of(c, static_cast<int64_t>(task));
    if (t.flash) flash_task(c, s, tile);
    else naive_task(c, s, tile);
  });
}

}  // namespace attnkit
