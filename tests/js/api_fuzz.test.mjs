// attnkit JS package (node:test): seeded fuzzing of the API's argument handling on both builds. Corpus calls, cache
// sessions and pinned inputs take a JS caller's mistakes (plain or detached arrays, wrong types, Symbols, BigInts, a
// throwing toJSON, bad options) and valid oddities (offset views, shared buffers): every call must return or throw a
// one-line AttnkitError without disposing the instance, which must then still give a valid call's bits.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { AttnkitError, createInstance, prepareCase } from '../../js/index.js';
import { materializeTensor } from '../../js/case.js';

// FUZZ_SEED=N FUZZ_CASES=M explore further.
const SEED = Number(process.env.FUZZ_SEED ?? 1);
const CASES = Number(process.env.FUZZ_CASES ?? 600);
const casesDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'cases');

// The corpus's valid cases up to 64 KB of inputs (the mistakes, not the sizes, are what is fuzzed here).
const corpus = [];
for (const op of ['gqa', 'qattention']) {
  for (const file of readdirSync(join(casesDir, op), { recursive: true })) {
    if (!file.endsWith('.json')) continue;
    const doc = JSON.parse(readFileSync(join(casesDir, op, file), 'utf8'));
    for (const c of Array.isArray(doc) ? doc : [doc]) {
      if (c.expect_error) continue;
      const p = prepareCase(c);
      if (Object.values(p.inputs).reduce((n, t) => n + t.data.byteLength, 0) <= 65536) corpus.push(p);
    }
  }
}

function generator(seed) {
  let s = BigInt(seed);
  const next = () => {  // splitmix64
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    return Number((z ^ (z >> 31n)) >> 11n) / 2 ** 53;
  };
  const pick = (a) => a[Math.floor(next() * a.length)];
  return { next, pick };
}

const WEIRD = [null, undefined, 0, -1, 1.5, NaN, Infinity, -Infinity, -0, 2 ** 31, 2 ** 53, 1e308, '', '3', 'float32',
  'toString', 'constructor', true, [], [1, 2], {}, { a: 1 }, 3n, 2n ** 70n, () => 1, Symbol('x'),
  { toJSON() { throw new Error('toJSON\nthrew'); } }, Object.create(null)];

function isTypedTensor(t) {
  return t && typeof t === 'object' && Array.isArray(t.shape) && ArrayBuffer.isView(t.data)
    && !(t.data instanceof DataView) && t.data.buffer.byteLength > 0;
}

function mutateTensor(g, t) {
  if (!isTypedTensor(t)) return g.pick(WEIRD);
  const { data } = t;
  const plain = () => Array.from(data, Number);
  const mutations = [
    () => ({ ...t, data: plain() }),
    () => ({ ...t, data: plain(), dtype: g.pick(['float32', 'int8', 'int64', 'float16', 'float64', Symbol('d')]) }),
    () => {  // a view at an offset: valid
      const wider = new data.constructor(data.length + 3);
      wider.set(data, 3);
      return { ...t, data: wider.subarray(3) };
    },
    () => {  // shared memory: valid
      const shared = new data.constructor(new SharedArrayBuffer(data.byteLength));
      shared.set(data);
      return { ...t, data: shared };
    },
    () => {
      const copy = data.slice();
      structuredClone(copy.buffer, { transfer: [copy.buffer] });
      return { ...t, data: copy };
    },
    () => ({ ...t, data: new Float64Array(data.length) }),
    () => ({ ...t, data: new DataView(data.buffer) }),
    () => ({ ...t, shape: t.shape.map((d) => (g.next() < 0.4 ? g.pick(WEIRD) : d)) }),
    () => ({ ...t, shape: [...t.shape, 1] }),
    () => ({ ...t, shape: t.shape.slice(1) }),
    () => ({ ...t, shape: t.shape.map(() => 0), data: new data.constructor(0) }),
    () => ({ ...t, dtype: g.pick(WEIRD) }),
    () => ({ dims: t.shape, type: t.dtype, data, location: g.pick(['cpu', 'gpu-buffer', 'texture', 5]) }),
    () => ({ ...t, data: data instanceof Float32Array ? data.slice().fill(g.pick([NaN, Infinity, 3e38])) : data }),
    () => ({ ...t, data: new data.constructor(Math.floor(g.next() * 100)) }),
    () => g.pick(WEIRD),
  ];
  return g.pick(mutations)();
}

// One to three mistakes in a call's inputs, attributes or options.
function mutateCall(g, inputs, attrs) {
  inputs = { ...inputs };
  attrs = { ...attrs };
  let options;
  for (let k = 1 + Math.floor(g.next() * 3); k > 0; k--) {
    const names = Object.keys(inputs);
    const r = g.next();
    if (r < 0.45 && names.length) {
      const name = g.pick(names);
      inputs[name] = mutateTensor(g, inputs[name]);
    } else if (r < 0.55 && names.length) {
      delete inputs[g.pick(names)];
    } else if (r < 0.8) {
      const keys = Object.keys(attrs);
      attrs[keys.length && g.next() < 0.7 ? g.pick(keys) : g.pick(['softcap', 'scale', 'zzz'])] = g.pick(WEIRD);
    } else if (r < 0.9) {
      options = { ...options, [g.pick(['threads', 'path', 'into', 'outputs'])]: g.pick(WEIRD) };
    } else {
      options = g.pick([null, 5, 'x', Symbol('o'), { into: { output: new Float32Array(3) } },
        { into: { zzz: new Float32Array(2) } }, { into: { output: new DataView(new ArrayBuffer(8)) } }]);
    }
  }
  return { inputs, attrs, options };
}

const RANGES = { uint8: [0, 255], int8: [-128, 127] };
const random = (dtype, shape, seed, [low, high] = RANGES[dtype] ?? [-1, 1]) =>
  materializeTensor({ dtype, shape, random: { seed, low, high } });

// A KvCache session: a config with at most one mistake, then steps, loads, reads, truncations and reserves, each
// valid or not.
function kvCacheSession(g, inst, call) {
  const N = 4, Nk = 2, H = 16;
  const dtype = g.pick(['float32', 'float16', 'int8', 'uint8']);
  const config = { kvHeads: Nk, headSize: H, capacity: 8, dtype };
  if (g.next() < 0.3) config[g.pick(['batch', 'kvHeads', 'headSize', 'capacity', 'dtype', 'window'])] = g.pick(WEIRD);
  let cache;
  call(() => { cache = inst.createKvCache(g.next() < 0.05 ? g.pick(WEIRD) : config); });
  if (!cache) return;
  const input = dtype === 'float16' ? 'float16' : 'float32';
  const quantized = dtype === 'int8' || dtype === 'uint8';
  const attrs = { num_heads: N, kv_num_heads: Nk, ...(quantized ? {
    k_quant_type: 'PER_TENSOR', v_quant_type: 'PER_TENSOR', kv_cache_bit_width: dtype === 'int8' ? 8 : 4 } : {}) };
  for (let op = 0; op < 8; op++) {
    const S = 1 + Math.floor(g.next() * 3);
    const tokens = {
      query: random(input, [1, S, N * H], op + 1), key: random(input, [1, S, Nk * H], op + 2),
      value: random(input, [1, S, Nk * H], op + 3),
      ...(quantized ? { k_scale: random('float32', [1], 4, [0.01, 0.02]),
        v_scale: random('float32', [1], 5, [0.01, 0.02]) } : {}),
    };
    const valid = g.next() < 0.4;
    const m = valid ? { inputs: tokens, attrs } : mutateCall(g, tokens, attrs);
    const arg = () => (valid ? Math.floor(g.next() * 9) : g.pick(WEIRD));
    g.pick([
      () => call(() => cache.step(m.inputs, m.attrs, m.options)),
      () => call(() => cache.load(valid ? cache.read() : { past_key: g.pick(WEIRD), past_value: tokens.key },
        g.pick([undefined, { length: arg() }, g.pick(WEIRD)]))),
      () => call(() => cache.read(g.pick([undefined, { into: g.pick(WEIRD) }, g.pick(WEIRD)]))),
      () => call(() => cache.truncate(arg())),
      () => call(() => cache.reserve(arg())),
      () => call(() => [cache.length, cache.rows, cache.clear()]),
    ])();
  }
  cache.dispose();
}

// The same for a QAttentionCache (B=1, 2 heads of 8, hidden 16).
function qattentionCacheSession(g, inst, call) {
  const config = { heads: 2, headSize: 8, capacity: 6 };
  if (g.next() < 0.3) config[g.pick(['batch', 'heads', 'headSize', 'capacity'])] = g.pick(WEIRD);
  let cache;
  call(() => { cache = inst.createQAttentionCache(config); });
  if (!cache) return;
  const attrs = { num_heads: 2 };
  for (let op = 0; op < 6; op++) {
    const tokens = {
      input: random('uint8', [1, 1 + Math.floor(g.next() * 2), 16], op + 1), weight: random('int8', [16, 48], 2),
      bias: random('float32', [48], 3), input_scale: { data: new Float32Array([0.02]), shape: [] },
      weight_scale: { data: new Float32Array([0.003]), shape: [] },
    };
    const m = g.next() < 0.4 ? { inputs: tokens, attrs } : mutateCall(g, tokens, attrs);
    g.pick([
      () => call(() => cache.step(m.inputs, m.attrs, m.options)),
      () => call(() => cache.load(g.next() < 0.5 ? cache.read() : { past: g.pick(WEIRD) })),
      () => call(() => cache.read(g.pick([undefined, { into: g.pick(WEIRD) }]))),
      () => call(() => cache.truncate(g.next() < 0.5 ? Math.floor(g.next() * 4) : g.pick(WEIRD))),
      () => call(() => [cache.length, cache.clear()]),
    ])();
  }
  cache.dispose();
}

// A corpus call with one input pinned (valid, or a mistake), now and then after the pin was disposed.
function pinnedCall(g, inst, call, p) {
  const names = Object.keys(p.inputs);
  const name = g.pick(names);
  let pinned;
  call(() => { pinned = inst.pin(g.next() < 0.7 ? p.inputs[name] : mutateTensor(g, p.inputs[name])); });
  if (!pinned) return;
  if (g.next() < 0.2) pinned.dispose();
  call(() => inst.run(p.op, { ...p.inputs, [name]: pinned }, p.attrs));
  pinned.dispose();
}

for (const build of ['simd', 'simd-threaded']) {
  test(`${build}: ${CASES} mutated calls and cache sessions (seed ${SEED}) return or throw a one-line AttnkitError`,
    async (t) => {
      const inst = await createInstance({ build, threads: 2 });
      try {
        const g = generator(SEED);
        const counts = { ok: 0, refused: 0 };
        const call = (fn) => {
          try {
            fn();
            counts.ok++;
          } catch (e) {
            assert.ok(e instanceof AttnkitError, `not an AttnkitError: ${e?.stack ?? String(e)}`);
            assert.ok(e.code === 1 || e.code === 2, `code ${e.code}: ${e.message}`);
            assert.doesNotMatch(e.message, /\n|trapped/);
            assert.ok(!inst.disposed, e.message);
            counts.refused++;
          }
        };
        const baseline = corpus[0];
        const bits = inst.run(baseline.op, baseline.inputs, baseline.attrs);
        for (let i = 0; i < CASES; i++) {
          const r = g.next();
          if (r < 0.08) kvCacheSession(g, inst, call);
          else if (r < 0.12) qattentionCacheSession(g, inst, call);
          else if (r < 0.16) pinnedCall(g, inst, call, g.pick(corpus));
          else {
            const p = g.pick(corpus);
            const m = mutateCall(g, p.inputs, p.attrs);
            call(() => inst.run(p.op, m.inputs, m.attrs, m.options));
          }
        }
        assert.deepEqual(inst.run(baseline.op, baseline.inputs, baseline.attrs), bits);
        assert.ok(counts.ok > 0 && counts.refused > 0, JSON.stringify(counts));
        t.diagnostic(`${counts.ok} calls returned, ${counts.refused} refused`);
      } finally {
        inst.dispose();
      }
    });
}
