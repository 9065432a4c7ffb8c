// attnkit JS package (node:test): the KV cache that lives in wasm memory, on both builds. Each step must give
// the stateless op's output bit for bit when that op is handed the previous step's present as its past
// (both read the same cache rows with the same tiling), for float and quantized caches, with rotary; and so must a
// cache whose tokens were read out, loaded or truncated, and a window cache against the stateless window op.
// Stateless steps that continue their past run in ORT's shared-buffer form inside the package; they must give the
// ordinary form's bits.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { AttnkitError, createInstance } from '../../js/index.js';
import { materializeTensor } from '../../js/case.js';

const N = 4, Nk = 2, H = 32;
const instances = [];
after(() => instances.forEach((i) => i.dispose()));

function random(dtype, shape, seed, low = -1, high = 1) {
  return materializeTensor({ dtype, shape, random: { seed, low, high } });
}

// edit(step, fresh) may change a step's inputs in place before both runs.
async function checkCacheMatchesStateless(build, cacheDtype, attrs, extra, edit = () => {}) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  const cache = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 16, dtype: cacheDtype });
  let past = null;
  let length = 0;
  const inputDtype = cacheDtype === 'float16' ? 'float16' : 'float32';
  for (const [step, S] of [5, 1, 1, 1].entries()) {
    const fresh = {
      query: random(inputDtype, [1, S, N * H], 10 * step + 1),
      key: random(inputDtype, [1, S, Nk * H], 10 * step + 2),
      value: random(inputDtype, [1, S, Nk * H], 10 * step + 3),
      ...extra,
    };
    edit(step, fresh);
    // Single-token steps fill one output array the caller keeps (the `into` option), as a decode loop would.
    const target = S === 1 ? new fresh.query.data.constructor(N * H) : undefined;
    const cached = cache.step(fresh, attrs, target ? { into: { output: target } } : {});
    if (target) assert.equal(cached.output.data, target);
    const total = length + S;
    const stateless = inst.groupQueryAttention({
      ...fresh,
      ...(past ?? (inputDtype === cacheDtype ? {} : {
        // A quantized prompt needs typed past tensors of length 0, as in ORT.
        past_key: { data: new (cacheDtype === 'int8' ? Int8Array : Uint8Array)(0), shape: [1, Nk, 0, cacheDtype === 'uint8' ? H / 2 : H] },
        past_value: { data: new (cacheDtype === 'int8' ? Int8Array : Uint8Array)(0), shape: [1, Nk, 0, cacheDtype === 'uint8' ? H / 2 : H] },
      })),
      seqlens_k: { data: new Int32Array([total - 1]), shape: [1] },
      total_sequence_length: { data: new Int32Array([total]), shape: [1] },
    }, attrs);
    assert.deepEqual(cached.output.data, stateless.output.data, `${build} ${cacheDtype} step ${step}`);
    past = { past_key: stateless.present_key, past_value: stateless.present_value };
    length = total;
    assert.equal(cache.length, length);
  }
  cache.dispose();
}

const rotary = {
  cos_cache: random('float32', [32, H / 2], 100),
  sin_cache: random('float32', [32, H / 2], 101),
};
const quant = (bits) => ({
  k_quant_type: 'PER_CHANNEL', v_quant_type: 'PER_CHANNEL', kv_cache_bit_width: bits,
});
const scales = {
  k_scale: random('float32', [Nk * H], 200, 0.005, 0.01),
  v_scale: random('float32', [Nk * H], 201, 0.005, 0.01),
};

const qkNorm = {
  q_norm_weight: random('float32', [H], 300, 0.5, 1.5),
  k_norm_weight: random('float32', [H], 301, 0.5, 1.5),
};

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: float32 cache with rotary matches the stateless op step by step`, () =>
    checkCacheMatchesStateless(build, 'float32', { num_heads: N, kv_num_heads: Nk, do_rotary: 1 }, rotary));
  test(`${build}: an int8 cache with rotary and q/k_norm_weight matches the stateless op step by step`, () =>
    checkCacheMatchesStateless(build, 'int8', { num_heads: N, kv_num_heads: Nk, do_rotary: 1, ...quant(8) },
      { ...rotary, ...scales, ...qkNorm }));
  // An fp16 cache reads the past rows it has checked without the exponent-31 handling (wasm: 8 operations per 8
  // elements instead of 12); the inf and the NaN that steps store must switch that off for the steps after them.
  test(`${build}: a float16 cache that stores an inf and a NaN matches the stateless op step by step`, () =>
    checkCacheMatchesStateless(build, 'float16', { num_heads: N, kv_num_heads: Nk }, {}, (step, fresh) => {
      if (step === 1) fresh.value.data[3] = 0x7c00;
      if (step === 2) fresh.key.data[Nk * H - 1] = 0xfe00;
    }));
  test(`${build}: int8 and int4 caches match the stateless op step by step`, async () => {
    await checkCacheMatchesStateless(build, 'int8', { num_heads: N, kv_num_heads: Nk, ...quant(8) }, scales);
    await checkCacheMatchesStateless(build, 'uint8', { num_heads: N, kv_num_heads: Nk, ...quant(4) }, scales);
  });
}

// A window cache (capacity 10 rows, window 6): a prompt longer than the capacity, decoding across evictions and a
// chunk, each step with the stateless window op's bits (sliding_window_cache = 1, the previous present as past);
// read() gives its held rows, and a new cache loaded with a stateless present and its token count goes on alike.
async function checkWindowCache(build, cacheDtype, attrs, extra) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  const capacity = 10, window = 6, row = cacheDtype === 'uint8' ? H / 2 : H;
  const cache = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity, dtype: cacheDtype, window });
  const Typed = { float32: Float32Array, int8: Int8Array, uint8: Uint8Array }[cacheDtype];
  let past = { past_key: { data: new Typed(Nk * capacity * row), shape: [1, Nk, capacity, row] } };
  past.past_value = past.past_key;
  let length = 0;
  const statelessStep = (fresh, pastTensors, tokens) => inst.groupQueryAttention({
    ...fresh, ...pastTensors,
    seqlens_k: { data: new Int32Array([tokens + fresh.query.shape[1] - 1]), shape: [1] },
    total_sequence_length: { data: new Int32Array([tokens + fresh.query.shape[1]]), shape: [1] },
  }, { ...attrs, sliding_window_cache: 1, local_window_size: window });
  const freshTokens = (S, seed) => ({
    query: random('float32', [1, S, N * H], seed + 1),
    key: random('float32', [1, S, Nk * H], seed + 2),
    value: random('float32', [1, S, Nk * H], seed + 3),
    ...extra,
  });
  for (const [step, S] of [13, 1, 1, 1, 1, 1, 3, 1].entries()) {
    const fresh = freshTokens(S, 10 * step);
    const cached = cache.step(fresh, attrs);
    const stateless = statelessStep(fresh, past, length);
    assert.deepEqual(cached.output.data, stateless.output.data, `${build} ${cacheDtype} window step ${step}`);
    past = { past_key: stateless.present_key, past_value: stateless.present_value };
    length += S;
    assert.equal(cache.length, length);
    const { present_key: held } = cache.read();
    assert.deepEqual(held.shape, [1, Nk, cache.rows, row]);
    assert.deepEqual(held.data.subarray(0, cache.rows * row), stateless.present_key.data.subarray(0, cache.rows * row));
  }
  const loaded = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity, dtype: cacheDtype, window });
  loaded.load(past, { length });
  const fresh = freshTokens(1, 500);
  assert.deepEqual(loaded.step(fresh, attrs).output.data, statelessStep(fresh, past, length).output.data);
  assert.throws(() => cache.reserve(20), (e) => e instanceof AttnkitError && /keeps its capacity/.test(e.message));
  assert.throws(() => cache.truncate(3), (e) => e instanceof AttnkitError && /no longer holds token/.test(e.message));
  loaded.dispose();
  cache.dispose();
}

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: window caches (float32 with rotary, int4) follow the stateless window op`, async () => {
    await checkWindowCache(build, 'float32', { num_heads: N, kv_num_heads: Nk, do_rotary: 1 }, rotary);
    await checkWindowCache(build, 'uint8', { num_heads: N, kv_num_heads: Nk, ...quant(4) }, scales);
  });
}

// A past with one row more than seqlens_k uses is not a continuation, so it takes the ordinary form, whose
// present drops that row: the same present and output as the shared-buffer form must give without it.
async function checkSharedFormMatchesOrdinary(build, cacheDtype, attrs, extra) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  const P = 7;
  const columns = cacheDtype === 'uint8' ? H / 2 : H;
  for (const S of [1, 3]) {
    const B = S === 1 ? 2 : 1;  // chunked prefill over a past takes batch 1 (ORT's rule)
    const float = cacheDtype === 'float32';
    const past = (seed, rows) => random(cacheDtype, [B, Nk, rows, columns], seed, float ? -1 : 0, float ? 1 : 127);
    // A buffer with room for the new rows (ORT's static cache: a total within it), and its first P rows.
    const rows = P + S;
    const padded = { past_key: past(300, rows), past_value: past(301, rows) };
    const exact = {};
    for (const name of ['past_key', 'past_value']) {
      const { data, shape } = padded[name];
      const kept = new data.constructor(B * Nk * P * columns);
      for (let h = 0; h < B * Nk; h++) {
        kept.set(data.subarray(h * rows * columns, (h * rows + P) * columns), h * P * columns);
      }
      exact[name] = { data: kept, shape: [shape[0], shape[1], P, shape[3]] };
    }
    const inputs = {
      query: random('float32', [B, S, N * H], 310 + S),
      key: random('float32', [B, S, Nk * H], 320 + S),
      value: random('float32', [B, S, Nk * H], 330 + S),
      seqlens_k: { data: new Int32Array(B).fill(P + S - 1), shape: [B] },
      total_sequence_length: { data: new Int32Array([P + S]), shape: [1] },
      ...extra,
    };
    const ordinary = inst.groupQueryAttention({ ...inputs, ...padded }, attrs);
    const shared = inst.groupQueryAttention({ ...inputs, ...exact }, attrs);
    for (const name of ['output', 'present_key', 'present_value']) {
      assert.deepEqual(shared[name].shape, ordinary[name].shape, `${build} ${cacheDtype} S=${S} ${name}`);
      assert.deepEqual(shared[name].data, ordinary[name].data, `${build} ${cacheDtype} S=${S} ${name}`);
    }
    // Only the output requested, filled into the caller's array: the caches are not copied out.
    const into = new Float32Array(B * S * N * H);
    const only = inst.groupQueryAttention({ ...inputs, ...exact }, attrs,
      { outputs: ['output'], into: { output: into } });
    assert.deepEqual(Object.keys(only), ['output']);
    assert.equal(only.output.data, into);
    assert.deepEqual(into, ordinary.output.data);
  }
}

// Shared KV (key and value with 0 tokens: the past already holds the new rows) is not a continuation: over a past
// one row short it is refused, naming the past as the caller gave it.
test('shared KV takes the ordinary form and its checks', async () => {
  const inst = await createInstance({ build: 'simd' });
  instances.push(inst);
  const P = 7;
  const floats = (n) => new Float32Array(n).fill(0.25);
  const inputs = {
    query: { data: floats(N * H), shape: [1, 1, N * H] },
    key: { data: floats(0), shape: [1, 0, Nk * H] },
    value: { data: floats(0), shape: [1, 0, Nk * H] },
    past_key: { data: floats(Nk * P * H), shape: [1, Nk, P, H] },
    past_value: { data: floats(Nk * P * H), shape: [1, Nk, P, H] },
    seqlens_k: { data: new Int32Array([P]), shape: [1] },
    total_sequence_length: { data: new Int32Array([P + 1]), shape: [1] },
  };
  assert.throws(() => inst.groupQueryAttention(inputs, { num_heads: N, kv_num_heads: Nk }), (e) =>
    e instanceof AttnkitError && e.code === 2 && e.message.includes(`dim 2 = ${P} must be >= total_sequence_length`));
});

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: stateless steps in the shared-buffer form give the ordinary form's bits`, async () => {
    await checkSharedFormMatchesOrdinary(build, 'float32', { num_heads: N, kv_num_heads: Nk, do_rotary: 1 }, rotary);
    await checkSharedFormMatchesOrdinary(build, 'int8', { num_heads: N, kv_num_heads: Nk, ...quant(8) }, scales);
    await checkSharedFormMatchesOrdinary(build, 'uint8', { num_heads: N, kv_num_heads: Nk, ...quant(4) }, scales);
  });
}

// The tokens [0, S) of a fixed 6-token prompt, with the case's extra inputs.
function promptTokens(S, extra) {
  const take = (t, width) => ({ data: t.data.slice(0, S * width), shape: [1, S, width] });
  const full = { query: random('float32', [1, 6, N * H], 401), key: random('float32', [1, 6, Nk * H], 402),
    value: random('float32', [1, 6, Nk * H], 403) };
  return { query: take(full.query, N * H), key: take(full.key, Nk * H), value: take(full.value, Nk * H), ...extra };
}

// A cache's tokens move: read() out of one cache and load()ed into another (its first rows only, then grown by
// reserve()), an ORT-layout present of the stateless op loaded, and a cache truncated back to the prefix all continue
// with the bits of the stateless op continuing that prefix: a shared prompt computed once, a saved conversation, a
// rejected draft.
async function checkPrefixReuse(build, cacheDtype, attrs, extra) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  const columns = cacheDtype === 'uint8' ? H / 2 : H;
  const full = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 16, dtype: cacheDtype });
  full.step(promptTokens(6, extra), attrs);
  const saved = full.read();
  assert.deepEqual(saved.present_key.shape, [1, Nk, 6, columns]);
  assert.equal(saved.present_key.dtype, cacheDtype);

  const emptyPast = cacheDtype === 'float32' ? {} : {
    past_key: { data: new saved.present_key.data.constructor(0), shape: [1, Nk, 0, columns] },
    past_value: { data: new saved.present_key.data.constructor(0), shape: [1, Nk, 0, columns] },
  };
  const stateless = inst.groupQueryAttention({ ...promptTokens(4, extra), ...emptyPast,
    seqlens_k: { data: new Int32Array([3]), shape: [1] },
    total_sequence_length: { data: new Int32Array([4]), shape: [1] },
  }, attrs);
  const imported = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 12, dtype: cacheDtype });
  imported.load({ past_key: stateless.present_key, past_value: stateless.present_value });
  const reloaded = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 4, dtype: cacheDtype });
  reloaded.load({ past_key: saved.present_key, past_value: saved.present_value }, { length: 4 });
  reloaded.reserve(8);  // room for the next token, the four kept
  assert.equal(reloaded.capacity, 8);
  full.truncate(4);
  for (const cache of [imported, reloaded, full]) assert.equal(cache.length, 4);
  assert.deepEqual(reloaded.read().present_key.data, stateless.present_key.data);

  const next = { query: random('float32', [1, 1, N * H], 411), key: random('float32', [1, 1, Nk * H], 412),
    value: random('float32', [1, 1, Nk * H], 413), ...extra };
  const want = inst.groupQueryAttention({ ...next, past_key: stateless.present_key, past_value: stateless.present_value,
    seqlens_k: { data: new Int32Array([4]), shape: [1] },
    total_sequence_length: { data: new Int32Array([5]), shape: [1] },
  }, attrs);
  for (const [name, cache] of Object.entries({ imported, reloaded, full })) {
    assert.deepEqual(cache.step(next, attrs).output.data, want.output.data, `${build} ${cacheDtype} ${name}`);
    assert.deepEqual(cache.read().present_value.data, want.present_value.data, `${build} ${cacheDtype} ${name}`);
    cache.dispose();
  }
}

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: cached tokens read out, loaded, imported from ORT's layout or truncated continue with the same bits`,
    async () => {
      await checkPrefixReuse(build, 'float32', { num_heads: N, kv_num_heads: Nk, do_rotary: 1 }, rotary);
      await checkPrefixReuse(build, 'uint8', { num_heads: N, kv_num_heads: Nk, ...quant(4) }, scales);
    });
}

test('kv cache misuse is an AttnkitError naming the rule', async () => {
  const inst = await createInstance({ build: 'simd' });
  instances.push(inst);
  assert.throws(() => inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 0 }), (e) =>
    e instanceof AttnkitError && e.message.includes('capacity'));
  assert.throws(() => inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 1e12 }), (e) =>
    e instanceof AttnkitError && e.message === 'kv cache: capacity must be an integer in [0, 2147483647], got 1000000000000');
  const cache = inst.createKvCache({ kvHeads: 1, headSize: 8, capacity: 2 });
  const x = { data: new Float32Array(3 * 8), shape: [1, 3, 8] };
  assert.throws(() => cache.step({ query: x, key: x, value: x }, { num_heads: 1, kv_num_heads: 1 }), (e) =>
    e instanceof AttnkitError && e.message.includes('exceed the capacity'));
  const rows = (tokens, ArrayType = Float32Array) => ({ data: new ArrayType(tokens * 8), shape: [1, 1, tokens, 8] });
  const refused = (call, text) => assert.throws(call, (e) => e instanceof AttnkitError && e.message.includes(text));
  refused(() => cache.load({ past_key: rows(3), past_value: rows(3) }), '3 tokens exceed the capacity 2');
  refused(() => cache.load({ past_key: rows(2, Int8Array), past_value: rows(2, Int8Array) }), 'int8 is not the cache');
  refused(() => cache.load({ past_key: rows(2) }), 'kv cache: load needs both past_key and past_value');
  refused(() => cache.load({ past_key: rows(2), past_value: rows(2) }, { length: 1.5 }), 'length must be');
  cache.load({ past_key: rows(2), past_value: rows(2) }, { length: 1 });
  assert.equal(cache.length, 1);
  refused(() => cache.truncate(2), 'cannot truncate to 2 tokens: it holds 1');
  refused(() => cache.truncate(-1), 'truncate length must be an integer in [0, 2147483647], got -1');
  refused(() => cache.reserve(2 ** 31), 'capacity must be');
  refused(() => cache.reserve(2 ** 30), 'larger than 16 GiB');
  assert.throws(() => cache.reserve(2 ** 27), (e) => e instanceof AttnkitError && e.code === 1  // beyond wasm32
    && e.message === 'kv cache: out of memory allocating [1, 1, 134217728, 8]');
  cache.reserve(1);
  assert.equal(cache.capacity, 2);
  cache.dispose();
  assert.throws(() => cache.step({}, {}), (e) => e instanceof AttnkitError && e.message.includes('disposed'));
  refused(() => cache.read(), 'disposed');
});
