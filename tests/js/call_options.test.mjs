// attnkit JS package (node:test): the options every op call takes, on both builds, through the stateless decode
// step that runs in place (sharedCachePlan) as well as the ordinary form: an empty outputs list means the defaults
// (as the C ABI and the native CLI read it), { stats } receives the op's scratch high-water mark (cache steps too),
// options that are not an object are refused by runCase as by every other call, a misspelt option or config key is
// refused as a misspelt attribute is, and an input set to undefined is absent.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { createInstance } from '../../js/index.js';

const instances = [];
after(() => instances.forEach((i) => i.dispose()));

const wave = (n, s) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + s));
// One new token after P cached ones (in place), or a 3-token prompt (the ordinary form).
function gqaCall(P) {
  const S = P ? 1 : 3;
  const inputs = {
    query: { data: wave(S * 16, 1), shape: [1, S, 16] },
    key: { data: wave(S * 8, 2), shape: [1, S, 8] },
    value: { data: wave(S * 8, 3), shape: [1, S, 8] },
    seqlens_k: { data: new Int32Array([P + S - 1]), shape: [1] },
    total_sequence_length: { data: new Int32Array([P + S]), shape: [1] },
  };
  if (P) {
    inputs.past_key = { data: wave(P * 8, 4), shape: [1, 1, P, 8] };
    inputs.past_value = { data: wave(P * 8, 5), shape: [1, 1, P, 8] };
  }
  return { inputs, attrs: { num_heads: 2, kv_num_heads: 1 } };
}

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: [] outputs mean the defaults, stats gets the scratch, bad options are refused`, async () => {
    const ak = await createInstance({ build, threads: 2 });
    instances.push(ak);
    for (const P of [4, 0]) {
      const { inputs, attrs } = gqaCall(P);
      const all = ak.groupQueryAttention(inputs, attrs);
      assert.deepEqual(Object.keys(all), ['output', 'present_key', 'present_value']);
      assert.deepEqual(ak.groupQueryAttention(inputs, attrs, { outputs: [] }), all, `past ${P}`);
      const stats = {};
      assert.deepEqual(ak.groupQueryAttention(inputs, attrs, { stats }), all);
      assert.ok(Number.isInteger(stats.peakScratchBytes) && stats.peakScratchBytes > 0, `${stats.peakScratchBytes}`);
      assert.throws(() => ak.groupQueryAttention(inputs, attrs, { stats: 5 }), /stats must be an object/);
      const caseInputs = Object.fromEntries(Object.entries(inputs).map(([name, t]) => [name,
        { dtype: t.data instanceof Int32Array ? 'int32' : 'float32', shape: t.shape, data: Array.from(t.data) }]));
      const c = { op: 'GroupQueryAttention', attrs, inputs: caseInputs };
      assert.deepEqual(ak.runCase(c).outputs, all);
      assert.throws(() => ak.runCase(c, 'x'), /^AttnkitError: runCase: options must be an object$/);
    }
    // Cache steps report their scratch too, and refuse an `into` they cannot fill before the step, which the
    // cache could not take back (a window cache's evicted rows are gone).
    const cache = ak.createKvCache({ kvHeads: 1, headSize: 8, capacity: 8 });
    const { inputs, attrs } = gqaCall(0);
    const step = { query: inputs.query, key: inputs.key, value: inputs.value };
    const stats = {};
    cache.step(step, attrs, { stats });
    assert.ok(stats.peakScratchBytes > 0, `${stats.peakScratchBytes}`);
    const refused = [{ output: new Float32Array(3) }, { output: new Int32Array(48) }, { present_key: step.key.data }];
    for (const into of refused) {
      assert.throws(() => cache.step(step, attrs, { into }), /^AttnkitError: GroupQueryAttention: into\./);
      assert.equal(cache.length, 3);
    }
    cache.dispose();
    const qcache = ak.createQAttentionCache({ heads: 2, headSize: 8, capacity: 4 });
    const qstats = {};
    qcache.step({
      input: { data: new Uint8Array(2 * 16).fill(3), shape: [1, 2, 16] },
      weight: { data: new Int8Array(16 * 48).fill(1), shape: [16, 48] },
      bias: { data: new Float32Array(48), shape: [48] },
      input_scale: { data: new Float32Array([0.1]), shape: [] },
      weight_scale: { data: new Float32Array([0.1]), shape: [] },
    }, { num_heads: 2, unidirectional: 1 }, { stats: qstats });
    assert.ok(qstats.peakScratchBytes > 0, `${qstats.peakScratchBytes}`);
    assert.throws(() => qcache.step({ input: { data: new Uint8Array(16), shape: [1, 1, 16] } }, { num_heads: 2 },
      { into: { output: new Float32Array(3) } }), /^AttnkitError: QAttention: into\.output must be a Float32Array/);
    assert.equal(qcache.length, 2);
    qcache.dispose();
  });
}

test('a misspelt option or key is refused, naming the ones there are; an undefined input is absent', async () => {
  const ak = await createInstance({ build: 'simd' });
  instances.push(ak);
  const { inputs, attrs } = gqaCall(0);
  const refused = (call, message) => assert.throws(call, (e) => e.name === 'AttnkitError' && e.message === message);
  refused(() => ak.groupQueryAttention(inputs, attrs, { output: ['output'] }),
    'GroupQueryAttention: "output" is not an option (threads, path, outputs, into, stats)');
  refused(() => ak.createKvCache({ kvHeads: 1, headSize: 8, capacity: 8, dtyp: 'int8' }),
    'kv cache: "dtyp" is not an option (batch, kvHeads, headSize, capacity, dtype, window)');
  refused(() => ak.createQAttentionCache({ heads: 2, headsize: 8, capacity: 4 }),
    'qattention cache: "headsize" is not an option (batch, heads, headSize, capacity)');
  await assert.rejects(createInstance({ thread: 2 }),
    (e) => e.name === 'AttnkitError' && e.message === 'init: "thread" is not an option (threads, build, wasmPaths)');
  const cache = ak.createKvCache({ kvHeads: 1, headSize: 8, capacity: 8, window: undefined });
  const step = { query: inputs.query, key: inputs.key, value: inputs.value };
  refused(() => cache.step(step, attrs, { outputs: ['output'] }),
    'kv cache: "outputs" is not an option (threads, path, into, stats)');
  refused(() => cache.load({ past_key: inputs.key, past_value: inputs.value, seqlens_k: inputs.seqlens_k }),
    'kv cache load: "seqlens_k" is not a tensor it takes (past_key, past_value)');
  refused(() => cache.read({ int: {} }), 'kv cache read: "int" is not an option (into)');
  assert.equal(cache.length, 0);
  assert.deepEqual(ak.groupQueryAttention({ ...inputs, attention_bias: undefined }, attrs, { path: undefined }),
    ak.groupQueryAttention(inputs, attrs));
  refused(() => ak.groupQueryAttention({ ...inputs, query: inputs.query.data }, attrs),
    'query: a tensor is { data, shape, dtype? }, not a bare Float32Array');
  // An undefined option or into entry is absent too: runCase keeps the case's own outputs.
  const into = { output: new Float32Array(inputs.query.data.length), present_key: undefined };
  const viaInto = ak.groupQueryAttention(inputs, attrs, { outputs: ['output'], into });
  assert.equal(viaInto.output.data, into.output);
  const tensor = (t) => ({ dtype: 'float32', shape: t.shape, data: Array.from(t.data) });
  const caseObject = { op: 'GroupQueryAttention', attrs, outputs: ['output'], inputs: {
    query: tensor(inputs.query), key: tensor(inputs.key), value: tensor(inputs.value),
    seqlens_k: { dtype: 'int32', shape: [1], data: Array.from(inputs.seqlens_k.data) },
    total_sequence_length: { dtype: 'int32', shape: [1], data: Array.from(inputs.total_sequence_length.data) } } };
  assert.deepEqual(Object.keys(ak.runCase(caseObject, { outputs: undefined }).outputs), ['output']);
});
