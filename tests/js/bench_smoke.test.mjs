// attnkit: the Node benches (bench/js) run end to end at their smallest settings, every case loading on both
// sides. Nothing ran them between `npm run bench` sessions, and a case-format change once made every ORT row NaN
// while the script exited 0. Their timings are not checked here (speed is for `npm run bench`).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cliAvailable, defaultCli } from '../../js/targets/native.js';

const benchDir = fileURLToPath(new URL('../../bench/js/', import.meta.url));
const once = ['--threads', '1', '--iters', '1'];

function runBench(script, args) {
  const r = spawnSync(process.execPath, [`${benchDir}${script}`, ...args], { encoding: 'utf8', timeout: 180000 });
  assert.equal(r.status, 0, `${script} exited ${r.status ?? r.signal}:\n${r.stderr.slice(-2000)}`);
  return r.stdout;
}

// A row's numbers: the times and ratio columns after the name and thread count.
const rowsOf = (stdout, prefix) => stdout.split('\n').filter((line) => line.startsWith(prefix));

for (const [script, args, prefix, count] of [
  ['gqa_ort.mjs', ['--quick', ...once, '--rounds', '1'], 'gqa/', 6],
  ['qattention_ort.mjs', ['--quick', ...once, '--rounds', '1'], 'qattention ', 3],
  ['models_ort.mjs', ['--quick', ...once, '--rounds', '1', '--filter', 'qwen0.5b decode T=4096 int8'], 'qwen', 1],
  ['wasm_vs_ort.mjs', ['--quick', ...once, '--budget-ms', '50', '--native-rounds', '2', '--filter', 'T=2048 int4'],
    'gqa/', 1],
]) {
  test(`${script} runs every side of its cases and exits 0`, { skip: !cliAvailable() && `${defaultCli} not built` },
    () => {
      const rows = rowsOf(runBench(script, args), prefix);
      assert.equal(rows.length, count, `${script}: expected ${count} rows`);
      for (const row of rows) assert.doesNotMatch(row, /NaN| - /, `${script}: a side did not run: ${row}`);
    });
}

test('a bench exits 1 naming the side that failed', { skip: !cliAvailable() && `${defaultCli} not built` }, () => {
  const r = spawnSync(process.execPath, [`${benchDir}gqa_ort.mjs`, '--quick', ...once, '--rounds', '1', '--cli',
    '/bin/false'], { encoding: 'utf8', timeout: 180000 });
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /bench failures:\n {2}gqa\/prefill T=512 fp32 threads=1: attnkit: /);
});
