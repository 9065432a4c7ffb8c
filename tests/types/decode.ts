// attnkit's TypeScript declarations, checked by using them: a decode loop through a quantized KvCache against the
// stateless op, QAttention, onnxruntime tensors as inputs, a corpus case and the error a bad call throws, written as
// a TypeScript user would.
// tests/js/types.test.mjs compiles this with `tsc --strict` (and exactOptionalPropertyTypes) against the package
// by its name, then runs the output; each `@ts-expect-error` below must stay an error, so declarations that loosen
// (or a typo'd name) fail the check.
import * as attnkit from 'attnkit';
import { AttnkitError, type Attributes, type Inputs, type TensorData } from 'attnkit';
import * as ort from 'onnxruntime-node';

const N = 4, Nk = 2, H = 32, capacity = 16;

// No @types/node here (Debian does not package it): the checks are plain functions.
function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`typed consumer: ${what}`);
}
function sameBits(a: TensorData, b: TensorData): boolean {
  return a.constructor === b.constructor && a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
}

function random(length: number, seed: number): Float32Array {
  const data = new Float32Array(length);
  let state = seed;
  for (let i = 0; i < length; i++) {
    state = (state * 1103515245 + 12345) % 2147483648;
    data[i] = state / 1073741824 - 1;
  }
  return data;
}

// An option set to undefined is absent, also under exactOptionalPropertyTypes (tsconfig.json).
const info: attnkit.Info = await attnkit.init({ threads: 2, wasmPaths: undefined });
check(info.build === 'simd-threaded' || info.build === 'simd', info.reason);
check(attnkit.info().version === info.version, 'info() after init()');

const attrs: Attributes = {
  num_heads: N, kv_num_heads: Nk, k_quant_type: 'PER_TENSOR', v_quant_type: 'PER_TENSOR', kv_cache_bit_width: 8,
};
const scales = {
  k_scale: { data: new Float32Array([0.01]), shape: [1] },
  v_scale: { data: new Float32Array([0.01]), shape: [1] },
};
const cache: attnkit.KvCache = attnkit.createKvCache({ kvHeads: Nk, headSize: H, capacity, dtype: 'int8' });
const output = new Float32Array(N * H);
let past: Pick<Inputs, 'past_key' | 'past_value'> = {
  past_key: { data: new Int8Array(0), shape: [1, Nk, 0, H] },
  past_value: { data: new Int8Array(0), shape: [1, Nk, 0, H] },
};
for (const [step, S] of [5, 1, 1].entries()) {
  const fresh: Inputs = {
    query: { data: random(S * N * H, 3 * step + 1), shape: [1, S, N * H] },
    key: { data: random(S * Nk * H, 3 * step + 2), shape: [1, S, Nk * H] },
    value: { data: random(S * Nk * H, 3 * step + 3), shape: [1, S, Nk * H] },
    ...scales,
  };
  const before = cache.length;
  const stepped = cache.step(fresh, attrs, S === 1 ? { into: { output } } : {});
  const total = before + S;
  const stateless: attnkit.Outputs = await attnkit.groupQueryAttention({
    ...fresh,
    ...past,
    seqlens_k: { data: new Int32Array([total - 1]), shape: [1] },
    total_sequence_length: { data: new Int32Array([total]), shape: [1] },
  }, attrs);
  const data: TensorData = stepped.output.data;
  check(data instanceof Float32Array, 'a float32 output');
  check(S > 1 || data === output, 'a step fills the array handed to it');
  check(sameBits(data, stateless.output.data), `step ${step}: the cache and the stateless op differ`);
  check(stateless.output.shape.join() === [1, S, N * H].join(), 'output shape');
  past = { past_key: stateless.present_key, past_value: stateless.present_value };
  check(cache.length === total, 'length counts the tokens');
}
const { present_key } = cache.read({ into: { present_value: undefined } });
check(present_key.dtype === 'int8' && present_key.shape.join() === [1, Nk, cache.rows, H].join(), 'read()');
cache.truncate(cache.length - 1);
check(cache.length === 6, 'truncate()');

// A window cache reports the rows it holds next to the tokens it stands for.
const local = attnkit.createKvCache({ kvHeads: Nk, headSize: H, capacity: 8, window: 4 });
check(local.window === 4 && local.rows === 0, 'a fresh window cache');
local.dispose();

// Bad input throws AttnkitError naming the rule; code 2 is the CLI's exit status for it.
try {
  cache.step({ query: { data: new Float32Array(3), shape: [1, 1, 3] } }, attrs);
  check(false, 'a 3-wide query was accepted');
} catch (error) {
  check(error instanceof AttnkitError, String(error));
  const code: 1 | 2 = error.code;
  check(code === 2 && error.message.includes('query'), error.message);
}
cache.dispose();

const qattention = await attnkit.qAttention({
  input: { data: new Uint8Array(2 * 8).fill(130), shape: [1, 2, 8] },
  weight: { data: new Int8Array(8 * 24).fill(3), shape: [8, 24] },
  bias: { data: new Float32Array(24), shape: [24] },
  input_scale: { data: new Float32Array([0.02]), shape: [] },
  weight_scale: { data: new Float32Array([0.05]), shape: [] },
}, { num_heads: 2 });
check(qattention.output.shape.join() === '1,2,8', 'QAttention output shape');

// The same model decoding through a QAttentionCache: the prompt, then one token, against the stateless op.
const qcache: attnkit.QAttentionCache = attnkit.createQAttentionCache({ heads: 2, headSize: 4, capacity: 8 });
const projection = {
  weight: attnkit.pin({ data: new Int8Array(8 * 24).fill(3), shape: [8, 24] }),  // copied into wasm memory once
  bias: { data: new Float32Array(24), shape: [24] },
  input_scale: { data: new Float32Array([0.02]), shape: [] },
  weight_scale: { data: new Float32Array([0.05]), shape: [] },
};
qcache.step({ input: { data: new Uint8Array(2 * 8).fill(130), shape: [1, 2, 8] }, ...projection }, { num_heads: 2 });
const { present: afterPrompt } = qcache.read();
const nextToken: attnkit.CallInputs = { input: { data: new Uint8Array(8).fill(7), shape: [1, 1, 8] }, ...projection };
const { output: qstep } = qcache.step(nextToken, { num_heads: 2 });
const qstateless = await attnkit.qAttention({ ...nextToken, past: afterPrompt }, { num_heads: 2 });
check(qcache.length === 3 && afterPrompt.shape.join() === '2,1,2,2,4', 'QAttentionCache length and read()');
check(sameBits(qstep.data, qstateless.output.data), 'a QAttentionCache step against the stateless op');
qcache.dispose();

// onnxruntime tensors (of a model run in onnxruntime-web or -node) pass in as they are, beside attnkit's.
const fromOrt = await attnkit.groupQueryAttention({
  query: new ort.Tensor('float32', random(N * H, 9), [1, 1, N * H]),
  key: new ort.Tensor('float32', random(Nk * H, 10), [1, 1, Nk * H]),
  value: { data: random(Nk * H, 11), shape: [1, 1, Nk * H] },
  seqlens_k: new ort.Tensor('int32', new Int32Array([0]), [1]),
  total_sequence_length: { data: new Int32Array([1]), shape: [1] },
}, { num_heads: N, kv_num_heads: Nk });
check(fromOrt.output.shape.join() === [1, 1, N * H].join(), 'onnxruntime tensors as inputs');

// A corpus case, its inputs generated from seeds as the case format allows.
const caseObject: attnkit.CaseObject = {
  name: 'typed-consumer',
  op: 'GroupQueryAttention',
  attrs: { num_heads: N, kv_num_heads: Nk },
  inputs: {
    query: { dtype: 'float32', shape: [1, 3, N * H], random: { seed: 1 } },
    key: { dtype: 'float32', shape: [1, 3, Nk * H], random: { seed: 2 } },
    value: { dtype: 'float32', shape: [1, 3, Nk * H], random: { seed: 3 } },
    seqlens_k: { dtype: 'int32', shape: [1], data: [2] },
    total_sequence_length: { dtype: 'int32', shape: [1], data: [3] },
  },
};
const { outputs } = await attnkit.runCase(caseObject);
check(outputs.output.data.length === 3 * N * H, 'runCase() output');

// What the declarations must refuse (never called: each would throw, and only the compiler is asked).
export async function refusedByTheTypes(cache: attnkit.KvCache): Promise<void> {
  // @ts-expect-error kvHeads is required
  attnkit.createKvCache({ headSize: H, capacity });
  // @ts-expect-error there is no WebGPU build
  await attnkit.init({ build: 'webgpu' });
  // @ts-expect-error attributes are required
  await attnkit.qAttention({});
  // @ts-expect-error length is read-only
  cache.length = 0;
  // @ts-expect-error a tensor needs a shape (or an onnxruntime tensor's type and dims)
  await attnkit.groupQueryAttention({ query: { data: new Float32Array(3) } }, attrs);
  // @ts-expect-error a string is not tensor data
  await attnkit.groupQueryAttention({ query: { data: 'abc', shape: [3] } }, attrs);
  // @ts-expect-error a misspelt case field is refused, by the types as by the loader
  await attnkit.runCase({ ...caseObject, tolerence: { atol: 1e-5 } });
}

attnkit.dispose();
console.log('typed consumer: ok');
