// attnkit: writes the GroupQueryAttention case corpus, tests/cases/gqa/*.json (run: node scripts/gen-gqa-cases.mjs).
// The JSON files are the artifact every target reads; this script documents how each case was chosen and keeps
// them reproducible. Inputs are `random` (splitmix64, DESIGN.md) so files stay small. Each case was probed on
// onnxruntime-node 1.30: where ORT cannot run one, the case says so ("ort": "skip: ...") and in its name.
import { mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { floatToF16, materializeTensor, tensorToJson } from '../js/case.js';

const dir = new URL('../tests/cases/gqa/', import.meta.url).pathname;
let seed = 100; // every random tensor gets its own seed, so no two inputs repeat each other
const rnd = (dtype, shape, low, high) => ({ dtype, shape, random: low === undefined ? { seed: seed++ } : { seed: seed++, low, high } });
const dat = (dtype, shape, data) => ({ dtype, shape, data });
// vs ORT: the spec's accuracy anchors (§5: fp32 rtol = atol = 1e-5, fp16 1e-2; bf16 from the CUDA anchors).
const TOL = { float32: { atol: 1e-5, rtol: 1e-5 }, float16: { atol: 1e-2, rtol: 1e-2 }, bfloat16: { atol: 1e-2, rtol: 5e-2 } };
const cases = [];

// One case from a compact description: B, S, N, Nk, H, dtype; past = cache buffer length M (absent: no past);
// seqlens (default: every entry full, past + S - 1); T (default max seqlens + 1); L = key/value length (0: shared
// KV); packed; rotary { R, interleaved, maxPos, positionIds }; qkNorm (q/k_norm_weight); bias [dim0, dim1]; sink;
// quant { type, bits };
// cacheDtype; attrs; tol; ort; note; mutate(case) for validation cases that break one rule.
function gqa(o) {
  const { name, B = 1, N = 4, Nk = 2, H = 16, dtype = 'float32' } = o;
  const S = o.S ?? 8;
  const past = o.past;
  const seqlens = o.seqlens ?? Array(B).fill((past ?? 0) + S - 1);
  const T = o.T ?? Math.max(...seqlens) + 1;
  const cacheDtype = o.cacheDtype ?? dtype;
  const cacheIsInteger = cacheDtype === 'int8' || cacheDtype === 'uint8';
  const Hc = cacheDtype === 'uint8' ? Math.ceil(H / 2) : H; // INT4: two values per byte
  const L = o.L ?? S;
  const inputs = {};
  if (o.packed) inputs.query = rnd(dtype, [B, S, (N + 2 * Nk) * H]);
  else {
    inputs.query = rnd(dtype, [B, S, N * H]);
    inputs.key = rnd(dtype, [B, L, Nk * H]);
    inputs.value = rnd(dtype, [B, L, Nk * H]);
  }
  if (past !== undefined) {
    // Integer caches take the dtype's full range; float caches the default [-1, 1] spelled out.
    inputs.past_key = cacheIsInteger ? rnd(cacheDtype, [B, Nk, past, Hc]) : rnd(cacheDtype, [B, Nk, past, Hc], -1, 1);
    inputs.past_value = cacheIsInteger ? rnd(cacheDtype, [B, Nk, past, Hc]) : rnd(cacheDtype, [B, Nk, past, Hc], -1, 1);
  }
  inputs.seqlens_k = dat('int32', o.seqlensShape ?? [B], seqlens);
  inputs.total_sequence_length = dat('int32', o.totalShape ?? [], [T]);
  const attrs = { num_heads: N, kv_num_heads: Nk, ...(o.attrs ?? {}) };
  if (o.rotary) {
    const R = o.rotary.R ?? H;
    attrs.do_rotary = 1;
    if (o.rotary.interleaved) attrs.rotary_interleaved = 1;
    const maxPos = o.rotary.maxPos ?? T + 4;
    // Random cos/sin (not a true rotation): the op does not care, and it exercises every table entry.
    inputs.cos_cache = rnd(dtype, [maxPos, R / 2], -1, 1);
    inputs.sin_cache = rnd(dtype, [maxPos, R / 2], -1, 1);
    if (o.rotary.positionIds) inputs.position_ids = dat('int64', [B, S], o.rotary.positionIds);
  }
  if (o.qkNorm) {
    // RMSNorm weights as trained ones sit: around 1.
    inputs.q_norm_weight = rnd(dtype, [H], 0.5, 1.5);
    inputs.k_norm_weight = rnd(dtype, [H], 0.5, 1.5);
  }
  if (o.bias) inputs.attention_bias = rnd(dtype, [o.bias[0], o.bias[1], S, T], -2, 2);
  if (o.sink) inputs.head_sink = rnd(dtype, [N], -1, 1);
  if (o.quant) {
    const { type, bits } = o.quant;
    Object.assign(attrs, { k_quant_type: type, v_quant_type: type, kv_cache_bit_width: bits });
    // Scales near amax/127 (int8) and amax/7 (int4) for data in [-1, 1], as ORT's quantized tests derive them.
    const base = bits === 4 ? 1 / 7 : 1 / 127;
    if (type === 'PER_TENSOR') {
      inputs.k_scale = dat('float32', [1], [base]);
      inputs.v_scale = dat('float32', [1], [base * 0.9]);
    } else {
      inputs.k_scale = rnd('float32', [1, Nk, 1, H], base * 0.6, base * 1.2);
      inputs.v_scale = rnd('float32', [1, Nk, 1, H], base * 0.6, base * 1.2);
    }
  }
  const c = { name: `gqa/${name}`, op: 'GroupQueryAttention', attrs, inputs };
  // Both presents always: ORT 1.30 returns garbage output when past is given without them.
  c.outputs = ['output', 'present_key', 'present_value', ...((attrs.qk_output ?? 0) ? ['output_qk'] : [])];
  if (o.expectError) c.expect_error = o.expectError;
  else c.tolerance = o.tol ?? TOL[dtype];
  for (const key of ['ort', 'note']) if (o[key]) c[key] = o[key];
  if (o.mutate) o.mutate(c);
  cases.push(c);
  return c;
}

function writeAll() {
  mkdirSync(dir, { recursive: true });
  // cli-*.json are written by hand for the CLI tests (several cases per file, raw inputs): they stay.
  for (const f of readdirSync(dir)) if (f.endsWith('.json') && !f.startsWith('cli-')) unlinkSync(`${dir}${f}`);
  const names = new Set();
  for (const c of cases) {
    if (names.has(c.name)) throw new Error(`duplicate case name ${c.name}`);
    names.add(c.name);
    const file = `${c.name.replace(/^gqa\//, '').replace(/\//g, '--')}.json`;
    writeFileSync(`${dir}${file}`, `${JSON.stringify(c, null, 1)}\n`);
  }
  return cases;
}

// ================= valid cases =================
const F16 = 'float16', BF16 = 'bfloat16';
const BF16_SKIP = 'skip: ORT 1.30 and 1.31 have no bfloat16 GroupQueryAttention CPU kernel (compared with the reference only)';
// ---- prompt (first prompt, S == T) ----
gqa({ name: 'prompt/basic-fp32', S: 8 });
gqa({ name: 'prompt/heads-4-4-h32', N: 4, Nk: 4, H: 32, S: 6 });
gqa({ name: 'prompt/heads-8-2-h64', N: 8, Nk: 2, H: 64, S: 9 });
gqa({ name: 'prompt/h8-single-kv-head', N: 2, Nk: 1, H: 8, S: 5 });
gqa({ name: 'prompt/h80-heads-6-3', N: 6, Nk: 3, H: 80, S: 7 });
gqa({ name: 'prompt/h256', N: 2, Nk: 1, H: 256, S: 5 });
gqa({ name: 'prompt/heads-32-8-h128', N: 32, Nk: 8, H: 128, S: 3 });
gqa({ name: 'prompt/s129-h64', N: 4, Nk: 2, H: 64, S: 129 });
gqa({ name: 'prompt/s1', N: 4, Nk: 2, H: 32, S: 1 });
gqa({ name: 'prompt/ragged-batch3', B: 3, S: 8, seqlens: [7, 4, 2] });
gqa({ name: 'prompt/ragged-batch3-past-buffer', B: 3, S: 6, past: 16, seqlens: [5, 2, 0], T: 6, note: 'first prompt with a max-length past buffer: past contents are ignored, present keeps 16 rows' });
gqa({ name: 'prompt/packed-qkv', packed: true, B: 2, S: 7, N: 4, Nk: 2, H: 32 });
gqa({ name: 'prompt/total-length-1d-legacy-seqlens', B: 2, S: 5, seqlensShape: [2, 1], totalShape: [1] });
// ---- decode (token generation) ----
gqa({ name: 'decode/past37', S: 1, past: 37, N: 4, Nk: 2, H: 64 });
gqa({ name: 'decode/past1-heads-8-2', S: 1, past: 1, N: 8, Nk: 2, H: 32 });
gqa({ name: 'decode/ragged-batch3-shared-buffer', B: 3, S: 1, past: 20, seqlens: [5, 19, 11], T: 20 });
gqa({ name: 'decode/buffer-longer-than-total', B: 2, S: 1, past: 64, seqlens: [9, 3], T: 10 });
gqa({ name: 'decode/packed-qkv-batch2', packed: true, B: 2, S: 1, past: 12, seqlens: [12, 7], T: 13, N: 6, Nk: 3, H: 16 });
gqa({ name: 'decode/past511-heads-16-8-h128', S: 1, past: 511, N: 16, Nk: 8, H: 128 });
gqa({ name: 'decode/past300-heads-32-8-h64', S: 1, past: 300, N: 32, Nk: 8, H: 64 });
// ---- the sizes of the speed note (N=16, Nk=8, H=128): `npm start` times them on every target ----
gqa({ name: 'perf/prefill-512-heads-16-8-h128', S: 512, N: 16, Nk: 8, H: 128 });
gqa({ name: 'perf/decode-past2047-heads-16-8-h128', S: 1, past: 2047, N: 16, Nk: 8, H: 128 });
// ---- chunked prefill (subsequent prompt, B=1) ----
gqa({ name: 'chunked/past20-s7', S: 7, past: 20 });
gqa({ name: 'chunked/buffer40-s7', S: 7, past: 40, seqlens: [26], T: 27 });
gqa({ name: 'chunked/past64-s33-h128', S: 33, past: 64, N: 8, Nk: 2, H: 128 });
// ---- shared KV (L = 0: keys and values only from past) ----
gqa({ name: 'shared-kv/decode-l0', S: 1, L: 0, past: 16, seqlens: [9], T: 10 });
gqa({ name: 'shared-kv/prompt-l0', S: 6, L: 0, past: 8, seqlens: [5], T: 6 });
// ---- rotary ----
gqa({ name: 'rotary/split-prompt', S: 9, H: 32, rotary: {} });
gqa({ name: 'rotary/interleaved-prompt', S: 9, H: 32, rotary: { interleaved: true } });
gqa({ name: 'rotary/partial-r16-h64', S: 6, H: 64, rotary: { R: 16 } });
gqa({ name: 'rotary/partial-interleaved-r32-h64', S: 6, H: 64, rotary: { R: 32, interleaved: true } });
gqa({ name: 'rotary/position-ids-first-prompt-uses-first-element', B: 2, S: 4, H: 32, rotary: { maxPos: 20, positionIds: [3, 9, 1, 0, 7, 7, 7, 7] } });
gqa({ name: 'rotary/position-ids-decode-batch3', B: 3, S: 1, past: 10, seqlens: [10, 4, 7], T: 11, H: 32, rotary: { maxPos: 30, positionIds: [25, 2, 13] } });
gqa({ name: 'rotary/decode-default-positions', B: 2, S: 1, past: 15, seqlens: [15, 6], T: 16, H: 32, rotary: { interleaved: true } });
gqa({ name: 'rotary/chunked-position-ids', S: 5, past: 12, H: 32, rotary: { maxPos: 40, positionIds: [20, 21, 22, 23, 24] } });
gqa({ name: 'rotary/packed-qkv', packed: true, S: 6, H: 32, rotary: {} });
// ---- causal / local window ----
gqa({ name: 'causal0/prompt', S: 8, attrs: { causal: 0 } });
gqa({ name: 'causal0/chunked', S: 5, past: 9, attrs: { causal: 0 } });
gqa({ name: 'causal0/ragged-batch2', B: 2, S: 6, seqlens: [5, 3], attrs: { causal: 0 } });
gqa({ name: 'window/prompt-w3', S: 10, attrs: { local_window_size: 3 } });
gqa({ name: 'window/decode-w8', S: 1, past: 30, attrs: { local_window_size: 8 } });
gqa({ name: 'window/ragged-decode-w4', B: 3, S: 1, past: 12, seqlens: [12, 3, 8], T: 13, attrs: { local_window_size: 4 } });
gqa({ name: 'window/w1-sees-only-itself', S: 5, attrs: { local_window_size: 1 } });
gqa({ name: 'window/chunked-w6', S: 6, past: 10, attrs: { local_window_size: 6 } });
// ---- scale / softcap / bias ----
gqa({ name: 'scale/custom-0.3', S: 7, attrs: { scale: 0.3 } });
gqa({ name: 'softcap/prompt', S: 8, H: 32, attrs: { softcap: 0.5, scale: 1.0 } });
gqa({ name: 'softcap/decode-with-bias', S: 1, past: 9, H: 32, bias: [1, 4], attrs: { softcap: 1.5, scale: 0.5 } });
gqa({ name: 'bias/full-prompt', B: 2, S: 5, seqlens: [4, 4], bias: [2, 4] });
gqa({ name: 'bias/broadcast-1-1', S: 6, bias: [1, 1] });
gqa({ name: 'bias/broadcast-batch-3-1-decode', B: 3, S: 1, past: 8, seqlens: [8, 2, 5], T: 9, bias: [3, 1] });
gqa({ name: 'bias/broadcast-heads-1-4-chunked', S: 4, past: 6, bias: [1, 4] });
// ---- sinks ----
gqa({ name: 'sink/head-sink-prompt', S: 7, sink: true });
gqa({ name: 'sink/head-sink-decode-batch2', B: 2, S: 1, past: 10, seqlens: [10, 2], T: 11, sink: true });
gqa({ name: 'sink/smooth-softmax-prompt', S: 7, attrs: { smooth_softmax: 1 } });
gqa({ name: 'sink/smooth-softmax-window', S: 9, attrs: { smooth_softmax: 1, local_window_size: 4 } });
// ---- qk_output ----
gqa({ name: 'qk-output/before-softmax-prompt', S: 6, attrs: { qk_output: 1 } });
gqa({ name: 'qk-output/after-softmax-ragged-decode', B: 3, S: 1, past: 9, seqlens: [9, 3, 6], T: 10, attrs: { qk_output: 2 } });
gqa({ name: 'qk-output/before-softmax-softcap-bias', S: 5, past: 3, H: 32, bias: [1, 4], attrs: { qk_output: 1, softcap: 2, scale: 1 } });
gqa({ name: 'qk-output/after-softmax-window-sink', S: 8, sink: true, attrs: { qk_output: 2, local_window_size: 3 } });
// ---- everything at once ----
gqa({ name: 'combo/decode-batch3-rotary-window-softcap-bias-sink-qk', B: 3, S: 1, past: 14, seqlens: [14, 5, 9], T: 15, N: 8, Nk: 2, H: 32,
  rotary: { interleaved: true, R: 16, maxPos: 20, positionIds: [14, 5, 9] }, bias: [3, 8], sink: true,
  attrs: { local_window_size: 6, softcap: 3, qk_output: 2 } });
gqa({ name: 'combo/chunked-packed-rotary-window', packed: true, S: 7, past: 9, N: 4, Nk: 1, H: 32, rotary: {}, attrs: { local_window_size: 5 } });
// ---- float16 ----
gqa({ name: 'fp16/prompt', dtype: F16, S: 8, H: 32 });
gqa({ name: 'fp16/decode-ragged-batch3', dtype: F16, B: 3, S: 1, past: 16, seqlens: [16, 4, 9], T: 17, H: 64 });
gqa({ name: 'fp16/chunked', dtype: F16, S: 6, past: 10 });
gqa({ name: 'fp16/rotary-interleaved', dtype: F16, S: 7, H: 32, rotary: { interleaved: true } });
gqa({ name: 'fp16/packed-rotary-decode', dtype: F16, packed: true, S: 1, past: 11, H: 32, rotary: {} });
gqa({ name: 'fp16/bias-softcap-sink', dtype: F16, S: 6, bias: [1, 4], sink: true, attrs: { softcap: 2, scale: 0.6 } });
gqa({ name: 'fp16/qk-output-before-softmax', dtype: F16, S: 5, attrs: { qk_output: 1 } });
gqa({ name: 'fp16/window-smooth-softmax', dtype: F16, S: 9, attrs: { local_window_size: 3, smooth_softmax: 1 } });
gqa({ name: 'fp16/h256-heads-8-2', dtype: F16, N: 8, Nk: 2, H: 256, S: 4 });
// ---- float32 activations with a float16 cache (ORT 1.30 accepts T_CACHE = float16 under T = float32) ----
gqa({ name: 'mixed/fp32-query-fp16-cache-decode', S: 1, past: 4, cacheDtype: 'float16',
  tol: { atol: 1e-3, rtol: 1e-3 }, note: 'tolerance: K/V are rounded to fp16 in the cache (2^-11 relative); ORT and attnkit may attend the new row before or after that rounding' });
gqa({ name: 'mixed/fp32-query-fp16-cache-chunked', S: 3, past: 6, cacheDtype: 'float16',
  tol: { atol: 1e-3, rtol: 1e-3 }, note: 'tolerance: K/V are rounded to fp16 in the cache (2^-11 relative); ORT and attnkit may attend the new rows before or after that rounding' });
// ---- bfloat16 (ORT 1.30 lacks the kernel) ----
gqa({ name: 'ort-lacks-bf16/prompt', dtype: BF16, S: 8, ort: BF16_SKIP });
gqa({ name: 'ort-lacks-bf16/decode-ragged', dtype: BF16, B: 2, S: 1, past: 12, seqlens: [12, 5], T: 13, H: 32, ort: BF16_SKIP });
gqa({ name: 'ort-lacks-bf16/rotary-bias-qk', dtype: BF16, S: 6, H: 32, rotary: {}, bias: [1, 1], attrs: { qk_output: 2 }, ort: BF16_SKIP });
// ---- quantized KV cache (issue 3) ----
// Both sides dequantize the same integers (the caches are compared exactly, one step allowed on ties), so the
// outputs differ only by summation order: the fp32 anchor applies, not ORT's quantized-vs-fp32 test anchors.
const Q8 = { atol: 1e-5, rtol: 1e-5 }, Q4 = Q8;
const QNOTE = 'tolerance: fp32 anchor, because both sides attend the same dequantized integers (caches compared exactly); quantized prompts pass past tensors of the cache dtype with length 0, which ORT 1.30 needs to bind the cache type';
gqa({ name: 'quant/int8-per-tensor-prompt', S: 4, N: 2, Nk: 1, H: 8, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, tol: Q8, note: QNOTE });
gqa({ name: 'quant/int8-per-channel-prompt', S: 16, N: 4, Nk: 2, H: 32, past: 0, cacheDtype: 'int8', quant: { type: 'PER_CHANNEL', bits: 8 }, tol: Q8, note: QNOTE });
gqa({ name: 'quant/int4-per-tensor-prompt', S: 8, N: 2, Nk: 1, H: 64, past: 0, cacheDtype: 'uint8', quant: { type: 'PER_TENSOR', bits: 4 }, tol: Q4, note: QNOTE });
gqa({ name: 'quant/int4-per-channel-prompt', S: 16, N: 4, Nk: 2, H: 32, past: 0, cacheDtype: 'uint8', quant: { type: 'PER_CHANNEL', bits: 4 }, tol: Q4, note: QNOTE });
gqa({ name: 'quant/int8-per-tensor-decode', S: 1, past: 31, N: 4, Nk: 2, H: 64, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, tol: Q8, note: QNOTE });
gqa({ name: 'quant/int4-per-channel-decode-ragged', B: 2, S: 1, past: 20, seqlens: [20, 8], T: 21, N: 4, Nk: 2, H: 32, cacheDtype: 'uint8', quant: { type: 'PER_CHANNEL', bits: 4 }, tol: Q4, note: QNOTE });
gqa({ name: 'quant/int8-packed-batch3-prompt', packed: true, B: 3, S: 8, N: 4, Nk: 2, H: 16, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, tol: Q8, note: QNOTE });
gqa({ name: 'quant/int8-per-channel-bias-prompt', S: 8, N: 2, Nk: 1, H: 16, past: 0, bias: [1, 2], cacheDtype: 'int8', quant: { type: 'PER_CHANNEL', bits: 8 }, tol: Q8, note: QNOTE });
gqa({ name: 'quant/int8-per-channel-rotary-chunked', S: 4, past: 12, N: 4, Nk: 2, H: 32, rotary: {}, cacheDtype: 'int8', quant: { type: 'PER_CHANNEL', bits: 8 }, tol: Q8, note: QNOTE });
// ---- the shapes of shipped models, at realistic cache lengths: these reach the paths small cases cannot (decode
// blocks of hundreds to thousands of keys, passes of 4 and 3 query heads per KV head, split-KV decoding under two
// threads, H = 96 and 256). Seeds start at 10000 so that adding here leaves every other case's inputs unchanged.
const seedBefore = seed;
seed = 10000;
const PC4 = { type: 'PER_CHANNEL', bits: 4 }, PC8 = { type: 'PER_CHANNEL', bits: 8 }, PT4 = { type: 'PER_TENSOR', bits: 4 }, PT8 = { type: 'PER_TENSOR', bits: 8 };
gqa({ name: 'models/phi3-mha-h96-rotary-decode', S: 1, past: 300, N: 32, Nk: 32, H: 96, rotary: {} });
gqa({ name: 'models/phi3-mha-h96-rotary-int4-decode', S: 1, past: 300, N: 32, Nk: 32, H: 96, rotary: {}, cacheDtype: 'uint8', quant: PC4, tol: Q4, note: QNOTE });
gqa({ name: 'models/llama3-g4-h64-rotary-int8-decode', S: 1, past: 700, N: 32, Nk: 8, H: 64, rotary: {}, cacheDtype: 'int8', quant: PT8, tol: Q8, note: QNOTE });
gqa({ name: 'models/llama3-g4-h128-int8-ragged-batch2-decode', B: 2, S: 1, past: 1000, seqlens: [999, 450], T: 1000, N: 32, Nk: 8, H: 128, cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE });
gqa({ name: 'models/qwen25-g7-h64-rotary-int4-decode', S: 1, past: 1100, N: 14, Nk: 2, H: 64, rotary: {}, cacheDtype: 'uint8', quant: PC4, tol: Q4, note: QNOTE });
gqa({ name: 'models/mqa-h128-int4-split-kv-decode', S: 1, past: 2500, N: 8, Nk: 1, H: 128, cacheDtype: 'uint8', quant: PT4, tol: Q4, note: QNOTE });
gqa({ name: 'models/gemma2-h256-softcap-window-int8-decode', S: 1, past: 600, N: 8, Nk: 4, H: 256, attrs: { softcap: 50, local_window_size: 512 }, cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE });
gqa({ name: 'models/gemma2-h256-softcap-window-prefill', S: 40, N: 8, Nk: 4, H: 256, attrs: { softcap: 50, local_window_size: 32 } });
gqa({ name: 'models/mistral-g4-h128-rotary-int4-chunked', S: 48, past: 256, N: 32, Nk: 8, H: 128, rotary: {}, cacheDtype: 'uint8', quant: PC4, tol: Q4, note: QNOTE });
seed = seedBefore;
// ---- sliding_window_cache = 1 (§2.9): past/present are a buffer of capacity C = `past` rows holding each entry's
// latest tokens; seqlens_k and total_sequence_length stay absolute, so entries run past C. Steps that run in the
// buffer and steps that need a staging copy (a chunk that evicts keys its first queries see, a prompt longer than C).
seed = 20000;
const win = (name, o) => gqa({ name: `window-cache/${name}`, ...o, attrs: { sliding_window_cache: 1, ...o.attrs } });
win('decode-filling', { S: 1, past: 16, seqlens: [9], attrs: { local_window_size: 8 } });
win('decode-first-eviction', { S: 1, past: 16, seqlens: [16], attrs: { local_window_size: 8 } });
win('decode-ragged-batch3', { B: 3, S: 1, past: 16, seqlens: [40, 8, 23], attrs: { local_window_size: 8 } });
win('decode-capacity-equals-window', { S: 1, past: 8, seqlens: [49], attrs: { local_window_size: 8 } });
win('chunk-in-buffer', { S: 3, past: 16, seqlens: [29], attrs: { local_window_size: 4 } });
win('chunk-staging', { S: 12, past: 16, seqlens: [39], attrs: { local_window_size: 8 } });
win('prompt-fits', { S: 10, past: 16, seqlens: [9], attrs: { local_window_size: 8 } });
win('prompt-longer-than-capacity-batch2', { B: 2, S: 24, past: 16, seqlens: [23, 23], attrs: { local_window_size: 8 } });
win('rotary-bias-softcap-sink-decode', { S: 1, past: 12, seqlens: [29], N: 8, Nk: 2, H: 32, rotary: {}, bias: [1, 8], sink: true,
  attrs: { local_window_size: 6, softcap: 5 } });
win('rotary-position-ids-chunk', { S: 4, past: 12, seqlens: [33], H: 32, rotary: { positionIds: [30, 31, 32, 33], maxPos: 40 }, attrs: { local_window_size: 6 } });
win('int8-per-channel-decode', { S: 1, past: 64, seqlens: [199], H: 64, cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE, attrs: { local_window_size: 32 } });
win('int4-per-tensor-chunk-staging', { S: 20, past: 64, seqlens: [149], H: 64, cacheDtype: 'uint8', quant: PT4, tol: Q4, note: QNOTE, attrs: { local_window_size: 32 } });
win('int4-h16-decode', { S: 1, past: 16, seqlens: [30], H: 16, cacheDtype: 'uint8', quant: PC4, tol: Q4, attrs: { local_window_size: 8 },
  ort: 'skip: ORT 1.30 and 1.31 refuse a quantized window cache whose rows are not a multiple of 16 bytes (compared with the reference only)' });
win('fp16-decode', { dtype: F16, S: 1, past: 16, seqlens: [37], attrs: { local_window_size: 8 } });
win('bf16-chunk', { dtype: BF16, S: 5, past: 16, seqlens: [37], attrs: { local_window_size: 8 }, ort: BF16_SKIP });
win('smooth-softmax-packed-decode', { packed: true, S: 1, past: 10, seqlens: [25], attrs: { local_window_size: 10, smooth_softmax: 1 } });
gqa({ name: 'models/gemma3-local-layer-window-cache-int8-decode', S: 1, past: 1024, seqlens: [2999], N: 8, Nk: 4, H: 256, rotary: {},
  cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE, attrs: { sliding_window_cache: 1, local_window_size: 1024 } });
seed = seedBefore;

// ---- q_norm_weight / k_norm_weight (the QK RMSNorm of Qwen3 and Gemma 3 layers, before rotary): ORT 1.30's CPU
// and wasm EPs refuse them, its WebGPU EP runs them (probed: its output is ORT CPU's on rows normalized
// beforehand, within 2.4e-7), so these cases are checked against the reference here and against WebGPU in the
// browser suite and the comparison. Seeds start at 30000.
seed = 30000;
const QKNORM_CPU_SKIP = 'skip-cpu: the CPU EP refuses q_norm_weight / k_norm_weight (the WebGPU EP runs them)';
const norm = (name, o) => gqa({ name: `qk-norm/${name}`, rotary: {}, qkNorm: true, ort: QKNORM_CPU_SKIP, ...o });
norm('prompt', { S: 8, N: 4, Nk: 2, H: 32 });
norm('decode-past37-h64', { S: 1, past: 37, N: 4, Nk: 2, H: 64 });
norm('chunk-interleaved', { S: 5, past: 16, seqlens: [20], H: 32, rotary: { interleaved: true } });
norm('partial-rotary', { S: 6, N: 4, Nk: 2, H: 32, rotary: { R: 16 } });
norm('decode-ragged-batch3-position-ids', { B: 3, S: 1, past: 20, seqlens: [5, 19, 11], T: 20, H: 32, rotary: { positionIds: [5, 19, 11] } });
norm('epsilon-0.1-prompt', { S: 4, H: 16, attrs: { qk_norm_epsilon: 0.1 } });
norm('window-bias-sink-decode', { S: 1, past: 30, H: 32, bias: [1, 4], sink: true, attrs: { local_window_size: 8 } });
norm('qk-output-prompt', { S: 6, H: 16, attrs: { qk_output: 1 } });
norm('fp16-prompt', { dtype: F16, S: 8, H: 32 });
norm('bf16-decode', { dtype: BF16, S: 1, past: 12, H: 32, ort: BF16_SKIP });
norm('int8-per-channel-decode', { S: 1, past: 40, H: 64, cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE });
norm('int4-per-tensor-chunk', { S: 4, past: 24, H: 32, cacheDtype: 'uint8', quant: PT4, tol: Q4, note: QNOTE });
norm('window-cache-decode', { S: 1, past: 16, seqlens: [40], H: 32, attrs: { sliding_window_cache: 1, local_window_size: 8 } });
gqa({ name: 'models/qwen3-0.6b-qk-norm-decode', S: 1, past: 300, N: 16, Nk: 8, H: 128, rotary: {}, qkNorm: true, ort: QKNORM_CPU_SKIP });
gqa({ name: 'models/qwen3-0.6b-qk-norm-int8-prefill', S: 64, past: 0, N: 16, Nk: 8, H: 128, rotary: {}, qkNorm: true, cacheDtype: 'int8', quant: PC8, tol: Q8, note: QNOTE, ort: QKNORM_CPU_SKIP });
seed = seedBefore;

// ================= validation cases: exit 2 and a message naming the input or attribute =================
const e = (name, o, expectError) => gqa({ name: `invalid/${name}`, ...o, expectError });
// spec §8
e('seqlens-negative', { B: 2, S: 1, past: 8, seqlens: [-1, 3], T: 9 }, 'seqlens_k');
e('seqlens-beyond-present', { B: 2, S: 1, past: 8, seqlens: [4, 9], T: 9 }, 'seqlens_k');
e('seqlens-too-small-for-chunk', { S: 4, past: 6, seqlens: [2], T: 10 }, 'seqlens_k');
e('past-too-short-for-seqlens', { S: 1, past: 5, seqlens: [9], T: 10 }, 'past_key');
e('total-length-zero', { S: 1, past: 4, seqlens: [0], T: 0 }, 'total_sequence_length must be positive');
e('total-length-negative', { S: 1, past: 4, seqlens: [0], T: -3 }, 'total_sequence_length');
e('total-length-two-elements', { S: 4, totalShape: [2], mutate: (c) => { c.inputs.total_sequence_length = { dtype: 'int32', shape: [2], data: [4, 4] }; } }, 'total_sequence_length');
e('seqlens-scalar', { S: 4, mutate: (c) => { c.inputs.seqlens_k = { dtype: 'int32', shape: [], data: [3] }; } }, 'seqlens_k');
e('seqlens-wrong-length', { B: 2, S: 4, mutate: (c) => { c.inputs.seqlens_k = { dtype: 'int32', shape: [3], data: [3, 3, 3] }; } }, 'seqlens_k');
e('seqlens-2x2-for-batch4', { B: 4, S: 4, mutate: (c) => { c.inputs.seqlens_k = { dtype: 'int32', shape: [2, 2], data: [3, 3, 3, 3] }; } }, 'seqlens_k');
e('seqlens-int64', { S: 4, mutate: (c) => { c.inputs.seqlens_k = { dtype: 'int64', shape: [1], data: [3] }; } }, 'seqlens_k');
e('chunked-prefill-batch2', { B: 2, S: 4, past: 6, seqlens: [9, 9], T: 10 }, 'batch');
e('query-longer-than-total', { S: 8, seqlens: [3], T: 4 }, 'seqlens_k');
e('head-size-not-multiple-of-8', { N: 2, Nk: 1, H: 12, S: 3 }, 'head_size');
e('rotary-head-size-not-multiple-of-16', { N: 2, Nk: 1, H: 24, S: 3, rotary: {} }, 'head_size');
e('k-scale-count-mismatch', { S: 4, past: 0, H: 16, cacheDtype: 'int8', quant: { type: 'PER_CHANNEL', bits: 8 },
  mutate: (c) => { c.inputs.k_scale = { dtype: 'float32', shape: [5], random: { seed: 9, low: 0.01, high: 0.02 } }; } }, 'k_scale');
e('bit-width-without-quantization', { S: 4, attrs: { kv_cache_bit_width: 8 } }, 'kv_cache_bit_width');
// attributes
e('num-heads-not-multiple-of-kv-heads', { N: 3, Nk: 2, H: 16, S: 4, mutate: (c) => { c.inputs.query.shape = [1, 4, 48]; } }, 'num_heads');
e('num-heads-missing', { S: 4, mutate: (c) => { delete c.attrs.num_heads; } }, 'num_heads');
e('kv-num-heads-zero', { S: 4, mutate: (c) => { c.attrs.kv_num_heads = 0; } }, 'kv_num_heads');
e('qk-output-3', { S: 4, attrs: { qk_output: 3 } }, 'qk_output');
e('causal0-with-local-window', { S: 4, attrs: { causal: 0, local_window_size: 2 } }, 'local_window_size');
e('quant-types-differ', { S: 4, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, mutate: (c) => { c.attrs.v_quant_type = 'PER_CHANNEL'; } }, 'quant_type');
e('quant-bit-width-3', { S: 4, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, mutate: (c) => { c.attrs.kv_cache_bit_width = 3; } }, 'kv_cache_bit_width');
e('quant-type-unknown', { S: 4, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, mutate: (c) => { c.attrs.k_quant_type = 'PER_ROW'; c.attrs.v_quant_type = 'PER_ROW'; } }, 'quant_type');
e('quant-missing-k-scale', { S: 4, past: 0, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, mutate: (c) => { delete c.inputs.k_scale; } }, 'k_scale');
e('quant-float-cache', { S: 4, past: 0, quant: { type: 'PER_TENSOR', bits: 8 } }, 'past_key');
e('cache-dtype-int8-unquantized', { S: 1, past: 4, mutate: (c) => { c.inputs.past_key.dtype = 'int8'; c.inputs.past_value.dtype = 'int8'; delete c.inputs.past_key.random.low; delete c.inputs.past_key.random.high; delete c.inputs.past_value.random.low; delete c.inputs.past_value.random.high; } }, 'past_key');
e('unknown-attribute', { S: 4, attrs: { num_kv_heads: 2 } }, 'num_kv_heads');
// ranks, dtypes, shapes
e('query-rank-2', { S: 4, mutate: (c) => { c.inputs.query.shape = [4, 64]; } }, 'query');
e('query-int32', { S: 4, mutate: (c) => { c.inputs.query.dtype = 'int32'; } }, 'query');
e('key-float16-query-float32', { S: 4, mutate: (c) => { c.inputs.key.dtype = 'float16'; } }, 'key');
e('key-hidden-not-kv-heads-times-head-size', { S: 4, mutate: (c) => { c.inputs.key.shape = [1, 4, 48]; c.inputs.value.shape = [1, 4, 48]; } }, 'key');
e('key-batch-mismatch', { B: 2, S: 4, mutate: (c) => { c.inputs.key.shape = [1, 4, 32]; } }, 'key');
e('value-shape-differs-from-key', { S: 4, mutate: (c) => { c.inputs.value.shape = [1, 3, 32]; } }, 'value');
e('packed-with-value', { packed: true, S: 4, mutate: (c) => { c.inputs.value = { dtype: 'float32', shape: [1, 4, 32], random: { seed: 3 } }; } }, 'value');
e('past-key-without-past-value', { S: 1, past: 4, mutate: (c) => { delete c.inputs.past_value; } }, 'past_value');
e('past-key-rank-3', { S: 1, past: 4, mutate: (c) => { c.inputs.past_key.shape = [1, 8, 16]; c.inputs.past_value.shape = [1, 8, 16]; } }, 'past_key');
e('past-key-wrong-kv-heads', { S: 1, past: 4, mutate: (c) => { c.inputs.past_key.shape = [1, 4, 2, 16]; c.inputs.past_value.shape = [1, 4, 2, 16]; } }, 'past_key');
e('past-key-wrong-head-size', { S: 1, past: 4, mutate: (c) => { c.inputs.past_key.shape = [1, 2, 2, 32]; c.inputs.past_value.shape = [1, 2, 2, 32]; } }, 'past_key');
e('past-value-length-differs', { S: 1, past: 4, mutate: (c) => { c.inputs.past_value.shape = [1, 2, 5, 16]; } }, 'past_value');
e('cos-cache-shorter-than-total', { S: 6, H: 32, rotary: { maxPos: 4 } }, 'cos_cache');
e('cos-cache-dim1-too-large', { S: 4, H: 32, mutate: (c) => { c.attrs.do_rotary = 1; c.inputs.cos_cache = { dtype: 'float32', shape: [8, 24], random: { seed: 1 } }; c.inputs.sin_cache = { dtype: 'float32', shape: [8, 24], random: { seed: 2 } }; } }, 'cos_cache');
e('sin-cache-width-differs', { S: 4, H: 32, rotary: {}, mutate: (c) => { c.inputs.sin_cache.shape = [8, 8]; } }, 'sin_cache');
e('rotary-without-cos-cache', { S: 4, H: 32, attrs: { do_rotary: 1 } }, 'cos_cache');
e('position-ids-batch-mismatch', { B: 2, S: 1, past: 4, seqlens: [4, 4], T: 5, H: 32, rotary: { positionIds: [4, 4] }, mutate: (c) => { c.inputs.position_ids.shape = [1, 2]; } }, 'position_ids');
e('position-ids-out-of-range', { S: 1, past: 4, H: 32, rotary: { maxPos: 8, positionIds: [8] } }, 'position_ids');
e('attention-bias-last-dim', { S: 4, bias: [1, 1], mutate: (c) => { c.inputs.attention_bias.shape = [1, 1, 4, 3]; } }, 'attention_bias');
e('attention-bias-batch-dim', { B: 2, S: 4, bias: [1, 1], mutate: (c) => { c.inputs.attention_bias.shape = [3, 1, 4, 4]; } }, 'attention_bias');
e('attention-bias-rank-3', { S: 4, bias: [1, 1], mutate: (c) => { c.inputs.attention_bias.shape = [1, 4, 4]; } }, 'attention_bias');
e('head-sink-wrong-length', { S: 4, sink: true, mutate: (c) => { c.inputs.head_sink.shape = [3]; } }, 'head_sink');
e('qk-norm-q-without-k', { S: 4, mutate: (c) => { c.inputs.q_norm_weight = { dtype: 'float32', shape: [16], random: { seed: 1 } }; } }, 'q_norm_weight and k_norm_weight must be provided together');
e('absurd-query-size', { S: 4, mutate: (c) => { c.inputs.query.shape = [1, 4000000000, 4000000000]; } }, 'query');
e('absurd-past-length', { S: 1, past: 4, mutate: (c) => { c.inputs.past_key.shape = [1, 2, 1099511627776, 16]; c.inputs.past_value.shape = [1, 2, 1099511627776, 16]; } }, 'past_key');
e('absurd-total-length', { S: 1, past: 4, seqlens: [4], T: 2000000000 }, 'total_sequence_length');
e('missing-seqlens', { S: 4, mutate: (c) => { delete c.inputs.seqlens_k; } }, 'seqlens_k');
e('base64-length-mismatch', { S: 4, mutate: (c) => { c.inputs.seqlens_k = { dtype: 'int32', shape: [1], base64: 'AwAAAAMAAAA=' }; } }, 'seqlens_k');
// sliding_window_cache = 1 (ORT 1.30 refuses the first four too)
e('window-cache-without-past', { S: 4, attrs: { sliding_window_cache: 1, local_window_size: 2 } }, 'past_key');
e('window-cache-capacity-below-window', { S: 1, past: 3, seqlens: [9], attrs: { sliding_window_cache: 1, local_window_size: 4 } }, 'local_window_size');
e('window-cache-without-window', { S: 1, past: 8, attrs: { sliding_window_cache: 1 } }, 'local_window_size');
e('window-cache-qk-output', { S: 1, past: 8, attrs: { sliding_window_cache: 1, local_window_size: 4, qk_output: 1 } }, 'qk_output');
e('window-cache-padded-prompt', { B: 2, S: 4, past: 8, seqlens: [3, 1], T: 4, attrs: { sliding_window_cache: 1, local_window_size: 2 } }, 'seqlens_k');
e('window-cache-2', { S: 1, past: 8, attrs: { sliding_window_cache: 2, local_window_size: 4 } }, 'sliding_window_cache');
// q_norm_weight / k_norm_weight: ORT's WebGPU EP's rules and messages (the first three), and the weights' shape and type
e('qk-norm-without-rotary', { S: 4, qkNorm: true }, 'q_norm_weight / k_norm_weight require do_rotary=1');
e('qk-norm-packed-qkv', { packed: true, S: 4, rotary: {}, qkNorm: true }, 'q_norm_weight / k_norm_weight are not supported when QKV is packed');
e('qk-norm-weight-2d', { S: 4, rotary: {}, qkNorm: true, mutate: (c) => { c.inputs.q_norm_weight.shape = [1, 16]; } }, 'q_norm_weight: must be a 1-D tensor of shape [head_size=16], got');
e('qk-norm-weight-float16', { S: 4, rotary: {}, qkNorm: true, mutate: (c) => { c.inputs.k_norm_weight.dtype = 'float16'; } }, 'k_norm_weight: dtype must be float32');
e('qk-norm-negative-epsilon', { S: 4, rotary: {}, qkNorm: true, attrs: { qk_norm_epsilon: -1 } }, 'qk_norm_epsilon');

// ---- fully masked rows (appended last: every case above keeps its random seeds) ----
// attention_bias rows { b, h, i } set to `value` on columns 0..upTo (default: all). JSON has no -Infinity, so the
// bias is written out as base64.
function maskBias(c, rows) {
  const t = materializeTensor(c.inputs.attention_bias);
  const [, N1, S, T] = t.shape;
  const store = t.dtype === F16 ? floatToF16 : (x) => x;
  for (const { b = 0, h, i, value, upTo = T - 1 } of rows) {
    for (let j = 0; j <= upTo; j++) t.data[((b * N1 + h) * S + i) * T + j] = store(value);
  }
  c.inputs.attention_bias = tensorToJson(t);
}
const LOWEST = -3.4028234663852886e38; // finfo(float32).min, the mask value exporters add
// A row whose every visible score is -inf or the lowest float gives 0 (ORT's flash paths, and attnkit on every path).
maskBias(gqa({ name: 'masked/fully-masked-rows-prompt', B: 2, S: 5, seqlens: [4, 4], bias: [2, 4] }), [
  { b: 0, h: 0, i: 2, value: -Infinity }, { b: 1, h: 3, i: 4, value: LOWEST },
  { b: 1, h: 1, i: 3, value: -Infinity, upTo: 3 }, // only the keys it sees; the causally hidden column stays finite
  { b: 0, h: 2, i: 4, value: -Infinity, upTo: 2 }, // partly masked: an ordinary row
]);
maskBias(gqa({ name: 'masked/fully-masked-chunk-window', S: 4, past: 10, H: 32, bias: [1, 4], attrs: { local_window_size: 3 } }), [
  { h: 1, i: 0, value: -Infinity }, { h: 2, i: 3, value: LOWEST, upTo: 13 },
]);
maskBias(gqa({ name: 'masked/fully-masked-decode-int8', S: 1, past: 16, bias: [1, 4], cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, tol: Q8, note: QNOTE }), [
  { h: 2, i: 0, value: -Infinity }, { h: 3, i: 0, value: LOWEST },
]);
const ORT_NAIVE_NAN = "skip: ORT 1.30's and 1.31's naive path (which they take for fp16, softcap, qk_output or a single key) gives NaN for a fully masked row; their flash paths give 0, as attnkit does everywhere (compared with the reference only)";
maskBias(gqa({ name: 'masked/fully-masked-fp16-softcap', dtype: F16, S: 6, bias: [1, 4], attrs: { softcap: 2 }, ort: ORT_NAIVE_NAN }), [
  { h: 0, i: 3, value: -Infinity }, { h: 1, i: 5, value: -Infinity, upTo: 5 },
]);
// A -inf sink is no sink (exp(-inf - max) = 0 in ORT); attnkit's flash path once counted it as a key of weight 1.
const noSink = gqa({ name: 'sink/negative-infinity-prompt', S: 6, sink: true });
noSink.inputs.head_sink = tensorToJson({ dtype: 'float32', shape: [4], data: Float32Array.of(-Infinity, 0.3, -0.7, -Infinity) });
// New K/V rows holding inf, -inf, NaN and huge values, quantized on write: ORT clamps with
// std::max(lo, std::min(hi, q)), which takes NaN to the upper bound (127, or 7 for int4).
for (const [bits, type] of [[8, 'PER_TENSOR'], [4, 'PER_CHANNEL']]) {
  const c = gqa({ name: `quant/int${bits}-${type.toLowerCase().replace('_', '-')}-nonfinite-new-rows`, S: 2, past: 6,
    cacheDtype: bits === 8 ? 'int8' : 'uint8', quant: { type, bits }, tol: Q8, note: QNOTE });
  for (const name of ['key', 'value']) {
    const t = materializeTensor(c.inputs[name]);
    t.data.set([Infinity, -Infinity, NaN, 1e30, -1e30, NaN], 3);
    c.inputs[name] = tensorToJson(t);
  }
}
// A scale of +inf (float32 bytes 00 00 80 7f) is refused; ORT runs it into NaN rows.
e('v-scale-infinite', { S: 4, past: 0, H: 16, cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 },
  mutate: (c) => { c.inputs.v_scale = { dtype: 'float32', shape: [1], base64: 'AACAfw==' }; } }, 'v_scale[0] = inf');
// Spellings ORT 1.31 runs as another (spec §1, §2.1): a negative softcap is none, and smooth_softmax beside a
// head_sink is the sink alone. And a total between past + new rows and beyond, which ORT 1.31 refuses.
gqa({ name: 'softcap/negative-is-off', S: 1, past: 9, attrs: { softcap: -3 } });
gqa({ name: 'sink/head-sink-with-smooth-softmax', S: 6, sink: true, attrs: { smooth_softmax: 1 } });
e('total-beyond-past-plus-new', { S: 1, past: 4, seqlens: [4], T: 8 },
  'total_sequence_length must equal past_sequence_length + kv_sequence_length');
// A 16-bit key is rotated, held in its dtype and quantized from there, as ORT does: quantizing the fp32 rotation
// put 30 of these 4096 int8 keys one step off ORT's.
gqa({ name: 'quant/fp16-rotary-int8-prompt', dtype: F16, S: 64, N: 2, Nk: 1, H: 64, past: 0, rotary: { maxPos: 64 },
  cacheDtype: 'int8', quant: { type: 'PER_TENSOR', bits: 8 }, note: QNOTE });
gqa({ name: 'quant/fp16-rotary-int8-per-channel-decode', dtype: F16, B: 2, S: 1, past: 20, N: 8, Nk: 4, H: 128,
  rotary: {}, cacheDtype: 'int8', quant: { type: 'PER_CHANNEL', bits: 8 }, note: QNOTE });

const all = writeAll();
console.log(`${all.length} cases written to ${dir}`);
