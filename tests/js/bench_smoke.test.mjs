// attnkit: the Node benches (bench/js) run end to end at their smallest settings, every case loading on both
// sides. Nothing ran them between `npm run bench` sessions, and a case-format change once made every ORT row NaN
// while the script exited 0. Their timings are not checked here (speed is for `npm run bench`).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { normalizeCase } from '../../js/case.js';
import { cliAvailable, defaultCli } from '../../js/targets/native.js';
import { simd128PeakGflops } from '../../bench/js/simd128_peak.mjs';

const benchDir = fileURLToPath(new URL('../../bench/js/', import.meta.url));
const once = ['--threads', '1', '--iters', '1'];

function runBench(script, args) {
  assert.ok(cliAvailable(), `${defaultCli} is missing: build it first (bash scripts/build.sh, which npm test runs)`);
  const r = spawnSync(process.execPath, [`${benchDir}${script}`, ...args], { encoding: 'utf8', timeout: 180000 });
  assert.equal(r.status, 0, `${script} exited ${r.status ?? r.signal}:\n${r.stderr.slice(-2000)}`);
  return r.stdout;
}

// A bench's table rows: the lines that start with its case names.
const rowsOf = (stdout, prefix) => stdout.split('\n').filter((line) => line.startsWith(prefix));

for (const [script, args, prefix, count] of [
  ['gqa_ort.mjs', ['--quick', ...once, '--rounds', '1'], 'gqa/', 6],
  ['qattention_ort.mjs', ['--quick', ...once, '--rounds', '1'], 'qattention ', 3],
  ['models_ort.mjs', ['--quick', ...once, '--rounds', '1', '--filter', 'qwen0.5b decode T=4096 int8'], 'qwen', 1],
  ['wasm_vs_ort.mjs', ['--quick', ...once, '--budget-ms', '50', '--native-rounds', '2', '--filter', 'T=2048 int4'],
    'gqa/', 1],
]) {
  test(`${script} runs every side of its cases and exits 0`, () => {
    const rows = rowsOf(runBench(script, args), prefix);
    assert.equal(rows.length, count, `${script}: expected ${count} rows`);
    for (const row of rows) assert.doesNotMatch(row, /NaN| - /, `${script}: a side did not run: ${row}`);
  });
}

test('a bench exits 1 naming the side that failed', () => {
  const r = spawnSync(process.execPath, [`${benchDir}gqa_ort.mjs`, '--quick', ...once, '--rounds', '1', '--cli',
    '/bin/false'], { encoding: 'utf8', timeout: 180000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /bench failures:\n {2}gqa\/prefill T=512 fp32 threads=1: attnkit: /);
});

test('simd128_peak.mjs measures a positive rate', async () => {
  const gflops = await simd128PeakGflops();
  assert.ok(Number.isFinite(gflops) && gflops > 0, String(gflops));
});

test('bench/manycore/prepare.mjs writes loadable cases, a model each, and their kinds', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-manycore-'));
  try {
    const r = spawnSync(process.execPath, [fileURLToPath(new URL('../../bench/manycore/prepare.mjs', import.meta.url)),
      '--out', dir], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const list = JSON.parse(fs.readFileSync(path.join(dir, 'list.json'), 'utf8'));
    assert.ok(list.length > 0);
    for (const { id, name, kind } of list) {
      const c = normalizeCase(JSON.parse(fs.readFileSync(path.join(dir, `${id}.json`), 'utf8')));
      assert.equal(c.name, name);
      const oneToken = (c.inputs.query ?? c.inputs.input).shape[1] === 1;
      assert.equal(kind, oneToken ? 'decode' : 'prefill', name);
      assert.ok(fs.statSync(path.join(dir, `${id}.onnx`)).size > 0, name);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
