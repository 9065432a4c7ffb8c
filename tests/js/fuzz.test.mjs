// attnkit: seeded differential fuzzing (node:test). Random valid GroupQueryAttention and QAttention cases (feature
// combinations the hand-written corpus does not enumerate: caches of 1-6000 rows, 1-7 query heads per KV head, head
// sizes 8-256, rotary, window, softcap, bias (some masking whole rows), sinks, every mask spelling, quantized caches,
// packed QKV) run on attnkit native with every ISA the CLI offers and both paths, and on the threaded wasm build
// through the package (and, where a case continues its whole past, through a KvCache), against the fp64 reference and
// onnxruntime-node (the version package.json pins).
// Deterministic: FUZZ_SEED (default 1) and FUZZ_CASES (default 24 per op) pick the cases; a failure prints the
// case as JSON, ready to become a corpus file.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import * as attnkit from '../../js/index.js';
import { floatToBf16, floatToF16, materializeTensor, normalizeCase, ortSkipReason, tensorToJson } from '../../js/case.js';
import { compareOutputs, describeFailures } from '../../js/compare.js';
import { cliAvailable, defaultCli, runNative } from '../../js/targets/native.js';
import { ORT_NODE, ortNodeSaturates, runOrt } from '../../js/targets/ort.js';
import { gqaReferenceTolerance, ortTolerance, qattentionReferenceTolerance } from '../../js/tolerance.js';

const SEED = Number(process.env.FUZZ_SEED ?? 1);
const CASES = Number(process.env.FUZZ_CASES ?? 24);

// A small LCG: the cases must not depend on Node's Math.random.
function generator(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 4294967296;
  };
  let tensorSeed = 1;
  return {
    pick: (options) => options[Math.floor(next() * options.length)],
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    random: (dtype, shape, low, high) => ({ dtype, shape,
      random: low === undefined ? { seed: tensorSeed++ } : { seed: tensorSeed++, low, high } }),
  };
}
const data = (dtype, shape, values) => ({ dtype, shape, data: values });
const ORT_TOL = { float32: { atol: 1e-5, rtol: 1e-5 }, float16: { atol: 1e-2, rtol: 1e-2 } };

// Some biases mask whole rows (-inf, or finfo.min as exporters write it), drawn from a stream of their own so that a
// seed's other draws stay as they were. ORT answers such rows 0 or NaN depending on its internal path (README), so
// these cases are compared with the reference only; attnkit gives 0 on every path. Returns the new bias or null.
function maskRows(index, bias) {
  const g = generator(SEED * 7919 + index * 104729 + 1);
  if (!g.chance(0.3)) return null;
  const t = materializeTensor(bias);
  const [d0, d1, S, T] = t.shape;
  const encode = { float32: (x) => x, float16: floatToF16, bfloat16: floatToBf16 }[t.dtype];
  for (let r = 0; r < d0 * d1 * S; r++) {
    if (!g.chance(0.25)) continue;
    const value = encode(g.chance(0.5) ? -Infinity : -3.4028234663852886e38);
    // The whole row, or a prefix of it (a fully masked row when it covers every key the row sees).
    const upTo = g.chance(0.5) ? T : g.int(1, T);
    t.data.fill(value, r * T, r * T + upTo);
  }
  return tensorToJson(t);
}

// A first prompt, a decode step over a (possibly ragged) cache, or a chunk after a past; every optional feature on
// with some probability. Always valid: the corpus covers the validation rules.
function gqaCase(g, index) {
  const dtype = g.pick(['float32', 'float32', 'float32', 'float16', 'bfloat16']);
  // 16-bit activations over quantized caches too: a rotated 16-bit key is rounded to its dtype before quantizing.
  const bits = g.chance(dtype === 'float32' ? 0.5 : 0.35) ? g.pick([4, 8]) : 0;
  const Nk = g.pick([1, 2, 4]), N = Nk * g.pick([1, 2, 3, 4, 7]), H = g.pick([8, 16, 32, 48, 64, 80, 96, 128, 256]);
  const mode = g.pick(['prompt', 'decode', 'decode', 'chunk']);
  const B = mode === 'chunk' ? 1 : g.int(1, 3);
  let S, past, seqlens, T;
  if (mode === 'prompt') {
    S = g.int(1, 70);
    past = g.chance(0.3) ? S + g.int(0, 10) : bits ? 0 : undefined;  // quantized prompts bind the cache type
    seqlens = Array.from({ length: B }, (_, b) => (b === 0 ? S - 1 : g.int(0, S - 1)));
    T = S;
  } else if (mode === 'decode') {
    S = 1;
    past = g.int(1, g.pick([40, 600, 3000, 6000]));
    seqlens = Array.from({ length: B }, (_, b) => (b === 0 ? past : g.int(0, past)));
    T = Math.max(...seqlens) + 1;
  } else {
    S = g.int(2, 40);
    past = g.int(1, 500);
    seqlens = [past + S - 1];
    T = past + S;
  }
  const attrs = { num_heads: N, kv_num_heads: Nk };
  // sliding_window_cache = 1: the past is a buffer of C >= W rows holding each entry's latest tokens, and the lengths
  // stay absolute (entries run past C). Its prompts may not be padded.
  if (g.chance(0.15)) {
    attrs.sliding_window_cache = 1;
    attrs.local_window_size = g.int(1, Math.min(T, 300));
    past = attrs.local_window_size + g.pick([0, 0, 3, 40]);
    if (mode === 'prompt') seqlens = seqlens.map(() => S - 1);
  }
  const inputs = {};
  const packed = g.chance(0.15);
  if (packed) inputs.query = g.random(dtype, [B, S, (N + 2 * Nk) * H]);
  else {
    inputs.query = g.random(dtype, [B, S, N * H]);
    inputs.key = g.random(dtype, [B, S, Nk * H]);
    inputs.value = g.random(dtype, [B, S, Nk * H]);
  }
  if (past !== undefined) {
    const cache = bits === 8 ? 'int8' : bits === 4 ? 'uint8' : dtype;
    const row = bits === 4 ? H / 2 : H;
    for (const name of ['past_key', 'past_value']) {
      inputs[name] = bits ? g.random(cache, [B, Nk, past, row]) : g.random(cache, [B, Nk, past, row], -1, 1);
    }
  }
  inputs.seqlens_k = data('int32', [B], seqlens);
  inputs.total_sequence_length = data('int32', [], [T]);
  if (H % 16 === 0 && g.chance(0.4)) {
    attrs.do_rotary = 1;
    if (g.chance(0.5)) attrs.rotary_interleaved = 1;
    const R = H % 32 === 0 && g.chance(0.3) ? H / 2 : H;
    inputs.cos_cache = g.random(dtype, [T + 8, R / 2], -1, 1);
    inputs.sin_cache = g.random(dtype, [T + 8, R / 2], -1, 1);
  }
  // q/k_norm_weight (Qwen3- and Gemma 3-style QK RMSNorm) needs rotary and separate K/V; ORT's CPU EP refuses it.
  const qkNorm = attrs.do_rotary === 1 && !packed && g.chance(0.3);
  if (qkNorm) {
    inputs.q_norm_weight = g.random(dtype, [H], 0.5, 1.5);
    inputs.k_norm_weight = g.random(dtype, [H], 0.5, 1.5);
  }
  if (g.chance(0.25)) attrs.softcap = g.pick([1.5, 30, 50]);
  if (g.chance(0.25) && !attrs.sliding_window_cache) attrs.local_window_size = g.int(1, T);
  if (g.chance(0.15)) attrs.smooth_softmax = 1;
  else if (g.chance(0.15)) inputs.head_sink = g.random(dtype, [N], -1, 1);
  if (g.chance(0.2)) inputs.attention_bias = g.random(dtype, [g.pick([1, B]), g.pick([1, N]), S, T], -2, 2);
  const maskedBias = inputs.attention_bias && maskRows(index, inputs.attention_bias);
  if (maskedBias) inputs.attention_bias = maskedBias;
  if (g.chance(0.1)) attrs.scale = g.pick([0.05, 0.3, 1.0]);
  if (bits) {
    const type = g.pick(['PER_TENSOR', 'PER_CHANNEL']);
    Object.assign(attrs, { k_quant_type: type, v_quant_type: type, kv_cache_bit_width: bits });
    const base = bits === 4 ? 1 / 7 : 1 / 127;  // as the corpus: scales near amax/7 and amax/127 for data in [-1, 1]
    if (type === 'PER_TENSOR') {
      inputs.k_scale = data('float32', [1], [base]);
      inputs.v_scale = data('float32', [1], [base * 0.9]);
    } else {
      inputs.k_scale = g.random('float32', [1, Nk, 1, H], base * 0.6, base * 1.2);
      inputs.v_scale = g.random('float32', [1, Nk, 1, H], base * 0.6, base * 1.2);
    }
  }
  return { name: `fuzz/gqa-${SEED}-${index} ${mode}${attrs.sliding_window_cache ? ' window-cache' : ''}${qkNorm ? ' qk-norm' : ''}${maskedBias ? ' masked-rows' : ''} ${dtype}${bits ? ` int${bits}` : ''} B${B} S${S} past ${past ?? '-'} `
    + `N${N}/${Nk} H${H}`, op: 'GroupQueryAttention', attrs, inputs, outputs: ['output', 'present_key', 'present_value'],
  tolerance: ORT_TOL[dtype], ...(maskedBias ? { ort: 'skip-cpu: fully masked rows are 0 or NaN in ORT by its path' } : {}),
  ...(dtype === 'bfloat16' ? { ort: 'skip: no bfloat16 kernel' } : {}),
  ...(attrs.sliding_window_cache && bits && (bits === 8 ? H : H / 2) % 16
    ? { ort: 'skip: ORT refuses a quantized window cache whose rows are not a multiple of 16 bytes' } : {}),
  ...(qkNorm ? { ort: 'skip-cpu: the CPU EP refuses q_norm_weight / k_norm_weight' } : {}) };
}

// QAttention with realistic weights (zero-centred: uint8 weights always carry a zero point near 128; uncentred ones
// make logits in the thousands, whose fp32 rounding moves a one-hot softmax more than any tolerance allows).
function qattentionCase(g, index) {
  const B = g.int(1, 3), S = g.pick([1, 2, 5, 17, 40, 70]), N = g.pick([1, 2, 3, 4, 12]);
  const H = g.pick([4, 8, 12, 16, 32, 64, 80, 96]);
  const D = N * H, Di = g.chance(0.2) ? D + g.int(1, 20) : D, C = 3 * D;
  const w = g.pick(['int8', 'uint8']), perColumn = g.chance(0.5);
  const wmag = 1 / (74 * Math.sqrt(Di));
  const inputs = {
    input: g.random('uint8', [B, S, Di]),
    weight: g.random(w, [Di, C]),
    bias: g.random('float32', [C], -0.5, 0.5),
    input_scale: data('float32', [], [1 / 128]),
    weight_scale: perColumn ? g.random('float32', [C], 0.5 * wmag, 1.5 * wmag) : data('float32', [1], [wmag]),
  };
  if (g.chance(0.6)) inputs.input_zero_point = data('uint8', [], [g.pick([128, 77, 0])]);
  if (w === 'uint8' || g.chance(0.5)) {
    const [lo, hi] = w === 'int8' ? [-20, 20] : [108, 148];
    inputs.weight_zero_point = perColumn ? g.random(w, [C], lo, hi) : data(w, [], [w === 'int8' ? 3 : 128]);
  }
  const P = g.chance(0.4) ? g.int(0, 100) : undefined;
  if (P !== undefined) inputs.past = g.random('float32', [2, B, N, P, H], -1, 1);
  const T = (P ?? 0) + S;
  const attrs = { num_heads: N };
  if (g.chance(0.3)) attrs.unidirectional = 1;
  if (g.chance(0.15)) attrs.scale = g.pick([0.3, -0.5, 1]);
  const mask = g.pick(['none', 'none', 'end', 'end-start', 'key-2d', 'query-key-3d']);
  // Key 0 stays visible wherever a mask spells single keys, so only end-start masks can hide a whole row.
  if (mask === 'end') inputs.mask_index = data('int32', [B], Array.from({ length: B }, () => g.int(1, T + 3)));
  if (mask === 'end-start') {
    const ends = Array.from({ length: B }, () => g.int(2, T + 3));
    inputs.mask_index = data('int32', [2 * B], [...ends, ...ends.map((e) => g.int(-3, Math.min(e, T) - 1))]);
  }
  if (mask === 'key-2d') {
    const values = [];
    for (let b = 0; b < B; b++) for (let j = 0; j < T; j++) values.push(j === 0 ? 1 : g.pick([1, 1, 0, -1, 2]));
    inputs.mask_index = data('int32', [B, T], values);
  }
  if (mask === 'query-key-3d') {
    const values = [];
    for (let i = 0; i < B * S; i++) for (let j = 0; j < T; j++) values.push(j === 0 ? 1 : g.pick([1, 1, 0]));
    inputs.mask_index = data('int32', [B, S, T], values);
  }
  if (inputs.mask_index && g.chance(0.2)) attrs.mask_filter_value = g.pick([-1, -100, -1e30]);
  // A row with every key masked sits on the mask value's coarse fp32 grid (gen-qattention-cases.mjs): the corpus's
  // wider tolerance applies wherever one can occur.
  const maybeFullyMasked = mask === 'end-start' || (attrs.unidirectional && mask !== 'none')
    || attrs.mask_filter_value === -1e30;
  return { name: `fuzz/qattention-${SEED}-${index} B${B} S${S} past ${P ?? '-'} N${N} H${H} Di${Di} ${w}`
    + `${perColumn ? ' per-column' : ''} mask ${mask}`, op: 'QAttention', attrs, inputs,
  outputs: P !== undefined ? ['output', 'present'] : ['output'],
  tolerance: maybeFullyMasked ? { atol: 2e-3, rtol: 1e-5 } : { atol: 1e-5, rtol: 1e-5 } };
}

// Padding query rows of a ragged first prompt (s >= T_b) produce unspecified values in ORT (spec §2.2): zeroed on
// both sides before the comparison with ORT.
function blankPaddingRows(c, ...results) {
  if (c.op !== 'GroupQueryAttention' || c.inputs.query.shape[1] !== c.inputs.total_sequence_length.data[0]) return;
  for (const outputs of results) {
    const { data: out, shape: [B, S, width] } = outputs.output;
    for (let b = 0; b < B; b++) out.fill(0, (b * S + c.inputs.seqlens_k.data[b] + 1) * width, (b + 1) * S * width);
  }
}

// A GroupQueryAttention case that continues its whole past (every seqlens_k = P + S - 1) replays through a KvCache: the
// past load()ed, then one step with the new tokens must give the stateless call's output bit for bit (both attend in
// place over the same rows with the same tiling). This puts every feature the fuzzer mixes through the cache API. A
// window cache's past stands for P absolute tokens (the same for every entry) in its capacity's rows.
function replayThroughKvCache(c, expected) {
  if (c.op !== 'GroupQueryAttention') return;
  const { inputs, attrs } = attnkit.prepareCase(c);
  const { past_key: pastKey, past_value: pastValue, seqlens_k: seqlens, total_sequence_length: total, ...fresh } = inputs;
  if (!pastKey) return;
  const [B, Nk, rows, row] = pastKey.shape, S = inputs.query.shape[1];
  const window = attrs.sliding_window_cache ? attrs.local_window_size : 0;
  const P = window ? total.data[0] - S : rows;
  if (!Array.from(seqlens.data).every((x) => x === P + S - 1) || total.data[0] !== P + S) return;
  const bits = attrs.kv_cache_bit_width ?? 0;
  const cache = attnkit.createKvCache({ batch: B, kvHeads: Nk, headSize: bits === 4 ? 2 * row : row,
    capacity: window ? rows : P + S, window, dtype: pastKey.dtype });
  try {
    cache.load({ past_key: pastKey, past_value: pastValue }, { length: P });
    const { output } = cache.step(fresh, attrs);
    assert.deepEqual(output.data, expected.output.data, 'a KvCache step after load() differs from the stateless call');
  } finally {
    cache.dispose();
  }
}

function cliVariants() {
  const variants = [{ path: 'naive' }, { path: 'flash', threads: 2 }];
  if (!cliAvailable()) return variants;
  const info = JSON.parse(execFileSync(defaultCli, ['info'], { encoding: 'utf8' }));
  for (const isa of info.available_isas ?? []) if (isa !== info.isa) variants.push({ isa, threads: 2 });
  return variants;
}

const variants = cliVariants();
const cases = [];
for (const [make, tolerance, offset] of [[gqaCase, gqaReferenceTolerance, 0], [qattentionCase, qattentionReferenceTolerance, 1]]) {
  const g = generator(2 * SEED + offset);
  for (let i = 0; i < CASES; i++) cases.push({ c: normalizeCase(make(g, i)), tolerance });
}

before(async () => {
  await attnkit.init({ threads: 2 });
});
after(() => attnkit.dispose());

for (const { c, tolerance: toleranceOf } of cases) {
  test(c.name, async () => {
    const tolerance = toleranceOf(c);
    assert.ok(cliAvailable(), `${defaultCli} is missing: build it first (bash scripts/build.sh, which npm test runs)`);
    const replay = `\ncase: ${JSON.stringify(c)}`;
    const ref = await runNative(c, { reference: true });
    assert.equal(ref.error, undefined, `attnkit --reference failed: ${ref.error}${replay}`);
    const ort = ortSkipReason(c, 'cpu') ? null : await runOrt(c, { backend: ortNodeSaturates(c) ? 'web' : 'node' });
    for (const variant of variants) {
      const run = await runNative(c, variant);
      const where = `attnkit ${JSON.stringify(variant)}`;
      assert.equal(run.error, undefined, `${where} failed: ${run.error}${replay}`);
      const vsRef = compareOutputs(c, run.outputs, ref.outputs, tolerance);
      assert.ok(vsRef.ok, `${where} vs reference:\n${describeFailures(vsRef)}${replay}`);
      if (!ort) continue;
      blankPaddingRows(c, run.outputs, ort.outputs);
      const vsOrt = compareOutputs(c, run.outputs, ort.outputs, ortTolerance(c));
      assert.ok(vsOrt.ok, `${where} vs ${ORT_NODE}:\n${describeFailures(vsOrt)}${replay}`);
    }
    const wasm = await attnkit.runCase(c);
    const vsRef = compareOutputs(c, wasm.outputs, ref.outputs, tolerance);
    assert.ok(vsRef.ok, `attnkit wasm vs reference:\n${describeFailures(vsRef)}${replay}`);
    replayThroughKvCache(c, wasm.outputs);
  });
}
