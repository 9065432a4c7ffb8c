// attnkit JS package (node:test): pinned tensors, on both builds. A tensor pinned once in an instance's wasm memory
// and passed as an input gives the bits of the same tensor passed as an array: rotary tables to KvCache steps, a
// past continued in the shared-buffer form, QAttention's weights to a QAttentionCache step; also after the heap has
// grown (which replaces the single-thread build's buffer). Calls with pinned inputs do not grow memory, a pinned
// tensor pinned again is copied, and one disposed, of a disposed instance, or used by another instance, is refused
// with a message.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { AttnkitError, createInstance, PinnedTensor } from '../../js/index.js';
import { materializeTensor } from '../../js/case.js';

const N = 4, Nk = 2, H = 32;
const instances = [];
after(() => instances.forEach((i) => i.dispose()));

const random = (dtype, shape, seed, low = -1, high = 1) => materializeTensor({ dtype, shape, random: { seed, low, high } });
const rotary = { cos_cache: random('float32', [64, H / 2], 100), sin_cache: random('float32', [64, H / 2], 101) };
const gqaAttrs = { num_heads: N, kv_num_heads: Nk, do_rotary: 1 };
const token = (S, seed) => ({
  query: random('float32', [1, S, N * H], seed),
  key: random('float32', [1, S, Nk * H], seed + 1),
  value: random('float32', [1, S, Nk * H], seed + 2),
});

async function instance(build) {
  const inst = await createInstance({ build, threads: 2 });
  instances.push(inst);
  return inst;
}

for (const build of ['simd-threaded', 'simd']) {
  test(`${build}: pinned rotary tables and a pinned past give the bits of arrays`, async () => {
    const inst = await instance(build);
    const pinned = { cos_cache: inst.pin(rotary.cos_cache), sin_cache: inst.pin(rotary.sin_cache) };
    assert.ok(pinned.cos_cache instanceof PinnedTensor);
    assert.deepEqual(pinned.cos_cache.shape, [64, H / 2]);
    const plain = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 16 });
    const fast = inst.createKvCache({ kvHeads: Nk, headSize: H, capacity: 16 });
    for (const [step, S] of [5, 1, 1].entries()) {
      const fresh = token(S, 10 * step);
      const want = plain.step({ ...fresh, ...rotary }, gqaAttrs).output.data;
      assert.deepEqual(fast.step({ ...fresh, ...pinned }, gqaAttrs).output.data, want, `step ${step}`);
    }
    // The cache read out and pinned is a past that the stateless call lays out again with room for the new row.
    const { present_key, present_value } = fast.read();
    const past = { past_key: inst.pin(present_key), past_value: inst.pin(present_value) };
    const next = {
      ...token(1, 90), seqlens_k: { data: new Int32Array([7]), shape: [1] },
      total_sequence_length: { data: new Int32Array([8]), shape: [1] },
    };
    const want = inst.groupQueryAttention({ ...next, ...rotary, past_key: present_key, past_value: present_value },
      gqaAttrs);
    const got = inst.groupQueryAttention({ ...next, ...pinned, ...past }, gqaAttrs);
    assert.deepEqual(got.output.data, want.output.data);
    assert.deepEqual(got.present_key.data, want.present_key.data);
    // Pinned inputs are not copied again: calls leave the heap as it was.
    const before = inst.memoryBytes();
    for (let i = 0; i < 50; i++) inst.groupQueryAttention({ ...next, ...pinned, ...past }, gqaAttrs);
    assert.equal(inst.memoryBytes(), before);
    for (const t of [...Object.values(pinned), ...Object.values(past)]) t.dispose();
    plain.dispose();
    fast.dispose();
  });

  test(`${build}: QAttentionCache steps with pinned weights; a pin outlives heap growth`, async () => {
    const inst = await instance(build);
    const D = 48;
    const model = {
      weight: random('int8', [D, 3 * D], 1, -128, 127),
      bias: random('float32', [3 * D], 2, -0.5, 0.5),
      input_scale: { data: new Float32Array([1 / 128]), shape: [] },
      weight_scale: { data: new Float32Array([0.002]), shape: [] },
    };
    const pinned = Object.fromEntries(Object.entries(model).map(([k, t]) => [k, inst.pin(t)]));
    // Grow the heap past where the pins were made: the single-thread build's buffer is replaced.
    const heap = inst.memoryBytes();
    const grow = inst.createKvCache({ kvHeads: 8, headSize: 128, capacity: 8192, dtype: 'float32' });  // 64 MB
    assert.ok(inst.memoryBytes() > heap, 'the heap must have grown');
    const attrs = { num_heads: 3, unidirectional: 1 };
    const plain = inst.createQAttentionCache({ heads: 3, headSize: 16, capacity: 8 });
    const fast = inst.createQAttentionCache({ heads: 3, headSize: 16, capacity: 8 });
    for (const [step, S] of [4, 1, 1].entries()) {
      const input = random('uint8', [1, S, D], 20 + step, 0, 255);
      const want = plain.step({ input, ...model }, attrs).output.data;
      assert.deepEqual(fast.step({ input, ...pinned }, attrs).output.data, want, `step ${step}`);
    }
    grow.dispose();
    for (const t of Object.values(pinned)) t.dispose();
    plain.dispose();
    fast.dispose();
  });

  test(`${build}: a disposed pin, another instance's pin and a bad tensor are refused`, async () => {
    const inst = await instance(build);
    const other = await instance(build);
    const query = inst.pin(token(1, 1).query);
    const inputs = {
      ...token(1, 1), seqlens_k: { data: new Int32Array([0]), shape: [1] },
      total_sequence_length: { data: new Int32Array([1]), shape: [1] },
    };
    assert.throws(() => other.groupQueryAttention({ ...inputs, query }, { num_heads: N, kv_num_heads: Nk }),
      (e) => e instanceof AttnkitError && e.message === 'query: the tensor is pinned in another attnkit instance');
    query.dispose();
    query.dispose();  // twice is harmless
    assert.throws(() => inst.groupQueryAttention({ ...inputs, query }, { num_heads: N, kv_num_heads: Nk }),
      (e) => e instanceof AttnkitError && e.message === 'query: the pinned tensor was disposed');
    assert.throws(() => inst.pin({ data: new Float64Array(2), shape: [2] }),
      (e) => e instanceof AttnkitError && /^pin: cannot infer a dtype from Float64Array/.test(e.message));
    const gone = await createInstance({ build, threads: 2 });
    const orphan = gone.pin(token(1, 1).query);
    gone.dispose();
    assert.throws(() => inst.groupQueryAttention({ ...inputs, query: orphan }, { num_heads: N, kv_num_heads: Nk }),
      (e) => e instanceof AttnkitError &&
        e.message === 'query: the instance the tensor is pinned in was disposed; pin it again');
  });

  // Pinning a pinned tensor copies it from where it lies in wasm memory, whose malloc (48 MB here) grows the heap
  // first: the single-thread build's old buffer, and every view of it, is then detached.
  test(`${build}: a pinned tensor pinned again is a copy, also when the heap grows`, async () => {
    const inst = await instance(build);
    const n = 12 << 20;
    const data = Float32Array.from({ length: n }, (_, i) => (i % 4099) * 0.25);
    const first = inst.pin({ data, shape: [n] });
    const second = inst.pin(first);
    first.dispose();
    assert.deepEqual(second.shape, [n]);
    const copy = second._normalized('copy', inst.Module).data;
    for (let i = 0; i < n; i += 4093) assert.equal(copy[i], data[i], `element ${i}`);
    assert.equal(copy[n - 1], data[n - 1]);
    second.dispose();
  });
}
