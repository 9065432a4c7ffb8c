// attnkit: what the GroupQueryAttention attention tasks share (attention.cc: naive and flash tasks over row tiles;
// split_kv.cc: decoding split into key chunks merged by log-sum-exp): the call's context, the per-thread scratch,
// the tiles, and the task steps both files run.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "gqa/driver.h"

namespace attnkit {
namespace gqa_attention {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scratch is written before it is read, so it comes unzeroed from the tensor pool: per-call mmaps,
// page faults and zero-fills of a few hundred KiB otherwise cost more than a short decode step.
using ScratchFloats = std::vector<float, TensorAllocator<float>>;

// Everything a task needs that is the same for all tasks of the call.
struct AttentionContext {
  const GqaProblem& p;
  const KernelTable& kt;
  const GqaTiling& t;
  GqaOutputs* outputs;
  size_t row_bytes = 0;
  QkGemmFn qk_direct = nullptr;
  QkPackFn qk_pack = nullptr;
  SvGemmFn sv = nullptr;
  // For the keys below finite_keys() (else the three above).
  QkGemmFn qk_direct_finite = nullptr;
  QkPackFn qk_pack_finite = nullptr;
  SvGemmFn sv_finite = nullptr;
  SvWidenFn sv_widen = nullptr;  // when the tiling widens V (v_widen_keys > 0)
  SvWidenFn sv_widen_finite = nullptr;
  int64_t packed_min_rows = 0;   // tiles of this many rows or more pack K (above)
  float alpha = 1.0f;            // score scale with a per-tensor K scale folded in
  const float* v_scale = nullptr;  // per kv head and channel (Nk*H) when V is quantized
  const float* sink = nullptr;     // per query head when a sink is used (0 for smooth softmax)
  // The cache the tasks attend over, and the tiles' count of query row blocks per (b, kv head).
  uint8_t* present_key = nullptr;
  uint8_t* present_value = nullptr;
  int64_t query_blocks = 0;
  // Where the tasks copy their (b, kv head)'s past rows into a separate present: the present buffers.
  uint8_t* copy_key_into = nullptr;
  uint8_t* copy_value_into = nullptr;
  bool read_past = false;  // attention_reads_past (see block_rows)
};

// Per-thread scratch carved out of one buffer.
struct Scratch {
  float* q_tile;   // M x H query rows (per-channel K scales folded in)
  float* o_tile;   // M x H output accumulator
  float* scores;   // score_rows x span
  float* row_max;  // M
  float* row_sum;  // M
  float* panels;   // packed K block
  float* v_block;  // a prompt's V block in fp32 (v_widen_keys x H)
  float* block_sums;  // score_rows x H: one key block's P . V before it joins o_tile (add_block_values)
  float* bias;     // one bias row segment
  float* work;     // the query row loader's work area
  size_t span;
};

// buf was sized before the parallel region: an allocation failure must not happen on a worker.
Scratch carve(const GqaTiling& t, int64_t H, ScratchFloats& buf);

// One task's rows: query positions [i0, i1) of entry b, all G heads of kv head g, and the cache
// rows of that (b, g): the present's, and where blocks may read the caller's past instead, its first past_rows.
struct Tile {
  int64_t b, g, i0, i1;
  const uint8_t* k;
  const uint8_t* v;
  const uint8_t* past_k = nullptr;
  const uint8_t* past_v = nullptr;
  int64_t past_rows = 0;
  int64_t rows() const { return i1 - i0; }
};

// Tile `index` of the call: (b, kv head) major, later query blocks first (they see more keys under a causal
// mask, so handing them out first balances the threads' tails).
Tile tile_of(const AttentionContext& c, int64_t index);
// The union of the keys the tile's rows see; empty (lo == hi) when none see any.
void task_key_range(const GqaProblem& p, const Tile& tile, int64_t* lo_out, int64_t* hi_out);
// The tile's query rows, G heads stacked, into s.q_tile.
void load_q_tile(const AttentionContext& c, const Tile& tile, const Scratch& s);
// Flash: online softmax over keys [c0, c1) of the task's visible range, in blocks of kv_block keys.
// Leaves the unnormalized output in o_tile and the running max/sum in row_max/row_sum.
void flash_rows(const AttentionContext& c, Scratch& s, const Tile& tile, int64_t c0, int64_t c1,
                bool start_with_sink);
// Past rows [r0, r1) that no query row of the task reads: copied into a separate present, if the tasks copy.
void copy_unread_past(const AttentionContext& c, const Tile& tile, int64_t r0, int64_t r1);
// Scales an output row and writes it to output[b, i, h*H : (h+1)*H] in the query dtype.
void write_output_row(const AttentionContext& c, const Tile& tile, int64_t hh, int64_t i, float* o, float inv_sum);

// Split-KV decoding of `tiles` tiles (split_kv.cc): every chunk of every tile, then each tile's merge.
void run_split_kv(const AttentionContext& c, size_t tiles, int threads, bool in_place,
                  std::vector<ScratchFloats>& scratch);

}  // namespace gqa_attention
}  // namespace attnkit
