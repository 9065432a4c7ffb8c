// attnkit: the command lines of `npm start`'s comparison and of the Node benches. A mistyped flag must stop them
// with the usage line (status 2) before any work, since the benches otherwise run for minutes with their defaults;
// --help prints the usage and exits 0.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SCRIPTS = ['scripts/compare.mjs', 'bench/js/gqa_ort.mjs', 'bench/js/qattention_ort.mjs', 'bench/js/models_ort.mjs',
  'bench/js/wasm_vs_ort.mjs'];

const run = (script, ...args) => spawnSync(process.execPath, [script, ...args], { cwd: root, encoding: 'utf8',
  timeout: 30000 });

for (const script of SCRIPTS) {
  test(`${script}: --help, an unknown flag, a missing value`, () => {
    const help = run(script, '--help');
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, new RegExp(`^Usage: node ${script} .*--threads`));
    const unknown = run(script, '--threds', '2');
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /unknown (argument|option):? --threds\nUsage: /);
    const missing = run(script, '--threads');
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /--threads needs a value\nUsage: /);
  });
}

test('compare.mjs: a filter that matches no case stops it with the usage line before any target starts', () => {
  const r = run('scripts/compare.mjs', '--filter', 'no-such-case-name');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^compare: no case name contains "no-such-case-name" \(\d+ cases in tests\/cases\)\nUsage: /);
});

test('npm run bench and npm start: --help before installing anything, unknown arguments refused', () => {
  const bench = spawnSync('bash', ['scripts/bench.sh', '--quik'], { cwd: root, encoding: 'utf8' });
  assert.equal(bench.status, 2);
  assert.match(bench.stderr, /unexpected arguments: --quik\nUsage: npm run bench/);
  for (const script of ['scripts/bench.sh', 'scripts/start.sh']) {
    const help = spawnSync('bash', [script, '--help'], { cwd: root, encoding: 'utf8' });
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^Usage: npm (run bench|start)/);
  }
});
