// attnkit: split-KV decoding for GroupQueryAttention. With few (b, kv head) tiles for the threads, a decode step's
// keys are cut into fixed chunks (never thread-dependent ones, so the bits are the same on any thread count); each
// chunk task leaves a partial (max, sum, unnormalized output), and the tile's last chunk to finish merges them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/thread_pool.h"
#include "gqa/attention_tasks.h"
#include "softmax/exp_poly.h"  // not std::exp: the C runtimes' expf differ in the last bit

namespace attnkit {
namespace gqa_attention {
namespace {

// Split-KV decoding, phase 1: one chunk of keys; the partial (max, sum, output) goes to `partial`.
void decode_chunk_task(const AttentionContext& c, Scratch& s, const Tile& tile, int64_t chunk, float* partial) {
  const int64_t H = c.p.head_size, M = c.p.group * tile.rows();
  int64_t kv_lo, kv_hi;
  task_key_range(c.p, tile, &kv_lo, &kv_hi);
  const int64_t lo = chunk * c.t.kv_chunk, hi = lo + c.t.kv_chunk;
  const int64_t c0 = std::min(hi, std::max(kv_lo, lo)), c1 = std::max(c0, std::min(kv_hi, hi));
  load_q_tile(c, tile, s);
  flash_rows(c, s, tile, c0, c1, false);
  copy_unread_past(c, tile, lo, c0);
  copy_unread_past(c, tile, c1, hi);
  for (int64_t r = 0; r < M; ++r) {
    float* out = partial + r * (H + 2);
    out[0] = s.row_max[r];
    out[1] = s.row_sum[r];
    std::memcpy(out + 2, s.o_tile + r * H, H * sizeof(float));
  }
}

// Phase 2: merges the chunks of one (b, kv head) by log-sum-exp rescaling, in chunk order.
void decode_merge_task(const AttentionContext& c, const Tile& tile, const float* partials, float* o) {
  const GqaProblem& p = c.p;
  const int64_t H = p.head_size, nq = tile.rows(), M = p.group * nq, chunks = c.t.kv_chunks;
  const size_t stride = static_cast<size_t>(M * (H + 2));
  for (int64_t r = 0; r < M; ++r) {
    const int64_t h = tile.g * p.group + r / nq;
    float m = p.use_sink ? c.sink[h] : kNegInf;
    for (int64_t ch = 0; ch < chunks; ++ch) m = std::max(m, partials[ch * stride + r * (H + 2)]);
    float sum = p.use_sink && c.sink[h] != kNegInf ? exp_poly::exp(c.sink[h] - m) : 0.0f;
    std::fill(o, o + H, 0.0f);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const float* part = partials + ch * stride + r * (H + 2);
      // A chunk whose keys are all masked adds nothing but its values times 0: a NaN or inf among them still
      // makes the row NaN, as in one pass (an empty chunk's sums are 0).
      const float w = part[0] == kNegInf ? 0.0f : exp_poly::exp(part[0] - m);
      sum += w * part[1];
      for (int64_t d = 0; d < H; ++d) o[d] += w * part[2 + d];
    }
    write_output_row(c, tile, r / nq, tile.i0 + r % nq, o, sum == 0.0f ? 0.0f : 1.0f / sum);
  }
}

}  // namespace

void run_split_kv(const AttentionContext& c, size_t tiles, int threads, bool in_place,
                  std::vector<ScratchFloats>& scratch) {
  const GqaProblem& p = c.p;
  const GqaTiling& t = c.t;
  const int64_t H = p.head_size;
  const size_t chunks = static_cast<size_t>(t.kv_chunks);
  const size_t stride = static_cast<size_t>(t.task_rows * (H + 2));
  ScratchFloats partials(tiles * chunks * stride);
  // One parallel region does it all: each chunk task first writes its rows of the present (the past rows when
  // the present is a separate buffer; the new row in its chunk), and whoever finishes a tile's last chunk
  // merges that tile. Separate regions for the new rows and the merges cost short steps their waits at each
  // region's end (T=512 in place, two threads: fp32 51 -> 41 us, int8 31 -> 27 with one region).
  std::vector<std::atomic<int64_t>> chunks_done(tiles);
  for (auto& n : chunks_done) n.store(0, std::memory_order_relaxed);
  // Threads claim runs of consecutive chunks, so each reads long stretches of one head's K and V in order:
  // claimed one by one, two threads took alternate 64 KB chunks of the same head, and each thread's stream
  // restarted at every chunk (bare kernels through DRAM, two threads, int8 T=4096: 258-269 us for runs of
  // one chunk, 239-249 for two, 226-228 for four, 216-221 for a whole head). Runs shrink as the tasks run
  // out (guided scheduling: a head at most, then half of an even share of what is left), so the threads
  // still finish together. Partials are merged in chunk order: the bits do not depend on who ran what.
  const size_t total = tiles * chunks;
  std::vector<size_t> run_start{0};
  while (run_start.back() < total) {
    const size_t left = total - run_start.back(), share = 2 * static_cast<size_t>(threads);
    run_start.push_back(run_start.back() + std::clamp<size_t>((left + share - 1) / share, 1, chunks));
  }
  parallel_for(run_start.size() - 1, threads, [&](size_t run, int worker) {
    Scratch s = carve(t, H, scratch[worker]);
    for (size_t task = run_start[run]; task < run_start[run + 1]; ++task) {
      const size_t index = task / chunks;
      const int64_t chunk = static_cast<int64_t>(task % chunks);
      const Tile tile = tile_of(c, static_cast<int64_t>(index));
      if (chunk == std::min(p.past_len[tile.b] / t.kv_chunk, t.kv_chunks - 1))
        write_new_rows(p, c.kt, in_place, tile.b, tile.g, c.present_key, c.present_value);
      decode_chunk_task(c, s, tile, chunk, partials.data() + task * stride);
      if (chunks_done[index].fetch_add(1, std::memory_order_acq_rel) + 1 == t.kv_chunks)
        decode_merge_task(c, tile, partials.data() + index * chunks * stride, s.o_tile);
    }
  });
}

}  // namespace gqa_attention
}  // namespace attnkit
