// Shared by the wasm package's test files: the repository paths, a small GQA prompt, the case corpus, the
// native CLI's answer for a case (run once per process) and the wasm-vs-native comparisons that hold across ISAs.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { compareTensors, materializeTensor } from '../../js/case.js';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const cli = process.env.ATTNKIT_CLI ?? path.join(root, 'build/native/attnkit');
export const haveCli = fs.existsSync(cli);

// A small GQA prompt: batch 1, 5 tokens, 4 query heads over 2 KV heads, head size 16.
export function smallGqa(seed = 1) {
  const S = 5, N = 4, Nk = 2, H = 16;
  const random = (dtype, shape, s) => materializeTensor({ dtype, shape, random: { seed: seed * 10 + s } });
  return {
    inputs: {
      query: random('float32', [1, S, N * H], 1),
      key: random('float32', [1, S, Nk * H], 2),
      value: random('float32', [1, S, Nk * H], 3),
      seqlens_k: { data: new Int32Array([S - 1]), shape: [1] },
      total_sequence_length: { data: new Int32Array([S]), shape: [] },
    },
    attrs: { num_heads: N, kv_num_heads: Nk },
  };
}


function* corpusFiles(dir) {
  if (!fs.existsSync(dir)) return;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* corpusFiles(full);
    else if (entry.name.endsWith('.json')) yield full;
  }
}

// Every case of the corpus as { file, index, caseObject }.
export const corpus = [];
for (const file of corpusFiles(path.join(root, 'tests/cases'))) {
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  (Array.isArray(doc) ? doc : [doc]).forEach((caseObject, index) => corpus.push({ file, index, caseObject }));
}

// The native CLI's answer for one case, run once and shared by both builds: { outputs } or { error }. `mode`:
// 'default' (the host's ISA), 'reference' (fp64) or 'wasm128' (the wasm kernels, through SIMDe on x86).
const nativeCache = new Map();
export function nativeRun(file, index, mode = 'default') {
  const key = `${file}#${index}#${mode}`;
  if (!nativeCache.has(key)) {
    const out = path.join(os.tmpdir(), `attnkit-wasm-test-${process.pid}.json`);
    const extra = { default: [], reference: ['--reference'], wasm128: ['--isa', 'wasm128'] }[mode];
    const args = ['run', file, '--case', String(index), '--out', out, ...extra];
    const r = spawnSync(cli, args, { encoding: 'utf8' });
    if (r.status === 0) {
      const { outputs } = JSON.parse(fs.readFileSync(out, 'utf8'));
      fs.rmSync(out, { force: true });
      nativeCache.set(key, { outputs: Object.fromEntries(Object.entries(outputs).map(([k, t]) => [k, materializeTensor(t, k)])) });
    } else {
      nativeCache.set(key, { error: r.stderr.trim(), status: r.status });
    }
  }
  return nativeCache.get(key);
}

// The same kernels and the same core give the same bits on every platform: every exp attnkit takes is its own
// polynomial (the C runtimes' expf differ in the last bit), and a result never depends on the thread count.
export function assertSameBits(name, actual, expected) {
  const bytes = (t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  assert.ok(bytes(actual).equals(bytes(expected)), `${name}: wasm differs from native's wasm128 table`);
}

// fp16 / bf16 bit patterns mapped to integers that are ordered like the values, so ulps are differences.
function orderedHalf(bits) {
  return bits & 0x8000 ? -(bits & 0x7fff) : bits;
}

// wasm vs native, same core and same algorithm; only kernel summation order differs between ISAs.
export function assertMatchesNative(name, actual, expected) {
  assert.equal(actual.dtype, expected.dtype, `${name}: dtype`);
  assert.deepEqual(actual.shape, expected.shape, `${name}: shape`);
  if (actual.dtype === 'float32') {
    // 1e-6 relative (the bound), measured against the tensor's scale as well as the element: an
    // element that is a near-cancelling sum carries the rounding error of its large terms, so its own
    // magnitude cannot bound a reordered sum's difference.
    let scale = 0;
    for (const v of expected.data) scale = Math.max(scale, Math.abs(v));
    const r = compareTensors(actual, expected, { atol: 1e-6 * scale, rtol: 1e-6 });
    assert.ok(r.ok, `${name}: wasm vs native: ${r.reason} (max rel ${r.maxRel})`);
  } else if (actual.dtype === 'float16' || actual.dtype === 'bfloat16') {
    // Both round one fp32 result to 16 bits; fp32 results within 1e-6 can straddle a rounding boundary,
    // so they may land 1 ulp apart, never more.
    for (let i = 0; i < expected.data.length; i++) {
      const ulps = Math.abs(orderedHalf(actual.data[i]) - orderedHalf(expected.data[i]));
      assert.ok(ulps <= 1, `${name}[${i}]: ${actual.data[i]} vs native ${expected.data[i]} (${ulps} ulps)`);
    }
  } else {
    // Integer outputs (quantized caches) are exact on every ISA by contract.
    assert.deepEqual(Array.from(actual.data), Array.from(expected.data), `${name}: integer output differs`);
  }
}
