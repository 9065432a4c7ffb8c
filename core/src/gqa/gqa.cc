// attnkit: GroupQueryAttention entry point and the stages before attention.
// Validation has already derived every length (problem.h); here the query is normalized and rotated into fp32
// and the present cache is assembled exactly as ORT's ConcatStateChunkGQA does, quantizing on write.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#include "common/tensor_storage.h"
#include "common/thread_pool.h"
#include "gqa/driver.h"

namespace attnkit {

void load_float_row(const KernelTable& kt, const void* base, DType dtype, size_t offset, size_t n,
                    float* out) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(out, static_cast<const float*>(base) + offset, n * sizeof(float));
      break;
    case DType::kFloat16:
      kt.kv.from_f16(static_cast<const uint16_t*>(base) + offset, n, out);
      break;
    case DType::kBFloat16:
      kt.kv.from_bf16(static_cast<const uint16_t*>(base) + offset, n, out);
      break;
    default:
      break;  // validation admits only float-like dtypes here
  }
}

void store_float_row(const KernelTable& kt, const float* x, size_t n, DType dtype, void* base,
                     size_t offset) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(static_cast<float*>(base) + offset, x, n * sizeof(float));
      break;
    case DType::kFloat16:
      kt.kv.to_f16(x, n, static_cast<uint16_t*>(base) + offset);
      break;
    case DType::kBFloat16:
      kt.kv.to_bf16(x, n, static_cast<uint16_t*>(base) + offset);
      break;
    default:
      break;
  }
}

namespace {

bool is_16bit_float(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

// Rotates the first rotary_dim values of an fp32 head row at rotary position `pos`.
void rotate_row(const GqaProblem& p, const KernelTable& kt, int64_t pos, float* row, float* cs) {
  const int64_t half = p.rotary_dim / 2;
  float* c = cs;
  float* s = cs + half;
  load_float_row(kt, p.inputs->cos_cache->data, p.dtype, static_cast<size_t>(pos * half), half, c);
  load_float_row(kt, p.inputs->sin_cache->data, p.dtype, static_cast<size_t>(pos * half), half, s);
  kt.rotary.apply(row, c, s, static_cast<size_t>(p.rotary_dim), p.rotary_interleaved, row);
}

// The RMSNorm prologue of q/k_norm_weight, as ORT's WebGPU EP computes it: x * (1/sqrt(mean(x^2) + epsilon)) * w.
// The squares are summed in 16 float lanes (channel d into lane d % 16; rotary makes H a multiple of 16), then the
// lanes in halves (0..7 += 8..15, 0..3 += 4..7, 0..1 += 2..3, 0 += 1): a fixed order, so every ISA and wasm give
// the same bits. Four 4-lane vectors (GCC/Clang vector extensions, no ISA named) keep the lanes in registers.
void rms_normalize(const GqaProblem& p, const float* weight, float* row) {
  typedef float f32x4 __attribute__((vector_size(16)));
  const auto load = [](const float* x) { f32x4 v; std::memcpy(&v, x, sizeof v); return v; };
  f32x4 lane[4] = {};
  for (int64_t d = 0; d < p.head_size; d += 16)
    for (int k = 0; k < 4; ++k) {
      const f32x4 x = load(row + d + 4 * k);
      lane[k] += x * x;
    }
  const f32x4 half = (lane[0] + lane[2]) + (lane[1] + lane[3]);
  const float sum = (half[0] + half[2]) + (half[1] + half[3]);
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(p.head_size) + p.qk_norm_epsilon);
  for (int64_t d = 0; d < p.head_size; ++d) row[d] = row[d] * inv * weight[d];
}

// Element offset of head `head` (in the packed [Q | K | V] head numbering, or the plain tensor's) of
// token (b, s) in a BSNH-flattened input with `heads_in_row` heads per token.
size_t token_head_offset(const GqaProblem& p, int64_t b, int64_t s, int64_t tokens, int64_t heads_in_row,
                         int64_t head) {
  return static_cast<size_t>(((b * tokens + s) * heads_in_row + head) * p.head_size);
}

// Inverse quantization scales of kv head g, one per channel (scale 0 is treated as 1, as MLAS does).
void inverse_scales(const GqaProblem& p, const TensorView* scale, int64_t g, float* inv) {
  const float* sc = scale->as<float>();
  for (int64_t d = 0; d < p.head_size; ++d) {
    float v = p.quant == KvQuant::kPerChannel ? sc[g * p.head_size + d] : sc[0];
    inv[d] = v == 0.0f ? 1.0f : 1.0f / v;
  }
}

// Writes one fp32 row into the cache in its storage format.
void store_cache_row(const GqaProblem& p, const KernelTable& kt, const float* x, const float* inv,
                     uint8_t* dst) {
  const size_t h = static_cast<size_t>(p.head_size);
  if (p.quant == KvQuant::kNone) {
    store_float_row(kt, x, h, p.cache_dtype, dst, 0);
  } else if (p.bits == 8) {
    kt.kv.quantize_s8(x, inv, h, reinterpret_cast<int8_t*>(dst));
  } else {
    kt.kv.quantize_s4(x, inv, h, dst);
  }
}

// ORT holds a rotated query or key in T: a 16-bit one is rounded once, before it is scored or quantized.
void round_through_dtype(const GqaProblem& p, const KernelTable& kt, float* row, uint16_t* staging) {
  if (!is_16bit_float(p.dtype)) return;
  store_float_row(kt, row, static_cast<size_t>(p.head_size), p.dtype, staging, 0);
  load_float_row(kt, staging, p.dtype, 0, static_cast<size_t>(p.head_size), row);
}

}  // namespace

void prefetch_bytes(const void* address, size_t bytes, bool for_write) {
  const char* at = static_cast<const char*>(address);
  for (size_t k = 0; k < bytes; k += 64) {
    if (for_write) __builtin_prefetch(at + k, 1, 3);
    else __builtin_prefetch(at + k, 0, 3);
  }
}

void prefetch_query_row(const GqaProblem& p, int64_t b, int64_t h, int64_t s) {
  const int64_t row_heads = p.packed_qkv ? p.heads + 2 * p.kv_heads : p.heads;
  const size_t elem = dtype_size(p.dtype);
  prefetch_bytes(static_cast<const char*>(p.inputs->query->data) +
                     token_head_offset(p, b, s, p.seq, row_heads, h) * elem,
                 static_cast<size_t>(p.head_size) * elem, false);
}

void load_query_row(const GqaProblem& p, const KernelTable& kt, int64_t b, int64_t h, int64_t s, float* row,
                    float* work) {
  const int64_t H = p.head_size;
  const int64_t row_heads = p.packed_qkv ? p.heads + 2 * p.kv_heads : p.heads;
  load_float_row(kt, p.inputs->query->data, p.dtype, token_head_offset(p, b, s, p.seq, row_heads, h), H, row);
  if (!p.rotary) return;
  if (p.qk_norm) rms_normalize(p, p.q_norm_weight.data(), row);
  rotate_row(p, kt, p.positions[b * p.seq + s], row, work);
  round_through_dtype(p, kt, row, reinterpret_cast<uint16_t*>(work + p.rotary_dim));
}

void fill_past_rows(const GqaProblem& p, int64_t b, int64_t g, int64_t r0, int64_t r1, uint8_t* present_key,
                    uint8_t* present_value, CopyRowsFn copy) {
  const size_t row_bytes = static_cast<size_t>(p.cache_row_bytes);
  const int64_t bg = b * p.kv_heads + g, past_rows = std::min(p.past_len[b], p.past_capacity);
  r1 = std::min(r1, p.past_len[b]);
  for (int kv = 0; kv < 2; ++kv) {
    uint8_t* dst = (kv == 0 ? present_key : present_value) + static_cast<size_t>(bg * p.present_len) * row_bytes;
    const int64_t copy_end = std::min(r1, past_rows);
    if (r0 < copy_end) {
      const TensorView* past = kv == 0 ? p.inputs->past_key : p.inputs->past_value;
      const int64_t src_row = bg * p.past_capacity + p.past_src[b] + r0;
      copy(dst + r0 * row_bytes, past->as<uint8_t>() + static_cast<size_t>(src_row) * row_bytes,
           static_cast<size_t>(copy_end - r0) * row_bytes);
    }
    const int64_t zero_from = std::max(r0, past_rows);
    if (zero_from < r1) std::memset(dst + zero_from * row_bytes, 0, static_cast<size_t>(r1 - zero_from) * row_bytes);
  }
}

void write_new_rows(const GqaProblem& p, const KernelTable& kt, bool in_place, int64_t b, int64_t g,
                    uint8_t* present_key, uint8_t* present_value) {
  const int64_t Nk = p.kv_heads, H = p.head_size, L = p.kv_seq, Mp = p.present_len;
  const size_t row_bytes = static_cast<size_t>(p.cache_row_bytes);
  const int64_t row_heads = p.packed_qkv ? p.heads + 2 * Nk : Nk;
  // One buffer for the converted row, the rotary angles and the inverse scales (an allocation per array showed in
  // short decode steps' profiles on wasm).
  std::vector<float> buffer(static_cast<size_t>(4 * H + p.rotary_dim));
  float* const row = buffer.data();
  float* const inv_k = row + H;
  float* const inv_v = inv_k + H;
  float* const cs = inv_v + H;
  uint16_t* const staging = reinterpret_cast<uint16_t*>(cs + p.rotary_dim);
  if (p.quant != KvQuant::kNone) {
    inverse_scales(p, p.inputs->k_scale, g, inv_k);
    inverse_scales(p, p.inputs->v_scale, g, inv_v);
  }
  for (int kv = 0; kv < 2; ++kv) {
    uint8_t* dst = (kv == 0 ? present_key : present_value) + static_cast<size_t>((b * Nk + g) * Mp) * row_bytes;
    if (!in_place) {
      // Separate buffers arrive unset: the rows past the new ones are zeroed here, once.
      const int64_t written = std::max(std::min(p.past_len[b], p.past_capacity), std::min(p.past_len[b] + L, Mp));
      std::memset(dst + written * row_bytes, 0, static_cast<size_t>(Mp - written) * row_bytes);
    }
    const TensorView* input = p.packed_qkv ? p.inputs->query : (kv == 0 ? p.inputs->key : p.inputs->value);
    const int64_t head = p.packed_qkv ? p.heads + kv * Nk + g : g;
    const size_t in_row_bytes = static_cast<size_t>(H) * dtype_size(p.dtype);
    constexpr int64_t kPrefetchRows = 8;  // input rows are strided: keep several misses in flight
    for (int64_t s = 0; s < std::min(L, kPrefetchRows); ++s)
      prefetch_bytes(input->as<uint8_t>() + token_head_offset(p, b, s, L, row_heads, head) * dtype_size(p.dtype),
                     in_row_bytes, false);
    for (int64_t s = 0; s < L; ++s) {
      if (s + kPrefetchRows < L)
        prefetch_bytes(input->as<uint8_t>() +
                           token_head_offset(p, b, s + kPrefetchRows, L, row_heads, head) * dtype_size(p.dtype),
                       in_row_bytes, false);
      const int64_t dst_row = p.past_len[b] + s;
      if (dst_row >= Mp) break;  // validation guarantees room; defensive against overflow
      const size_t offset = token_head_offset(p, b, s, L, row_heads, head);
      const float* x = row;
      if (p.dtype == DType::kFloat32 && !(kv == 0 && p.rotary)) {
        x = input->as<float>() + offset;  // stored (or quantized) straight from the input: one pass, not two
      } else {
        load_float_row(kt, input->data, p.dtype, offset, H, row);
        if (kv == 0 && p.qk_norm) rms_normalize(p, p.k_norm_weight.data(), row);
        if (kv == 0 && p.rotary) {
          rotate_row(p, kt, p.positions[b * p.seq + s], row, cs);
          // A float cache rounds it as it stores it; a quantized one quantizes the rounded key, as ORT does.
          if (p.quant != KvQuant::kNone) round_through_dtype(p, kt, row, staging);
        }
      }
      store_cache_row(p, kt, x, kv == 0 ? inv_k : inv_v, dst + dst_row * row_bytes);
    }
  }
}

void build_present(const GqaProblem& p, const KernelTable& kt, const GqaTiling& tiling, int threads, bool in_place,
                   uint8_t* present_key, uint8_t* present_value) {
  const bool copy_past = !in_place && !flash_tasks_copy_past(p, tiling, in_place);
  // Where the attention reads the past where it lies, no one reads this copy soon.
  const CopyRowsFn copy = attention_reads_past(p, tiling, in_place) ? kt.kv.copy_streaming : copy_streaming_memcpy;
  parallel_for(static_cast<size_t>(p.batch * p.kv_heads), threads, [&](size_t task, int) {
    const int64_t b = static_cast<int64_t>(task) / p.kv_heads, g = static_cast<int64_t>(task) % p.kv_heads;
    if (copy_past) fill_past_rows(p, b, g, 0, p.past_len[b], present_key, present_value, copy);
    write_new_rows(p, kt, in_place, b, g, present_key, present_value);
  });
}

// A chunk of S tokens after a long past (speculative decoding's check of a few drafted tokens, a chunked prompt)
// otherwise copies the whole past out of DRAM and then reads it back from there to attend. Copied by the one task
// that attends over it, each block is still in cache when it is packed and multiplied: S=16 after 4080 fp32
// tokens (N=16, Nk=8, H=128), one thread, six alternating runs: 6.2-6.6 -> 5.3-5.6 ms; S=4: 2.8-3.2 -> 2.4-2.8.
bool flash_tasks_copy_past(const GqaProblem& p, const GqaTiling& tiling, bool in_place) {
  return tiling.flash && tiling.kv_chunk == 0 && !in_place && tiling.query_rows >= p.seq;
}

// In a model, a layer's cache comes back a token later, after every other layer's weights and caches have passed
// through the caches: its present is cold by then, and streaming it saves reading its lines for ownership.
// Stateless decode, N=16, Nk=8, H=128, over cold layers (gqa_bench mode 4), ordinary -> streamed, alternating:
// fp32 T=4096 1313-1450 -> 1013-1036 us on two threads; int8 T=4096 694-818 -> 663-691 on one, 406-515 -> 386-458
// on two; int4 424-505 -> 420-444 and 260-277 -> 242-261 (less than 3:2 would suggest: a large memcpy probably
// avoids most reads for ownership already). One layer stepped again and again, as benchmark loops do, differs:
// where past and present fit in L3 together, ordinary stores leave the present there for the next call (int8
// T=4096, 16.8 MB: 415-436 -> 471-483 us streamed, int4 297-303 -> 338-349); no model runs that way. Presents under
// one core's L2 keep ordinary stores: such a step is short, and whoever reads the present next may find it cached.
bool stream_past_rows(const GqaProblem& p) {
  constexpr size_t kMinPresentBytes = size_t{1} << 20;
  return static_cast<size_t>(2 * p.batch * p.kv_heads * p.present_len * p.cache_row_bytes) >= kMinPresentBytes;
}

// The naive path reads the present's rows; flash tasks go block by block (block_rows in attention.cc). A window
// cache's staging copy is read again right after the step (keep_window), so it stays in cache.
bool attention_reads_past(const GqaProblem& p, const GqaTiling& tiling, bool in_place) {
  return !in_place && !p.window_staging && tiling.flash && p.inputs->past_key && p.inputs->past_value &&
         stream_past_rows(p);
}

bool gqa_uses_flash(const GqaProblem& p, AttentionPath path) {
  if (p.qk_output != 0 && p.request.output_qk) return false;  // needs the materialized score rows
  static const bool flash_disabled = [] {
    const char* v = std::getenv("ATTNKIT_GQA_DISABLE_FLASH");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  if (path == AttentionPath::kAuto && flash_disabled) return false;
  return path != AttentionPath::kNaive;
}

SvWidenFn sv_widen_for(const SvGemmKernels& sv, DType cache) {
  switch (cache) {
    case DType::kFloat16: return sv.widen_f16;
    case DType::kBFloat16: return sv.widen_bf16;
    case DType::kInt8: return sv.widen_s8;
    case DType::kUInt8: return sv.widen_s4;
    default: return nullptr;
  }
}

namespace {

// Tiles of fewer rows read K in its stored dtype (direct QK); from this many rows on, K is first packed to fp32
// panels once per block and the packed GEMM shares it across the rows. A decode step is one tile of G rows per KV
// head (G query heads per KV head), and it packed from 4 rows on. Decode T=4096, one thread, packed -> direct:
// - G=4 (N=32, Nk=8), native AVX512 in place: fp32 2.4-3.0 -> 0.96-1.1 ms, int8 1.0 -> 0.75-0.80, int4 1.0-1.2 ->
//   0.80-0.89; wasm fp32 4.35 -> 2.64 ms, int8 3.71 -> 2.64, bf16 4.05-6.14 -> 3.21-4.35;
// - fp32 only, native: G=8 3.2 -> 1.7-1.9 ms, G=12 3.3-3.5 -> 2.35-2.4, G=16 4.1 -> 2.7-2.8, G=32 equal
//   (0.51-0.53); wasm G=8 7.43 -> 5.58, G=16 10.7 -> 8.96. Packing a block costs what 16-32 rows of fp32 products do.
// - wasm bf16 is as fast packed at G=8 and faster at G=16 (10.5 against 11.6 ms); f16 and bf16 pack from 8 rows.
// - int8 and int4: where each kernel table's direct QK stops keeping pace (QkGemmKernels::quantized_packed_min_rows):
//   12 rows, and 24 with AVX512-VNNI's passes of three rows (dispatch.cc). One 512-key block, H=128, direct
//   against pack + packed: 8 rows AVX512-VNNI 8.7 against 13.0 us, AVX2 13.7 against 17.5, wasm 28 against 44;
//   12 rows AVX2 20.4 against 19.1. (At 8 rows they packed before: the 8-row limb tile was 1.6x slower per row.)
constexpr int64_t kPackedQkMinRowsF32 = 32;
constexpr int64_t kPackedQkMinRows = 8;

}  // namespace

int64_t packed_qk_min_rows(DType cache) {
  if (cache == DType::kFloat32) return kPackedQkMinRowsF32;
  if (cache == DType::kInt8 || cache == DType::kUInt8) return kernel_table().qk.quantized_packed_min_rows;
  return kPackedQkMinRows;
}

GqaTiling plan_gqa(const GqaProblem& p, bool flash, int64_t block_keys) {
  GqaTiling t;
  t.flash = flash;
  const int64_t H = p.head_size, G = p.group;
  // Flash: ~384 score rows per task (query rows x the group's heads) share each packed K block. Packing costs
  // what a few score rows do, so at 96 rows it was 5-6% of a 2048-token prefill; at 384 (Zen 5, one
  // thread, N=16, Nk=8) S=T=2048 fp32 went 111-113 -> 108-109 ms, int8 and int4 and S=T=512 2-5% too,
  // wasm 2%, and 768 gained nothing more. Each K block then meets the Q and O tiles (192 KiB each at H=128): L2 or
  // L3 feeds them at ~26 FLOPs per byte, well under either's bandwidth. 384 is a multiple of the x86
  // micro-kernels' 12 (AVX512) and 6 (AVX2) rows, so no task ends in a short tile when G divides it;
  // the causal diagonal costs little because flash_rows trims each row segment.
  t.query_rows = flash ? std::max<int64_t>(1, std::min<int64_t>(p.seq, std::max<int64_t>(1, 384 / G))) : p.seq;
  t.task_rows = G * t.query_rows;
  // Key blocks of 512 up to H = 128, and fewer keys at larger heads, so the packed K panels stay at 256 KiB. Each
  // block costs every row a softmax pass and a rescale of its output row, about 5% of a prompt at 128 keys: S=T=2048
  // fp32, N=16, Nk=8, one thread, four alternating rounds, blocks of 128 / 256 / 512 / 1024 keys ran 103-105 /
  // 99-103 / 97-100 / 97-102 ms on AVX512 and 180-186 / 181-186 / 179-181 on AVX2; int8 113 -> 95-100. At H = 256
  // (N=8, Nk=4, S=T=1024) 256 keys ran 25-27 ms and 512 27-28. wasm, the same shapes: within 1-3% either way.
  constexpr int64_t kPanelFloats = 64 << 10, kMaxBlock = 512, kMinBlock = 128;
  t.kv_block = kMinBlock;
  while (t.kv_block < kMaxBlock && 2 * t.kv_block * H <= kPanelFloats) t.kv_block *= 2;
  if (block_keys > 0) t.kv_block = block_keys;
  t.panel_keys = t.kv_block;
  const int64_t max_total = p.total_len.empty() ? 0 : *std::max_element(p.total_len.begin(), p.total_len.end());
  if (flash && p.seq == 1) {
    // Split-KV decoding: a fixed chunk (never a thread-dependent one) keeps results thread-independent, and
    // each chunk is one flash block, which keeps the per-block softmax and kernel calls off the stream. Blocks
    // of 2048 keys read K and V in longer runs than 512 and pay the per-block costs a quarter as often (int8
    // T=4096 through DRAM, medians: one thread 504 -> 420 us, two 260 -> 230; int4 424 -> 342, 238 -> 211; a
    // 2048-key chunk of 512-key blocks gained a third of that). Blocks grow to 256 KiB of K: fp32 blocks of
    // 2048 keys (1 MiB) made a warm step slower (two threads 425 -> 526 us) and a cold one no faster. Chunks
    // also stay shorter where longer ones would leave fewer than 16 tasks for the threads, and at 512 keys
    // where the tile packs K (panels of more would outgrow L2).
    constexpr int64_t kMinChunk = 512, kMaxChunk = 2048, kMaxBlockBytes = 256 << 10, kMinTasks = 16;
    t.kv_block = kMinChunk;
    const bool packs = G >= packed_qk_min_rows(p.cache_dtype);
    if (!packs)
      while (t.kv_block < kMaxChunk && 2 * t.kv_block * p.cache_row_bytes <= kMaxBlockBytes &&
             p.batch * p.kv_heads * ((max_total + 2 * t.kv_block - 1) / (2 * t.kv_block)) >= kMinTasks)
        t.kv_block *= 2;
    t.kv_chunk = t.kv_block;
    t.kv_chunks = std::max<int64_t>(1, (max_total + t.kv_chunk - 1) / t.kv_chunk);
    t.panel_keys = packs ? t.kv_block : 0;
  }
  const int64_t M = t.task_rows;
  const int64_t span = flash ? t.kv_block : max_total;
  t.score_rows = flash ? std::min(M, kFlashRunRows) : M;
  t.v_widen_keys = flash && p.seq > 1 && sv_widen_for(kernel_table().sv, p.cache_dtype) ? t.kv_block : 0;
  t.naive_span = flash ? 0 : max_total;
  // Q tile, O tile, scores/probabilities, running max and sum, packed K panels, the widened V block, one key
  // block's value sums, one bias row, and the query row loader's rotary/rounding work area.
  t.worker_floats = static_cast<uint64_t>(2 * M * H + t.score_rows * span + 2 * M +
                                          (t.panel_keys + t.v_widen_keys + t.score_rows) * H + span + p.rotary_dim + H);
  if (t.kv_chunk > 0)
    t.shared_floats = static_cast<uint64_t>(p.batch * p.kv_heads * t.kv_chunks * M * (H + 2));
  return t;
}

uint64_t gqa_attention_workers(const GqaProblem& p, const GqaTiling& t, int threads) {
  const uint64_t tiles = static_cast<uint64_t>(p.batch * p.kv_heads * ((p.seq + t.query_rows - 1) / t.query_rows));
  const uint64_t tasks = t.kv_chunk > 0 ? tiles * static_cast<uint64_t>(t.kv_chunks) : tiles;
  return std::min<uint64_t>(static_cast<uint64_t>(threads), tasks);
}

uint64_t gqa_scratch_bytes(const GqaProblem& p, const GqaTiling& t, int threads) {
  uint64_t bytes = (t.shared_floats + t.worker_floats * gqa_attention_workers(p, t, threads)) * sizeof(float);
  const uint64_t present_bytes = static_cast<uint64_t>(p.batch * p.kv_heads * p.present_len * p.cache_row_bytes);
  if (p.window_staging) return bytes + 2 * present_bytes;
  if (!p.request.present_key) bytes += present_bytes;
  if (!p.request.present_value) bytes += present_bytes;
  return bytes;
}

namespace {

// Window cache, in place, without staging: each entry's kept past rows move to the front of the buffer before
// the step appends after them (they only move down, so memmove within one buffer is safe). At capacity == window
// that is every decoding step and nearly the whole cache, so the heads are spread over the threads.
void evict_in_place(const GqaProblem& p, int threads, uint8_t* cache_key, uint8_t* cache_value) {
  const size_t row_bytes = static_cast<size_t>(p.cache_row_bytes);
  if (std::all_of(p.past_src.begin(), p.past_src.end(), [](int64_t rows) { return rows == 0; })) return;
  parallel_for(static_cast<size_t>(2 * p.batch * p.kv_heads), threads, [&](size_t task, int) {
    const int64_t bg = static_cast<int64_t>(task / 2), b = bg / p.kv_heads;
    if (p.past_src[b] == 0) return;
    uint8_t* head = (task % 2 == 0 ? cache_key : cache_value) + static_cast<size_t>(bg * p.past_capacity) * row_bytes;
    std::memmove(head, head + static_cast<size_t>(p.past_src[b]) * row_bytes,
                 static_cast<size_t>(p.past_len[b]) * row_bytes);
  });
}

// Window cache after a staging step: the last window_rows(T_b) rows of each entry's staging rows become rows
// [0, window_rows(T_b)) of the window-sized cache `to` (its rows after them are zeroed unless in place).
void keep_window(const GqaProblem& p, const uint8_t* staging, uint8_t* to, bool in_place) {
  const size_t row_bytes = static_cast<size_t>(p.cache_row_bytes);
  const int64_t C = p.window_capacity;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t rows = p.window_rows(p.key_position[b] + p.total_len[b]);
    const int64_t from = p.total_len[b] - rows;
    for (int64_t g = 0; g < p.kv_heads; ++g) {
      const int64_t bg = b * p.kv_heads + g;
      uint8_t* dst = to + static_cast<size_t>(bg * C) * row_bytes;
      std::memcpy(dst, staging + static_cast<size_t>(bg * p.present_len + from) * row_bytes,
                  static_cast<size_t>(rows) * row_bytes);
      if (!in_place) std::memset(dst + rows * row_bytes, 0, static_cast<size_t>(C - rows) * row_bytes);
    }
  }
}

// Shared by both entry points. The step attends over the present: the past buffer itself in place, else the
// present outputs (or internal tensors when they are not requested); a window cache's staging step attends over
// internal tensors and then keeps its window in the present outputs or the past buffer.
Status run_gqa(const GqaInputs& inputs, const GqaAttributes& attrs, const GqaRequest& request,
               GqaOutputs* outputs, const RunOptions& options, bool in_place, bool past_f16_finite = false) {
  if (!outputs) return Status::Error("outputs must not be null");
  const GqaInputs& in = inputs;
  if (inputs_view_outputs({in.query, in.key, in.value, in.past_key, in.past_value, in.seqlens_k,
                           in.total_sequence_length, in.cos_cache, in.sin_cache, in.position_ids, in.attention_bias,
                           in.head_sink, in.k_scale, in.v_scale, in.q_norm_weight, in.k_norm_weight},
                          {&outputs->output, &outputs->present_key, &outputs->present_value, &outputs->output_qk})) {
    GqaOutputs fresh;
    ATTNKIT_RETURN_IF_ERROR(run_gqa(inputs, attrs, request, &fresh, options, in_place, past_f16_finite));
    // Only what the call produced moves in: an in-place cache may be one of the outputs the caller holds.
    outputs->output = std::move(fresh.output);
    if (request.output_qk) outputs->output_qk = std::move(fresh.output_qk);
    if (request.present_key) outputs->present_key = std::move(fresh.present_key);
    if (request.present_value) outputs->present_value = std::move(fresh.present_value);
    return Status::Ok();
  }
  // Outputs not asked for are left empty, not holding an earlier call's tensors.
  if (!request.output_qk) outputs->output_qk = Tensor();
  if (!request.present_key) outputs->present_key = Tensor();
  if (!request.present_value) outputs->present_value = Tensor();
  GqaProblem p;
  ATTNKIT_RETURN_IF_ERROR(validate_gqa(inputs, attrs, request, &p));
  p.past_f16_finite = past_f16_finite;
  window_step(&p);
  if (in_place) {
    if (!p.has_past)
      return Status::Error("past_key: the in-place form needs the cache as past_key and past_value");
    if (!p.window_cache && p.total > p.past_capacity)
      return Status::Error("total_sequence_length " + std::to_string(p.total) + " exceeds the cache capacity " +
                           std::to_string(p.past_capacity) + " (past_key dim 2)");
    // Both caches are written: one buffer as both would have each value row overwrite its key row.
    const auto* k = static_cast<const uint8_t*>(inputs.past_key->data);
    const auto* v = static_cast<const uint8_t*>(inputs.past_value->data);
    const size_t bytes = inputs.past_key->bytes();
    if (k < v + bytes && v < k + bytes)
      return Status::Error("past_value: overlaps past_key, and the in-place form writes both");
    p.request.present_key = p.request.present_value = true;  // nothing internal to allocate
  }
  const KernelTable& kt = kernel_table();
  if (p.qk_norm) {
    // In fp32 once per call: every query row and new key row reads them.
    p.q_norm_weight.resize(static_cast<size_t>(p.head_size));
    p.k_norm_weight.resize(static_cast<size_t>(p.head_size));
    load_float_row(kt, inputs.q_norm_weight->data, p.dtype, 0, p.q_norm_weight.size(), p.q_norm_weight.data());
    load_float_row(kt, inputs.k_norm_weight->data, p.dtype, 0, p.k_norm_weight.size(), p.k_norm_weight.data());
  }
  const int threads = resolve_threads(options.threads);
  constexpr int kMaxBlockKeys = 65536;
  if (options.flash_block_keys < 0 || options.flash_block_keys > kMaxBlockKeys ||
      options.flash_block_keys % static_cast<int>(kQkPanelKeys) != 0)
    return Status::Error("flash_block_keys = " + std::to_string(options.flash_block_keys) +
                         " must be 0 or a multiple of " + std::to_string(kQkPanelKeys) + " up to " +
                         std::to_string(kMaxBlockKeys));
  const GqaTiling tiling = plan_gqa(p, gqa_uses_flash(p, options.path), options.flash_block_keys);
  const uint64_t scratch_bytes = gqa_scratch_bytes(p, tiling, threads);
  const auto out_of_memory = [&] {
    return Status::OutOfMemory("out of memory: GroupQueryAttention needs " + std::to_string(scratch_bytes) +
                               " bytes of scratch");
  };
  if (scratch_bytes > std::numeric_limits<size_t>::max()) return out_of_memory();
  try {
    const int64_t B = p.batch, S = p.seq, N = p.heads, H = p.head_size;
    outputs->output.reset_uninitialized(p.dtype, {B, S, N * H});  // every row is written
    if (request.output_qk) outputs->output_qk.reset(p.dtype, {B, N, S, p.total});
    uint8_t* present_key;
    uint8_t* present_value;
    Tensor internal_k, internal_v;
    const int64_t cache_last = p.cache_row_bytes / static_cast<int64_t>(dtype_size(p.cache_dtype));
    // The cache the step ends in (the past itself in place); the step attends over a staging copy if it needs one.
    uint8_t* cache_key = nullptr;
    uint8_t* cache_value = nullptr;
    if (in_place) {
      cache_key = static_cast<uint8_t*>(const_cast<void*>(inputs.past_key->data));
      cache_value = static_cast<uint8_t*>(const_cast<void*>(inputs.past_value->data));
    } else if (p.window_staging) {
      const Shape shape{B, p.kv_heads, p.window_capacity, cache_last};
      if (request.present_key) {
        outputs->present_key.reset_uninitialized(p.cache_dtype, shape);  // keep_window writes every row
        cache_key = outputs->present_key.as<uint8_t>();
      }
      if (request.present_value) {
        outputs->present_value.reset_uninitialized(p.cache_dtype, shape);
        cache_value = outputs->present_value.as<uint8_t>();
      }
    }
    const bool attend_in_place = in_place && !p.window_staging;
    if (attend_in_place) {
      present_key = cache_key;
      present_value = cache_value;
      if (p.window_cache) evict_in_place(p, threads, cache_key, cache_value);
    } else {
      const Shape shape{B, p.kv_heads, p.present_len, cache_last};
      const bool outputs_hold_it = !p.window_staging;
      Tensor* k = outputs_hold_it && request.present_key ? &outputs->present_key : &internal_k;
      Tensor* v = outputs_hold_it && request.present_value ? &outputs->present_value : &internal_v;
      k->reset_uninitialized(p.cache_dtype, shape);  // build_present writes every row
      v->reset_uninitialized(p.cache_dtype, shape);
      present_key = k->as<uint8_t>();
      present_value = v->as<uint8_t>();
    }
    // Split-KV decoding writes the present chunk by chunk itself (run_attention).
    if (tiling.kv_chunk == 0)
      build_present(p, kt, tiling, threads, attend_in_place, present_key, present_value);
    run_attention(p, kt, tiling, threads, present_key, present_value, outputs, attend_in_place);
    if (p.window_staging) {
      if (cache_key) keep_window(p, present_key, cache_key, in_place);
      if (cache_value) keep_window(p, present_value, cache_value, in_place);
    }
  } catch (const std::bad_alloc&) {
    return out_of_memory();
  } catch (const std::length_error&) {  // a vector past its max_size (2 GiB on wasm32)
    return out_of_memory();
  }
  if (options.peak_scratch_bytes) *options.peak_scratch_bytes = static_cast<size_t>(scratch_bytes);
  return Status::Ok();
}

}  // namespace

Status group_query_attention(const GqaInputs& inputs, const GqaAttributes& attrs,
                             const GqaRequest& request, GqaOutputs* outputs, const RunOptions& options) {
  return run_gqa(inputs, attrs, request, outputs, options, false);
}

Status group_query_attention_in_place(const GqaInputs& inputs, const GqaAttributes& attrs,
                                      const GqaRequest& request, GqaOutputs* outputs,
                                      const RunOptions& options) {
  GqaRequest in_place_request = request;
  in_place_request.present_key = in_place_request.present_value = false;
  return run_gqa(inputs, attrs, in_place_request, outputs, options, true);
}

Status gqa_kv_cache_step(const GqaInputs& inputs, const GqaAttributes& attrs, GqaOutputs* outputs,
                         const RunOptions& options, bool past_f16_finite) {
  GqaRequest request;
  request.present_key = request.present_value = false;
  return run_gqa(inputs, attrs, request, outputs, options, true, past_f16_finite);
}

}  // namespace attnkit
