// attnkit npm package tests (node:test): init() in Node when the threaded build's files are missing or broken. Each
// runs in a child process, since the failures fixed here killed Node (a missing worker script) or kept it alive
// forever (workers left running after a failed instantiation). Also the wasmPaths forms init() takes or refuses.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import * as attnkit from '../../js/index.js';
import { AttnkitError } from '../../js/index.js';
import { root } from './wasm_test_support.mjs';

const dist = path.join(root, 'js/dist');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-dist-'));
// js/dist without the worker script, and js/dist whose threaded .wasm is the single-thread one (it does not link).
const noWorker = path.join(scratch, 'no-worker/');
const badWasm = path.join(scratch, 'bad-wasm/');
for (const dir of [noWorker, badWasm]) fs.cpSync(dist, dir, { recursive: true });
fs.rmSync(path.join(noWorker, 'attnkit-simd-threaded.worker.js'));
fs.copyFileSync(path.join(dist, 'attnkit-simd.wasm'), path.join(badWasm, 'attnkit-simd-threaded.wasm'));

// Runs `body` (an async module body with `a`, the package, and `out(value)` to report) in a fresh Node; returns
// what it reported, after checking that the child ended by itself.
function inChild(body) {
  const script = `import * as a from ${JSON.stringify(path.join(root, 'js/index.js'))};
    const out = (v) => console.log(JSON.stringify(v));
    const brief = (i) => ({ build: i.build, reason: i.reason });
    const refusal = (p) => p.then(() => 'resolved', (e) => ({ name: e.name, code: e.code, message: e.message }));
    ${body}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.signal, null, `the child did not exit by itself\n${r.stdout}${r.stderr}`);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  return r.stdout.trim().split('\n').map((line) => JSON.parse(line));
}

describe('init() with a broken threaded build (Node)', () => {
  after(() => fs.rmSync(scratch, { recursive: true, force: true }));

  test('a missing worker script: auto falls back, asking for the threaded build is refused', () => {
    const [auto, asked] = inChild(`
      out(brief(await a.init({ threads: 2, wasmPaths: ${JSON.stringify(noWorker)} })));
      a.dispose();
      out(await refusal(a.init({ threads: 2, build: 'simd-threaded', wasmPaths: ${JSON.stringify(noWorker)} })));`);
    assert.equal(auto.build, 'simd');
    assert.match(auto.reason,
      /^the threaded build did not load \(attnkit: cannot read .*worker\.js: .*\): single-thread/);
    assert.equal(asked.name, 'AttnkitError');
    assert.match(asked.message, /^attnkit: cannot read .*attnkit-simd-threaded\.worker\.js: /);
  });

  test('a threaded module that does not instantiate leaves no worker running; init() again keeps the fallback', () => {
    const [auto, kept, asked] = inChild(`
      const options = { threads: 2, wasmPaths: ${JSON.stringify(badWasm)} };
      out(brief(await a.init(options)));
      const cache = a.createKvCache({ kvHeads: 2, headSize: 16, capacity: 8 });
      out({ ...brief(await a.init(options)), length: cache.length });  // the same instance: the cache still works
      a.dispose();
      out(await refusal(a.init({ ...options, build: 'simd-threaded' })));`);
    assert.equal(auto.build, 'simd');
    assert.match(auto.reason, /^the threaded build did not load \(attnkit: loading the simd-threaded build failed: /);
    assert.deepEqual(kept, { ...auto, length: 0 });
    assert.equal(asked.name, 'AttnkitError');
    assert.match(asked.message, /^attnkit: loading the simd-threaded build failed: /);
  });
});

describe('init() wasmPaths forms', () => {
  after(() => attnkit.dispose());

  test('a folder as a URL object is used, not ignored', async () => {
    const info = await attnkit.init({ threads: 1, wasmPaths: new URL(`file://${dist}/`) });
    assert.equal(info.build, 'simd');
    await assert.rejects(attnkit.init({ threads: 1, wasmPaths: new URL('file:///nonexistent-attnkit-dist/') }),
      (e) => e instanceof AttnkitError && /cannot read \/nonexistent-attnkit-dist\/attnkit-simd\.wasm/.test(e.message));
  });

  test('a map naming a file js/dist does not have is refused', async () => {
    await assert.rejects(attnkit.init({ wasmPaths: { 'attnkit_simd.wasm': `${dist}/attnkit-simd.wasm` } }),
      (e) => e instanceof AttnkitError && e.code === 2 &&
        e.message.startsWith('init: wasmPaths: "attnkit_simd.wasm" is not a file of js/dist ('));
  });
});
