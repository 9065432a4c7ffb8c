// attnkit: `attnkit run`'s result document (js/run_result.js), as the JS CLI writes it and the native target reads
// it. Base64 moves a slice at a time so that outputs past V8's longest string (a long fp32 cache's present) still go
// through; the slices are made tiny here so that every tensor crosses several of them. What is written must read as
// JSON.stringify's document, and a real native CLI result must read as the plain JSON reading of the same bytes.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { materializeTensor, tensorToJson } from '../../js/case.js';
import { parseRunOutput, writeRunResults } from '../../js/run_result.js';
import { cliAvailable, defaultCli, runNative } from '../../js/targets/native.js';

const tensors = {
  output: { dtype: 'float32', shape: [1, 3, 5], data: Float32Array.from({ length: 15 }, (_, i) => i * 0.37 - 2) },
  present_key: { dtype: 'int8', shape: [1, 1, 7], data: Int8Array.from([-128, -1, 0, 1, 2, 3, 127]) },  // "=" padding
  present_value: { dtype: 'uint8', shape: [1, 1, 8], data: Uint8Array.from({ length: 8 }, (_, i) => 30 * i) },  // "=="
  output_qk: { dtype: 'float64', shape: [2], data: Float64Array.from([Math.PI, -0]) },
  empty: { dtype: 'float16', shape: [0, 4], data: new Uint16Array(0) },
};
// A name that holds the key the reader looks for, escaped as JSON escapes it.
const resultText = (name) => JSON.stringify({
  name, outputs: Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, tensorToJson(t)])),
});

test('parseRunOutput decodes every tensor across slices of any size, bit for bit', () => {
  const text = resultText('a "base64":"name", with "quotes"');
  for (const slice of [4, 8, 12, 64 << 20]) {
    const { name, outputs } = parseRunOutput(Buffer.from(text), slice);
    assert.equal(name, 'a "base64":"name", with "quotes"');
    assert.deepEqual(Object.keys(outputs), Object.keys(tensors));
    for (const [k, t] of Object.entries(tensors)) {
      assert.equal(outputs[k].dtype, t.dtype, k);
      assert.deepEqual(outputs[k].shape, t.shape, k);
      assert.ok(outputs[k].data instanceof t.data.constructor, k);
      assert.deepEqual(Buffer.from(outputs[k].data.buffer), Buffer.from(t.data.buffer), `${k}, slices of ${slice}`);
    }
  }
});

test('writeRunResults writes JSON.stringify\'s document in slices of any size, and reads back', () => {
  const second = { name: 'a "quoted" one', outputs: { output: tensors.output } };
  const results = [{ name: 'first', outputs: tensors }, second];
  const jsonTensors = (outputs) => Object.fromEntries(Object.entries(outputs).map(([k, t]) => [k, tensorToJson(t)]));
  const asJson = (r) => ({ name: r.name, outputs: jsonTensors(r.outputs) });
  for (const slice of [3, 6, 9, 3 << 20]) {
    for (const many of [false, true]) {
      const pieces = [];
      writeRunResults((text) => pieces.push(text), many ? results : results.slice(0, 1), many, slice);
      const want = JSON.stringify(many ? results.map(asJson) : asJson(results[0]));
      assert.equal(pieces.join(''), `${want}\n`, `slices of ${slice}, many ${many}`);
    }
    const pieces = [];
    writeRunResults((text) => pieces.push(text), results.slice(0, 1), false, slice);
    const back = parseRunOutput(Buffer.from(pieces.join('')), 8).outputs;
    for (const [k, t] of Object.entries(tensors)) {
      assert.deepEqual(Buffer.from(back[k].data.buffer), Buffer.from(t.data.buffer), k);
    }
  }
});

test('parseRunOutput refuses a result it cannot read whole', () => {
  const good = resultText('x');
  const cases = [
    [good.replace('"base64":"', '"base64":"A'), /not a multiple of 4/],
    [good.slice(0, good.indexOf('"base64":"') + 14), /not closed/],
    [good.replace(/"shape":\[1,3,5\]/, '"shape":[1,3,6]'), /holds 60 bytes, not the 72 of its shape/],
    [good.replace('"dtype":"int8"', '"dtype":"int3"'), /present_key is not a tensor/],
    [good.slice(0, -1), /JSON/],
  ];
  for (const [text, message] of cases) assert.throws(() => parseRunOutput(Buffer.from(text), 8), message);
});

test('a real CLI result reads as the plain JSON reading of the same bytes', async () => {
  assert.ok(cliAvailable(), `${defaultCli} is missing: build it first (bash scripts/build.sh, which npm test runs)`);
  const dir = mkdtempSync(join(tmpdir(), 'attnkit-native-target-'));
  try {
    const rand = (seed) => ({ random: { seed } });
    const c = {
      name: 'quantized chunk', op: 'GroupQueryAttention',
      attrs: {
        num_heads: 4, kv_num_heads: 2, k_quant_type: 'PER_CHANNEL', v_quant_type: 'PER_CHANNEL', kv_cache_bit_width: 4,
      },
      inputs: {
        query: { dtype: 'float32', shape: [1, 3, 128], ...rand(1) },
        key: { dtype: 'float32', shape: [1, 3, 64], ...rand(2) },
        value: { dtype: 'float32', shape: [1, 3, 64], ...rand(3) },
        past_key: { dtype: 'uint8', shape: [1, 2, 5, 16], ...rand(4) },
        past_value: { dtype: 'uint8', shape: [1, 2, 5, 16], ...rand(5) },
        k_scale: { dtype: 'float32', shape: [1, 2, 1, 32], random: { seed: 6, low: 0.01, high: 0.02 } },
        v_scale: { dtype: 'float32', shape: [1, 2, 1, 32], random: { seed: 7, low: 0.01, high: 0.02 } },
        seqlens_k: { dtype: 'int32', shape: [1], data: [7] },
        total_sequence_length: { dtype: 'int32', shape: [], data: [8] },
      },
      outputs: ['output', 'present_key', 'present_value'],
    };
    const file = join(dir, 'case.json');
    writeFileSync(file, JSON.stringify(c));
    for (const reference of [false, true]) {
      const args = ['run', file, ...(reference ? ['--reference'] : [])];
      const printed = JSON.parse(execFileSync(defaultCli, args, { encoding: 'utf8' }));
      const read = await runNative(file, { reference });
      assert.equal(read.error, undefined, read.error);
      assert.equal(read.name, 'quantized chunk');
      for (const [k, t] of Object.entries(printed.outputs)) {
        const want = materializeTensor(t, k);
        assert.equal(read.outputs[k].dtype, want.dtype);
        assert.deepEqual(read.outputs[k].shape, want.shape);
        assert.deepEqual(read.outputs[k].data, want.data, `${k}${reference ? ' (reference)' : ''}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
