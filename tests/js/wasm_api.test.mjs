// attnkit npm package tests (node:test): the JS API on both wasm builds (SIMD128 + threads, SIMD128
// single-thread), and the whole case corpus on wasm against the native CLI (bit for bit on its wasm128 table)
// and the double-precision reference. Needs js/dist (npm run build); the native comparisons need
// build/native/attnkit (or ATTNKIT_CLI). package_entry.test.mjs covers the default instance and the JS CLI.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

import { AttnkitError, createInstance } from '../../js/index.js';
import { availableCores, cpusFromCgroupQuota } from '../../js/loader.js';
import { normalizeInput } from '../../js/marshal.js';
import { compareTensors, materializeTensor, qkDefinedColumns } from '../../js/case.js';
import {
  assertMatchesNative, assertSameBits, corpus, haveCli, nativeRun, root, smallGqa,
} from './wasm_test_support.mjs';

const BUILDS = ['simd-threaded', 'simd'];

// Strips the dtype so the package has to infer it from the typed array.
function withoutDtypes(inputs) {
  return Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, { data: t.data, shape: t.shape }]));
}

test('dtype inference: unambiguous typed arrays only', () => {
  const one = (data, dtype) => normalizeInput('x', { data, shape: [data.length], dtype }).dtype;
  assert.equal(one(new Float32Array(2)), 'float32');
  assert.equal(one(new Int8Array(2)), 'int8');
  assert.equal(one(new Uint8Array(2)), 'uint8');
  assert.equal(one(new Int32Array(2)), 'int32');
  assert.equal(one(new BigInt64Array(2)), 'int64');
  assert.equal(one(new Uint16Array(2), 'float16'), 'float16');
  assert.equal(one(new Uint16Array(2), 'bfloat16'), 'bfloat16');
  assert.equal(one([1.5, 2], 'bfloat16'), 'bfloat16');
  assert.throws(() => one(new Uint16Array(2)), (e) => e instanceof AttnkitError && /give dtype/.test(e.message));
  assert.throws(() => one(new Uint8ClampedArray(2)), AttnkitError);
  assert.throws(() => one(new Int32Array(2), 'int64'), (e) => e instanceof AttnkitError && /int64 needs a BigInt64Array/.test(e.message));
});

// A container's --cpus is a cgroup quota that Node 20's availableParallelism() does not see; the default thread
// count takes it into account as the native library does (its AvailableCpus tests parse the same texts).
test('the default thread count: cgroup quotas round up, no limit is 0, and it follows the affinity mask', async () => {
  const cases = [['max 100000', 0], ['200000 100000', 2], ['150000 100000', 2], ['50000 100000', 1],
    ['-1 100000', 0], ['', 0], ['12x 100000', 0], ['100000 0', 0]];
  for (const [text, want] of cases) assert.equal(cpusFromCgroupQuota(text), want, JSON.stringify(text));
  const cores = await availableCores();
  assert.ok(cores >= 1 && cores <= os.availableParallelism(), `${cores} cores`);
  if (process.platform === 'linux' && spawnSync('taskset', ['--version']).status === 0) {
    const loader = new URL('../../js/loader.js', import.meta.url).href;
    const pinned = spawnSync('taskset', ['-c', '0', process.execPath, '--input-type=module', '-e',
      `import { availableCores } from '${loader}'; console.log(await availableCores());`], { encoding: 'utf8' });
    assert.equal(pinned.stdout.trim(), '1', pinned.stderr);
  }
});

// onnxruntime-node's Tensor is onnxruntime-common's, the class onnxruntime-web hands out too.
test('onnxruntime tensors pass in as they are; one on a GPU is refused with what to do', async () => {
  const ort = await import('onnxruntime-node');
  const query = new ort.Tensor('float32', Float32Array.from({ length: 64 }, (_, i) => Math.sin(i)), [1, 1, 64]);
  const taken = normalizeInput('query', query);
  assert.deepEqual([taken.name, taken.dtype, taken.shape], ['query', 'float32', [1, 1, 64]]);
  assert.equal(taken.data, query.data);  // the tensor's own array, not a copy
  assert.equal(normalizeInput('x', new ort.Tensor('float16', new Uint16Array(4), [4])).dtype, 'float16');
  assert.equal(normalizeInput('x', new ort.Tensor('int64', new BigInt64Array(2), [1, 2])).dtype, 'int64');
  assert.throws(() => normalizeInput('x', new ort.Tensor('bool', new Uint8Array(2), [2])),
    (e) => e instanceof AttnkitError && /x: unknown dtype "bool"/.test(e.message));
  const onGpu = ort.Tensor.fromGpuBuffer({ size: 16 }, { dataType: 'float32', dims: [4] });
  assert.throws(() => normalizeInput('key', onGpu), (e) => e instanceof AttnkitError
    && e.message === 'key: an onnxruntime tensor on "gpu-buffer": bring it to the CPU first (await tensor.getData())');

  // A whole call takes them beside plain tensors, with the same bits.
  const ak = await createInstance({ build: 'simd', threads: 1 });
  try {
    const kv = Float32Array.from({ length: 32 }, (_, i) => Math.cos(i));
    const plain = {
      query: { data: query.data, shape: [1, 1, 64] },
      key: { data: kv, shape: [1, 1, 32] },
      value: { data: kv, shape: [1, 1, 32] },
      seqlens_k: { data: new Int32Array([0]), shape: [1] },
      total_sequence_length: { data: new Int32Array([1]), shape: [1] },
    };
    const attrs = { num_heads: 2, kv_num_heads: 1 };
    const fromOrt = ak.groupQueryAttention({
      ...plain, query, key: new ort.Tensor('float32', kv, [1, 1, 32]),
      seqlens_k: new ort.Tensor('int32', new Int32Array([0]), [1]),
    }, attrs);
    assert.deepEqual(fromOrt.output.data, ak.groupQueryAttention(plain, attrs).output.data);
  } finally {
    ak.dispose();
  }
});

for (const build of BUILDS) {
  describe(`wasm build ${build}`, () => {
    let ak;
    before(async () => {
      ak = await createInstance({ build, threads: 2 });
    });
    after(() => ak?.dispose());

    test('info names the build, the reason and the kernel ISA', () => {
      const info = ak.info();
      assert.equal(info.build, build);
      assert.match(info.reason, /\S/);
      assert.equal(typeof info.version, 'string');
      assert.ok(info.available_isas.includes(info.isa));
      assert.equal(info.quantized_qk, 'exact-int16-limbs');  // wasm128 and scalar: the integer limb path
      assert.equal(info.qattention_gemm, info.isa === 'wasm128' ? 'wasm128-dot16' : 'scalar');
      assert.equal(info.threads, build === 'simd' ? 1 : 2);
      assert.equal(info.maxThreads, build === 'simd' ? 1 : 2);  // a worker per thread asked for
    });

    // A call with past copies it into wasm memory with room for the new rows, and present is read where the op
    // wrote it: present must still start with each head's past rows, and fill the caller's arrays.
    test('QAttention with past: present holds the past rows and fills the caller\'s arrays', () => {
      const B = 2, S = 1, N = 2, H = 16, D = N * H, P = 6;
      const random = (dtype, shape, seed) => materializeTensor({ dtype, shape, random: { seed } });
      const inputs = {
        input: random('uint8', [B, S, D], 41),
        weight: random('int8', [D, 3 * D], 42),
        bias: random('float32', [3 * D], 43),
        input_scale: { data: new Float32Array([0.02]), shape: [] },
        weight_scale: { data: new Float32Array([0.003]), shape: [] },
        past: random('float32', [2, B, N, P, H], 44),
      };
      const pastCopy = inputs.past.data.slice();
      const first = ak.qAttention(inputs, { num_heads: N });
      assert.deepEqual(first.present.shape, [2, B, N, P + S, H]);
      for (let h = 0; h < 2 * B * N; h++) {
        assert.deepEqual(first.present.data.subarray(h * (P + S) * H, (h * (P + S) + P) * H),
          pastCopy.subarray(h * P * H, (h + 1) * P * H), `head ${h}`);
      }
      assert.deepEqual(inputs.past.data, pastCopy);  // the caller's past is not written
      const into = { output: new Float32Array(B * S * D), present: new Float32Array(2 * B * N * (P + S) * H) };
      const second = ak.qAttention(inputs, { num_heads: N }, { into });
      assert.equal(second.present.data, into.present);
      assert.deepEqual(into.present, first.present.data);
      assert.deepEqual(into.output, first.output.data);
    });

    test('dtypes are inferred from typed arrays; outputs come back typed', () => {
      const { inputs, attrs } = smallGqa();
      const explicit = ak.groupQueryAttention(inputs, attrs);
      const inferred = ak.groupQueryAttention(withoutDtypes(inputs), attrs);
      assert.deepEqual(Object.keys(explicit).sort(), ['output', 'present_key', 'present_value']);
      for (const [name, t] of Object.entries(explicit)) {
        assert.equal(t.dtype, 'float32');
        assert.ok(t.data instanceof Float32Array, `${name} is a Float32Array`);
        assert.deepEqual(inferred[name], t);
      }
      assert.deepEqual(explicit.output.shape, [1, 5, 64]);
      assert.deepEqual(explicit.present_key.shape, [1, 2, 5, 16]);
    });

    // Attribute values may come as BigInt (int64 in ONNX), and calls alternating between attribute sets reuse the
    // marshaller's encoded strings: each call must still get its own attributes.
    test('BigInt attributes, and alternating attribute sets, give each call its own attributes', () => {
      const { inputs, attrs } = smallGqa();
      const plain = ak.groupQueryAttention(inputs, attrs);
      const big = ak.groupQueryAttention(inputs, Object.fromEntries(Object.entries(attrs).map(([k, v]) =>
        [k, Number.isInteger(v) ? BigInt(v) : v])));
      assert.deepEqual(big, plain);
      const capped = ak.groupQueryAttention(inputs, { ...attrs, softcap: 0.5 });
      assert.notDeepEqual(capped.output.data, plain.output.data);
      for (let i = 0; i < 3; i++) {
        assert.deepEqual(ak.groupQueryAttention(inputs, attrs), plain);
        assert.deepEqual(ak.groupQueryAttention(inputs, { ...attrs, softcap: 0.5 }), capped);
      }
      // JSON would send NaN as null ("must be a number, got null"): non-finite values travel as strings, so the op's
      // own rule answers, as in C++ (a QAttention mask_filter_value of -Infinity is valid: the corpus runs one).
      for (const [scale, text] of [[NaN, 'nan'], [Infinity, 'inf'], [-Infinity, '-inf']]) {
        assert.throws(() => ak.groupQueryAttention(inputs, { ...attrs, scale }), (e) => e instanceof AttnkitError &&
          e.code === 2 && e.message === `scale = ${text} must be finite`);
      }
    });

    test('float16 inputs need the dtype and give Uint16Array outputs', () => {
      const { inputs, attrs } = smallGqa(2);
      const half = { ...inputs };
      for (const name of ['query', 'key', 'value']) {
        half[name] = materializeTensor({ dtype: 'float16', shape: inputs[name].shape, data: Array.from(inputs[name].data) });
      }
      const r = ak.groupQueryAttention(half, attrs);
      assert.equal(r.output.dtype, 'float16');
      assert.ok(r.output.data instanceof Uint16Array);
      assert.throws(() => ak.groupQueryAttention({ ...half, query: { data: half.query.data, shape: half.query.shape } }, attrs),
        (e) => e instanceof AttnkitError && /query.*Uint16Array.*float16 or bfloat16/.test(e.message));
    });

    test('bad tensors are refused in JS with an AttnkitError naming the input', () => {
      const { inputs, attrs } = smallGqa();
      const cases = [
        [{ ...inputs, query: { data: new Float64Array(320), shape: [1, 5, 64] } }, /^query: cannot infer a dtype from Float64Array/],
        [{ ...inputs, query: { data: inputs.query.data, shape: [1, 5, 63] } }, /query: data holds 320 elements, shape \[1, 5, 63\] needs 315/],
        [{ ...inputs, key: { data: inputs.key.data, shape: inputs.key.shape, dtype: 'float16' } }, /key: dtype float16 needs a Uint16Array/],
        [{ ...inputs, value: { data: inputs.value.data, shape: [1, -5, 32] } }, /value: shape must be/],
      ];
      for (const [bad, pattern] of cases) {
        assert.throws(() => ak.groupQueryAttention(bad, attrs), (e) => e instanceof AttnkitError && e.code === 2 && pattern.test(e.message));
      }
    });

    test('invalid attributes come back as AttnkitError with the C ABI message', () => {
      const { inputs } = smallGqa();
      assert.throws(() => ak.groupQueryAttention(inputs, { num_heads: 4, kv_num_heads: 3 }),
        (e) => e instanceof AttnkitError && e.code === 2 && /kv_num_heads/.test(e.message));
      assert.throws(() => ak.run('NoSuchOp', inputs, {}), (e) => e instanceof AttnkitError && /NoSuchOp/.test(e.message));
    });

    test('results are owned copies, untouched by later calls', () => {
      const a = smallGqa(3);
      const b = smallGqa(4);
      const first = ak.groupQueryAttention(a.inputs, a.attrs);
      const snapshot = Float32Array.from(first.output.data);
      assert.ok(!(first.output.data.buffer instanceof SharedArrayBuffer));
      assert.notEqual(first.output.data.buffer, ak.Module.HEAPU8.buffer);
      assert.equal(first.output.data.byteOffset, 0);
      assert.equal(first.output.data.buffer.byteLength, first.output.data.byteLength);
      const second = ak.groupQueryAttention(b.inputs, b.attrs);
      assert.deepEqual(first.output.data, snapshot);
      assert.notDeepEqual(second.output.data, snapshot);
      first.output.data.fill(0);
      assert.deepEqual(ak.groupQueryAttention(a.inputs, a.attrs).output.data, snapshot);
    });

    test('into: the caller\'s arrays are filled and returned; bad ones are refused before any is written', () => {
      const { inputs, attrs } = smallGqa(6);
      const fresh = ak.groupQueryAttention(inputs, attrs);
      const into = { output: new Float32Array(320), present_key: new Float32Array(160) };
      const filled = ak.groupQueryAttention(inputs, attrs, { into });
      assert.equal(filled.output.data, into.output);
      assert.equal(filled.present_key.data, into.present_key);
      for (const name of ['output', 'present_key', 'present_value']) assert.deepEqual(filled[name], fresh[name]);
      // A view into a larger buffer is filled where it lies, and nothing around it is touched.
      const backing = new Float32Array(330).fill(7);
      ak.groupQueryAttention(inputs, attrs, { into: { output: backing.subarray(5, 325) } });
      assert.deepEqual(backing.subarray(5, 325), fresh.output.data);
      assert.deepEqual([...backing.subarray(0, 5), ...backing.subarray(325)], Array(10).fill(7));
      const cases = [
        [{ output: new Float64Array(320) }, /^GroupQueryAttention: into.output must be a Float32Array of 320 elements \(float32 \[1, 5, 64\]\), got a Float64Array of 320$/],
        [{ output: new Float32Array(319) }, /into.output must be a Float32Array of 320 elements/],
        [{ output_qk: new Float32Array(10) }, /into.output_qk is not an output of this call \(it produces output, present_key, present_value\)/],
        [{ output: [1, 2, 3] }, /into.output must be a typed array, got Array/],
      ];
      for (const [bad, pattern] of cases) {
        const untouched = new Float32Array(160);
        assert.throws(() => ak.groupQueryAttention(inputs, attrs, { into: { present_key: untouched, ...bad } }),
          (e) => e instanceof AttnkitError && e.code === 2 && pattern.test(e.message));
        assert.ok(untouched.every((x) => x === 0), 'a refused call writes none of the arrays');
      }
      assert.throws(() => ak.groupQueryAttention(inputs, attrs, { into: 5 }), (e) => e instanceof AttnkitError && /into must be an object/.test(e.message));
    });

    test('100 calls in a row (and failing ones) do not grow wasm memory', () => {
      const { inputs, attrs } = smallGqa(5);
      const big = { ...inputs };
      // 256 tokens: each call moves ~0.5 MB through the heap, so a leak would show within 100 calls.
      const S = 256;
      big.query = materializeTensor({ dtype: 'float32', shape: [1, S, 64], random: { seed: 9 } });
      big.key = materializeTensor({ dtype: 'float32', shape: [1, S, 32], random: { seed: 10 } });
      big.value = materializeTensor({ dtype: 'float32', shape: [1, S, 32], random: { seed: 11 } });
      big.seqlens_k = { data: new Int32Array([S - 1]), shape: [1] };
      big.total_sequence_length = { data: new Int32Array([S]), shape: [] };
      for (let i = 0; i < 5; i++) ak.groupQueryAttention(big, attrs);
      const warm = ak.memoryBytes();
      for (let i = 0; i < 100; i++) {
        ak.groupQueryAttention(big, attrs);
        assert.throws(() => ak.groupQueryAttention(big, { ...attrs, kv_num_heads: 3 }), AttnkitError);
      }
      assert.equal(ak.memoryBytes(), warm);
    });

    test('a call whose inputs grow the heap writes and reads the new buffer', async () => {
      // The byte and DataView views of the heap are kept across calls: the malloc of a call's inputs that grows the
      // heap must replace them before the inputs are written. `grown` has kept views of its first heap; `direct`
      // makes the same call first. (`ak` stays small: the 2 GiB test below expects its heap to fail that request.)
      const grown = await createInstance({ build, threads: 1 });
      const direct = await createInstance({ build, threads: 1 });
      try {
        const { inputs, attrs } = smallGqa(5);
        const small = grown.groupQueryAttention(inputs, attrs).output.data;
        assert.deepEqual(small, ak.groupQueryAttention(inputs, attrs).output.data);
        // One token after 2^18 past tokens: 2 x 32 MB of past, over the 32 MB a module starts with.
        const P = 1 << 18;
        const big = {
          query: materializeTensor({ dtype: 'float32', shape: [1, 1, 64], random: { seed: 12 } }),
          key: materializeTensor({ dtype: 'float32', shape: [1, 1, 32], random: { seed: 13 } }),
          value: materializeTensor({ dtype: 'float32', shape: [1, 1, 32], random: { seed: 14 } }),
          past_key: materializeTensor({ dtype: 'float32', shape: [1, 2, P, 16], random: { seed: 15 } }),
          past_value: materializeTensor({ dtype: 'float32', shape: [1, 2, P, 16], random: { seed: 16 } }),
          seqlens_k: { data: new Int32Array([P]), shape: [1] },
          total_sequence_length: { data: new Int32Array([P + 1]), shape: [] } };
        const heap = grown.memoryBytes();
        const result = grown.groupQueryAttention(big, attrs);
        assert.ok(grown.memoryBytes() > heap, 'the heap must have grown');
        const expected = direct.groupQueryAttention(big, attrs);
        for (const name of ['output', 'present_key', 'present_value']) {
          assert.deepEqual(result[name].data, expected[name].data, name);
        }
        assert.deepEqual(grown.groupQueryAttention(inputs, attrs).output.data, small);
      } finally {
        grown.dispose();
        direct.dispose();
      }
    });

    test('an allocation beyond wasm32 is an AttnkitError and the module keeps working', () => {
      // output_qk of 2 heads x 16384 x 16384 fp32 is 2 GiB: more than one wasm32 allocation can hold. It is out of
      // memory like any failed allocation (a vector's length_error was an internal error), code 1 as attnkit.h says.
      const S = 16384, N = 2, H = 8;
      const zeros = (n) => new Float32Array(n);
      const before = ak.memoryBytes();
      const long = {
        query: { data: zeros(S * N * H), shape: [1, S, N * H] },
        key: { data: zeros(S * H), shape: [1, S, H] },
        value: { data: zeros(S * H), shape: [1, S, H] },
        seqlens_k: { data: new Int32Array([S - 1]), shape: [1] },
        total_sequence_length: { data: new Int32Array([S]), shape: [] },
      };
      const outOfMemory = (e) => e instanceof AttnkitError && e.code === 1
        && /^out of memory: GroupQueryAttention needs \d+ bytes/.test(e.message);
      assert.throws(() => ak.groupQueryAttention(long, { num_heads: N, kv_num_heads: 1, qk_output: 1 },
        { outputs: ['output', 'output_qk'] }), outOfMemory);
      // The naive path's score rows for all 16384 keys: 2 GiB of scratch.
      assert.throws(() => ak.groupQueryAttention(long, { num_heads: N, kv_num_heads: 1 }, { path: 'naive' }), outOfMemory);
      assert.ok(ak.memoryBytes() <= before + 8 * 2 ** 20, 'the failed call released its memory');
      const { inputs, attrs } = smallGqa();
      assert.equal(ak.groupQueryAttention(inputs, attrs).output.data.length, 320);
    });

    // wasm32's malloc takes a 32-bit size: 4 GiB and more wrapped around to a small block, which the copy after it
    // overran (a RangeError at best, other allocations overwritten at worst). Such inputs are out of memory at once.
    test('inputs of 4 GiB or more are out of memory before anything is allocated', () => {
      const huge = new Float32Array(2 ** 30 + 4);  // 4 GiB + 16 bytes, never touched: its pages stay unallocated
      const before = ak.memoryBytes();
      assert.throws(() => ak.pin({ data: huge, shape: [huge.length] }), (e) => e instanceof AttnkitError
        && e.code === 1 && e.message === 'pin: out of memory for 4294967312 bytes in wasm memory');
      assert.throws(
        () => ak.groupQueryAttention({ query: { data: huge, shape: [1, 1, huge.length] } },
          { num_heads: 1, kv_num_heads: 1 }),
        (e) => e instanceof AttnkitError && e.code === 1
          && /^out of memory: cannot allocate 42949674\d\d bytes of inputs/.test(e.message));
      assert.equal(ak.memoryBytes(), before);
      const { inputs, attrs } = smallGqa();
      assert.equal(ak.groupQueryAttention(inputs, attrs).output.data.length, 320);
    });

    describe('case corpus', () => {
      for (const { file, index, caseObject } of corpus) {
        const label = `${path.relative(path.join(root, 'tests/cases'), file)}${index ? `#${index}` : ''}`;
        test(label, () => {
          let wasm;
          let wasmError;
          try {
            wasm = ak.runCase(caseObject).outputs;
          } catch (e) {
            if (!(e instanceof AttnkitError)) throw e;
            wasmError = e;
          }
          if (caseObject.expect_error !== undefined) {
            assert.ok(wasmError, `expected an error containing "${caseObject.expect_error}"`);
            assert.ok(wasmError.message.includes(caseObject.expect_error),
              `"${wasmError.message}" should contain "${caseObject.expect_error}"`);
          }
          if (!haveCli) return;
          const native = nativeRun(file, index);
          if (native.error !== undefined) {
            assert.ok(wasmError, `native failed ("${native.error}") but wasm succeeded`);
            assert.equal(wasmError.message, native.error, 'the same message as the CLI');
            return;
          }
          if (wasmError) throw wasmError;
          assert.deepEqual(Object.keys(wasm).sort(), Object.keys(native.outputs).sort());
          for (const [name, t] of Object.entries(native.outputs)) assertMatchesNative(name, wasm[name], t);
          const sameTable = nativeRun(file, index, 'wasm128');
          if (sameTable.outputs) {
            for (const [name, t] of Object.entries(sameTable.outputs)) assertSameBits(name, wasm[name], t);
          }
          const reference = nativeRun(file, index, 'reference');
          if (reference.error !== undefined) return;
          // The case's own tolerance (spec accuracy anchors, chosen per case by its author).
          const { atol = 1e-5, rtol = 1e-5 } = caseObject.tolerance ?? {};
          const seqlens = caseObject.inputs.seqlens_k ? materializeTensor(caseObject.inputs.seqlens_k).data : null;
          for (const [name, t] of Object.entries(reference.outputs)) {
            const include = name === 'output_qk' && seqlens ? qkDefinedColumns(t.shape, seqlens) : null;
            const r = compareTensors(wasm[name], t, { atol, rtol, include });
            assert.ok(r.ok, `${name} vs reference: ${r.reason}`);
          }
        });
      }
    });
  });
}
