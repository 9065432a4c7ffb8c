// attnkit: js/case.js against fixed values: splitmix64's published first output, fp16/bf16 rounding (the same
// nearest-even rules as core/src/common/half.h), base64, and the comparison helper. The corpus test then proves the
// JS and C++ loaders agree bit for bit (ORT, fed by case.js, returns the very presents attnkit computes).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  base64ToBytes, bytesToBase64, compareTensors, f16ToFloat, floatToBf16, floatToF16, materializeTensor, splitmix64,
  CaseError, ortSkipReason, parseCaseJson, tensorToJson, windowCacheHeldRows,
} from '../../js/case.js';
import { anchorTolerance, ortTolerance, peakOf } from '../../js/tolerance.js';

test('splitmix64 matches the reference sequence for seed 0', () => {
  const gen = splitmix64(0);
  // Upper 32 bits of 0xE220A8397B1DCDAF and 0x6E789E6AA1B965F4, the first two splitmix64 outputs for seed 0.
  assert.equal(gen.next().value, 0xe220a839);
  assert.equal(gen.next().value, 0x6e789e6a);
});

test('random tensors follow the DESIGN.md formulas', () => {
  const u = splitmix64(7).next().value;
  const f = materializeTensor({ dtype: 'float32', shape: [1], random: { seed: 7, low: -2, high: 6 } });
  assert.equal(f.data[0], Math.fround(-2 + 8 * (Math.floor(u / 256) / 2 ** 24)));
  const i = materializeTensor({ dtype: 'int32', shape: [1], random: { seed: 7, low: -5, high: 5 } });
  assert.equal(i.data[0], -5 + (u % 11));
  const big = materializeTensor({ dtype: 'int64', shape: [1], random: { seed: 7 } });
  assert.equal(big.data[0], -(2n ** 63n) + BigInt(u));
});

test('seeds above 2^53 are read exactly as decimal strings or BigInts, and refused as numbers', () => {
  // splitmix64 by its DESIGN.md formula in BigInt arithmetic, for seed 2^64 - 1.
  const mask = (1n << 64n) - 1n;
  let z = ((1n << 64n) - 1n + 0x9e3779b97f4a7c15n) & mask;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
  const u = Number((z ^ (z >> 31n)) >> 32n);
  for (const seed of ['18446744073709551615', 2n ** 64n - 1n]) {
    assert.equal(materializeTensor({ dtype: 'uint8', shape: [1], random: { seed } }).data[0], u % 256);
  }
  const tensor = (seed) => materializeTensor({ dtype: 'uint8', shape: [1], random: { seed } });
  assert.throws(() => tensor(2 ** 53 + 2), /random.seed .*above 2\^53 - 1 .*write it as a decimal string/);
  for (const seed of ['18446744073709551616', '', '1e3', '-1', 2n ** 64n, -1n, -1, 0.5, true]) {
    assert.throws(() => tensor(seed), /random.seed must be an integer in \[0, 2\^64\)/, String(seed));
  }
});

test('fp16 and bf16 round to nearest even and round-trip every finite value', () => {
  assert.equal(floatToF16(1 + 2 ** -11), 0x3c00); // tie goes to the even mantissa
  assert.equal(floatToF16(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(floatToF16(65520), 0x7c00); // rounds past the largest finite half
  assert.equal(floatToF16(2 ** -25), 0); // half of the smallest subnormal: tie to even (zero)
  assert.equal(floatToBf16(1 + 2 ** -8), 0x3f80);
  for (let h = 0; h < 0x7c00; h++) assert.equal(floatToF16(f16ToFloat(h)), h);
  const t = materializeTensor({ dtype: 'float16', shape: [3], data: [1, 0.1, -65504] });
  assert.deepEqual(Array.from(t.data), [0x3c00, 0x2e66, 0xfbff]);
});

test('base64 round-trips any length and tensors round-trip through JSON', () => {
  for (let n = 0; n < 8; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, k) => (k * 97 + 13) & 255);
    const text = bytesToBase64(bytes);
    assert.equal(text, Buffer.from(bytes).toString('base64'));
    assert.deepEqual(Array.from(base64ToBytes(text)), Array.from(bytes));
  }
  const t = materializeTensor({ dtype: 'float32', shape: [2, 3], random: { seed: 3 } });
  assert.deepEqual(materializeTensor(tensorToJson(t)).data, t.data);
  assert.throws(() => materializeTensor({ dtype: 'int32', shape: [2], base64: 'AAAA' }), /base64 holds 3 bytes/);
});

test('compareTensors reports max abs/rel, the worst element and the allclose verdict', () => {
  const e = { dtype: 'float32', shape: [3], data: Float32Array.from([1, -2, 0]) };
  const a = { dtype: 'float32', shape: [3], data: Float32Array.from([1, -2.5, 0]) };
  const r = compareTensors(a, e, { atol: 0.1, rtol: 0.1 });
  assert.equal(r.ok, false);
  assert.equal(r.worstIndex, 1);
  assert.equal(r.maxAbs, 0.5);
  assert.equal(r.maxRel, 0.25);
  assert.equal(compareTensors(a, e, { atol: 0.1, rtol: 0.25 }).ok, true);
  assert.equal(compareTensors(a, e, { atol: 0, rtol: 0, include: (i) => i !== 1 }).ok, true);
  assert.equal(compareTensors({ ...a, shape: [1, 3] }, e).ok, false);
});

test('tolerances: peaks of decoded values (not fp16 bit patterns), finite only; QAttention float16 anchors', () => {
  const f16 = { dtype: 'float16', shape: [3], data: Uint16Array.of(floatToF16(1), floatToF16(-2), 0x7e00) };
  assert.equal(peakOf(f16), 2);
  const qattention = { op: 'QAttention', inputs: { input: { dtype: 'uint8' }, bias: { dtype: 'float16' } } };
  assert.deepEqual(anchorTolerance(qattention), { atol: 1e-2, rtol: 1e-2 });
  assert.deepEqual(ortTolerance(qattention)('output', f16), { atol: 2e-2, rtol: 1e-2 });
});

test('compareTensors: NaN matches NaN and an infinity only itself, whatever the tolerance', () => {
  const f32 = (...v) => ({ dtype: 'float32', shape: [v.length], data: Float32Array.from(v) });
  const loose = { atol: 1, rtol: 1 };
  assert.equal(compareTensors(f32(Infinity, NaN, 0.5), f32(Infinity, NaN, 0.5), loose).ok, true);
  for (const got of [0, -Infinity, 3e38, NaN]) {
    const r = compareTensors(f32(got, 0.5), f32(Infinity, 0.5), loose);
    assert.equal(r.ok, false, `${got} passed for Infinity`);
    assert.equal(r.worstIndex, 0);
    assert.equal(r.mismatches, 1);
  }
  assert.equal(compareTensors(f32(Infinity, 0.5), f32(1, 0.5), loose).ok, false);
  // An infinite element does not make every finite difference "relatively" zero.
  assert.equal(compareTensors(f32(Infinity, 0.75), f32(Infinity, 0.5), { atol: 0, rtol: 0 }).maxRel, 0.5);
});

test('windowCacheHeldRows selects the rows a window cache holds (spec §2.9)', () => {
  // Capacity 4, window 2: past 4 tokens the oldest 3 go at once. 6 tokens hold 3 rows, 2 tokens 2, 7 tokens 4.
  const shape = [3, 1, 4, 2];
  const include = windowCacheHeldRows(shape, Int32Array.from([5, 1, 6]), 2);
  const held = Array.from({ length: 3 }, (_, b) => Array.from({ length: 8 }, (_, i) => include(b * 8 + i)));
  assert.deepEqual(held[0], [true, true, true, true, true, true, false, false]);
  assert.deepEqual(held[1], [true, true, true, true, false, false, false, false]);
  assert.deepEqual(held[2], Array(8).fill(true));
});

test('the "ort" field skips every EP, or with skip-cpu only the CPU and wasm EPs', () => {
  assert.equal(ortSkipReason({ ort: 'skip: no bfloat16 kernel' }, 'cpu'), 'no bfloat16 kernel');
  assert.equal(ortSkipReason({ ort: 'skip: no bfloat16 kernel' }, 'webgpu'), 'no bfloat16 kernel');
  assert.equal(ortSkipReason({ ort: 'skip-cpu: refuses q_norm_weight' }, 'cpu'), 'refuses q_norm_weight');
  assert.equal(ortSkipReason({ ort: 'skip-cpu: refuses q_norm_weight' }, 'webgpu'), null);
  assert.equal(ortSkipReason({}, 'cpu'), null);
});

test('parseCaseJson refuses a duplicate key at any depth, as the native parser does', () => {
  const dup = (text) => assert.throws(() => parseCaseJson(text), CaseError);
  dup('{"op": "QAttention", "op": "QAttention"}');
  dup('[{"a": 1}, {"inputs": {"q": {"random": {"seed": 1,\n "seed": 2}}}}]');
  dup('{"op": 1, "\\u006fp": 2}');  // the same key once decoded
  assert.throws(() => parseCaseJson('{"a": {}, "b": [1, {"x": 2}],\n  "a": 3}'),
    { message: 'JSON line 2, column 3: duplicate key "a"' });
  // Equal keys in sibling objects, and strings that look like keys or hold quotes and brackets, are fine.
  const doc = '[{"a": 1, "b": {"a": 2}}, {"a": "\\"a\\": {[", "c": "a"}]';
  assert.deepEqual(parseCaseJson(doc), JSON.parse(doc));
  assert.throws(() => parseCaseJson('{"a": 1,'), SyntaxError);
});

test('parseCaseJson: native\'s other rules, byte columns and the BOM', () => {
  const message = (text) => {
    try {
      parseCaseJson(text);
    } catch (e) {
      return e.message;
    }
    return 'accepted';
  };
  // Columns count UTF-8 bytes, as native's do: "é€😀" is 9 bytes, 4 UTF-16 units.
  assert.equal(message('{"n": "é€😀", "n": 1}'), 'JSON line 1, column 20: duplicate key "n"');
  assert.equal(message('\ufeff{"n": 1, "n": 2}'), 'JSON line 1, column 13: duplicate key "n"');
  assert.deepEqual(parseCaseJson('\ufeff{"n": 1}'), { n: 1 });
  assert.equal(message(`${'['.repeat(512)}${']'.repeat(512)}`), 'accepted');
  assert.equal(message(`${'['.repeat(513)}${']'.repeat(513)}`), 'JSON line 1, column 513: nesting deeper than 512');
  assert.equal(message('["\\ud83d\\ude00", "\\u00e9"]'), 'accepted');
  assert.equal(message('["x\\ud83d"]'), 'JSON line 1, column 4: lone high surrogate in \\u escape');
  assert.equal(message('["\\ude00"]'), 'JSON line 1, column 3: lone low surrogate in \\u escape');
  assert.equal(message('["\\ud83d\\u0041"]'), 'JSON line 1, column 3: invalid surrogate pair');
});
