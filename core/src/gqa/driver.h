// attnkit: the GroupQueryAttention driver's internal stages and its tiling plan.
// gqa.cc orchestrates: build present (copy past, rotate and convert/quantize new rows), then attention
// (naive or flash, with split-KV decoding) over the kernel table, which loads and rotates query rows per tile.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dispatch.h"
#include "gqa/problem.h"

namespace attnkit {

// Flash rows share one SV call in runs of up to this many (a multiple of attention.cc's 12-row segments): only one
// run's scores are held, 192 KiB at 512-key blocks.
constexpr int64_t kFlashRunRows = 96;

// How the attention work is cut. Depends only on the problem (never on the thread count), so results
// are bit-identical for any number of threads.
struct GqaTiling {
  bool flash = true;
  int64_t query_rows = 0;    // Br: query positions per task (all G heads of a kv head share a task)
  int64_t task_rows = 0;     // M = G * Br: score rows per task
  int64_t kv_block = 0;      // Bc: keys per flash block
  int64_t score_rows = 0;    // score rows held at once: a flash SV run (kFlashRunRows) or the naive task's M
  int64_t v_widen_keys = 0;  // keys of V a prompt's worker converts to fp32 at once (0: the SV converts)
  int64_t panel_keys = 0;    // keys of K a worker packs into fp32 panels at once (0: it never packs)
  int64_t kv_chunk = 0;      // split-KV chunk for decoding (S == 1); 0 = no split
  int64_t kv_chunks = 1;     // chunks per (b, kv head) when split
  int64_t naive_span = 0;    // naive path: widest key span a task materializes
  // 64-bit on wasm32 too, where a prompt's naive scores can pass 4 GiB: the call checks the total before it
  // allocates (gqa_scratch_bytes), so every size taken from these then fits a size_t.
  uint64_t worker_floats = 0;  // per-thread scratch, in floats
  uint64_t shared_floats = 0;  // split-KV partials, in floats
};

// block_keys > 0 (RunOptions::flash_block_keys) replaces the planner's key block for prompts.
GqaTiling plan_gqa(const GqaProblem& p, bool flash, int64_t block_keys = 0);
// Score rows from which a flash tile packs each K block into fp32 panels instead of reading K directly.
int64_t packed_qk_min_rows(DType cache);
// The table's kernel converting a V block of this cache type to fp32 once per flash block, or nullptr.
SvWidenFn sv_widen_for(const SvGemmKernels& sv, DType cache);
// Bytes of scratch a call allocates with this plan on `threads` threads (excluding the outputs, but
// including a present cache built internally when the caller did not ask for it).
uint64_t gqa_scratch_bytes(const GqaProblem& p, const GqaTiling& tiling, int threads);
// The per-thread scratch buffers the attention allocates: one per thread that gets a task.
uint64_t gqa_attention_workers(const GqaProblem& p, const GqaTiling& tiling, int threads);
// Whether kAuto picks the flash path (everything but qk_output, which needs materialized scores).
bool gqa_uses_flash(const GqaProblem& p, AttentionPath path);

// Reads n elements of a float-like tensor (f32/f16/bf16) starting at element `offset` as fp32.
void load_float_row(const KernelTable& kt, const void* base, DType dtype, size_t offset, size_t n,
                    float* out);
// Writes n fp32 values into a float-like tensor at element `offset`, rounding to nearest even.
void store_float_row(const KernelTable& kt, const float* x, size_t n, DType dtype, void* base,
                     size_t offset);

// Asks the cache hierarchy for `bytes` bytes at `address` ahead of use (for_write: the lines will be
// overwritten). Strided head rows miss one by one otherwise; issuing a tile's rows together overlaps
// those misses.
void prefetch_bytes(const void* address, size_t bytes, bool for_write);
// Issues prefetch_bytes for the query row (b, head h, position s) that load_query_row reads.
void prefetch_query_row(const GqaProblem& p, int64_t b, int64_t h, int64_t s);

// Query row (b, head h, position s) as fp32, RMS-normalized (q_norm_weight) and rotated; rounded through T when
// T is 16-bit, as ORT stores the rotated query. `work` holds rotary_dim + head_size floats.
void load_query_row(const GqaProblem& p, const KernelTable& kt, int64_t b, int64_t h, int64_t s, float* row,
                    float* work);
// Writes the present cache per spec §2.6 into buffers of shape (B, Nk, Mp, row): past rows are copied
// unless the present IS the past (in place) or the attention tasks copy them (flash_tasks_copy_past), then the new
// rows are rotated and converted/quantized, and (separate buffers only) the rows past the new ones are zeroed.
void build_present(const GqaProblem& p, const KernelTable& kt, const GqaTiling& tiling, int threads, bool in_place,
                   uint8_t* present_key, uint8_t* present_value);
// Whether run_attention's flash tasks copy the past rows into a separate present themselves, block by block
// right before attending over them, so the past is read once: where one task holds all query rows of each
// (b, kv head), so no other task reads those rows.
bool flash_tasks_copy_past(const GqaProblem& p, const GqaTiling& tiling, bool in_place);
// Whether copies of the past into a separate present stream past the cache: where the present is larger than
// one core's L2. Where they do, the flash path reads the past where it lies (attention_reads_past), not the copy.
bool stream_past_rows(const GqaProblem& p);
bool attention_reads_past(const GqaProblem& p, const GqaTiling& tiling, bool in_place);
// build_present's two steps for one (b, kv head), for split-KV decoding to run chunk by chunk:
// fill_past_rows writes rows [r0, r1) below the past length (past rows copied by `copy`, missing ones zeroed);
// write_new_rows the new rows and, for separate buffers, the zeros after them.
using CopyRowsFn = void (*)(uint8_t* dst, const uint8_t* src, size_t bytes);
void fill_past_rows(const GqaProblem& p, int64_t b, int64_t g, int64_t r0, int64_t r1, uint8_t* present_key,
                    uint8_t* present_value, CopyRowsFn copy);
void write_new_rows(const GqaProblem& p, const KernelTable& kt, bool in_place, int64_t b, int64_t g,
                    uint8_t* present_key, uint8_t* present_value);
// Attention over the present cache into outputs->output (and output_qk when requested). Split-KV decoding
// (tiling.kv_chunk > 0) builds the present itself, each chunk right before attending over it, so the past
// is read once, and so do flash tasks where flash_tasks_copy_past; otherwise build_present has run.
void run_attention(const GqaProblem& p, const KernelTable& kt, const GqaTiling& tiling, int threads,
                   uint8_t* present_key, uint8_t* present_value, GqaOutputs* outputs, bool in_place);

}  // namespace attnkit
