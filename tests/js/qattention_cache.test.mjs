// attnkit JS package (node:test): the QAttention past/present cache in wasm memory, on both builds. Every step must
// give the stateless op's output bit for bit when that op is handed the previous step's present, and read() that
// present; a cache loaded from ORT's present (an onnxruntime-node Tensor), truncated or cleared continues with the
// same bits; errors are AttnkitErrors naming the rule, and steps do not grow wasm memory.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { AttnkitError, createInstance } from '../../js/index.js';
import { materializeTensor } from '../../js/case.js';

const B = 2, N = 3, H = 16, D = N * H;
const instances = [];
after(() => instances.forEach((i) => i.dispose()));

// The model's projection (the same every step) and one step's S new tokens.
const model = {
  weight: materializeTensor({ dtype: 'int8', shape: [D, 3 * D], random: { seed: 1 } }),
  bias: materializeTensor({ dtype: 'float32', shape: [3 * D], random: { seed: 2, low: -0.5, high: 0.5 } }),
  input_scale: { data: new Float32Array([1 / 128]), shape: [] },
  weight_scale: { data: new Float32Array([0.002]), shape: [] },
};
const tokens = (S, seed) => ({
  input: materializeTensor({ dtype: 'uint8', shape: [B, S, D], random: { seed } }), ...model,
});
const attrs = { num_heads: N, unidirectional: 1 };

async function instance(build) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  return inst;
}

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: steps give the stateless op's bits, and read() its present`, async () => {
    const inst = await instance(build);
    const cache = inst.createQAttentionCache({ batch: B, heads: N, headSize: H, capacity: 12 });
    let present = null;
    const output = new Float32Array(B * D);
    for (const [step, S] of [5, 1, 1, 2, 1].entries()) {
      const fresh = tokens(S, 10 + step);
      const cached = cache.step(fresh, attrs, S === 1 ? { into: { output } } : {});
      if (S === 1) assert.equal(cached.output.data, output);
      const stateless = inst.qAttention({ ...fresh, ...(present ? { past: present } : {}) }, attrs,
        { outputs: ['output', 'present'] });
      assert.deepEqual(cached.output.data, stateless.output.data, `step ${step}`);
      present = stateless.present;
      assert.deepEqual(cache.read().present, present, `step ${step}: read()`);
    }
    assert.equal(cache.length, 10);
    cache.dispose();
    assert.throws(() => cache.length, (e) => e instanceof AttnkitError && /^qattention cache: disposed/.test(e.message));
  });

  test(`${build}: load (ORT's present), truncate and clear continue with the same bits; memory stays flat`, async () => {
    const inst = await instance(build);
    const ort = await import('onnxruntime-node');
    const cache = inst.createQAttentionCache({ batch: B, heads: N, headSize: H, capacity: 64 });
    const prompt = tokens(4, 1), token = tokens(1, 2), draft = tokens(2, 3);
    const prefix = inst.qAttention(prompt, attrs, { outputs: ['output', 'present'] }).present;
    cache.load({ past: new ort.Tensor('float32', prefix.data, prefix.shape) });
    assert.equal(cache.length, 4);
    const afterToken = cache.step(token, attrs).output.data;
    const drafted = cache.step(draft, attrs).output.data;
    cache.truncate(5);
    assert.deepEqual(cache.step(draft, attrs).output.data, drafted);
    cache.clear();
    cache.step(prompt, attrs);
    assert.deepEqual(cache.step(token, attrs).output.data, afterToken);

    const output = new Float32Array(B * D);
    const before = inst.memoryBytes();
    for (let i = 0; i < 50; i++) {
      cache.truncate(5);
      cache.step(token, attrs, { into: { output } });
    }
    assert.equal(inst.memoryBytes(), before);
    cache.dispose();
  });

  test(`${build}: errors name the rule and leave the cache as it was`, async () => {
    const inst = await instance(build);
    assert.throws(() => inst.createQAttentionCache({ heads: N, headSize: H, capacity: 0 }),
      (e) => e instanceof AttnkitError && e.code === 2 && /must be positive/.test(e.message));
    assert.throws(() => inst.createQAttentionCache({ heads: N, headSize: 1.5, capacity: 4 }),
      (e) => e instanceof AttnkitError && /qattention cache: headSize must be an integer/.test(e.message));
    const cache = inst.createQAttentionCache({ batch: B, heads: N, headSize: H, capacity: 6 });
    cache.step(tokens(4, 1), attrs);
    const refused = [
      [() => cache.step(tokens(3, 2), attrs), /3 new tokens after 4 exceed its capacity 6/],
      [() => cache.step({ ...tokens(1, 2), past: cache.read().present }, attrs), /^past: supplied by the cache/],
      [() => cache.step(tokens(1, 2), { num_heads: 4 }), /^num_heads: 4, the cache holds 3 heads/],
      [() => cache.truncate(5), /truncate length 5 must be in \[0, 4\]/],
      [() => cache.truncate(-1), /qattention cache: truncate length must be an integer/],
      [() => cache.load({ past: { data: new Float32Array(2 * B * N * 7 * H), shape: [2, B, N, 7, H] } }),
        /past: 7 rows exceed the cache's capacity 6/],
    ];
    for (const [call, message] of refused) {
      assert.throws(call, (e) => e instanceof AttnkitError && message.test(e.message), String(message));
    }
    assert.equal(cache.length, 4);
    cache.dispose();
  });
}
