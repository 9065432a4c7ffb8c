// attnkit: the command lines of `npm start`'s comparison and of the Node benches. A mistyped flag must stop them
// with the usage line (status 2) before any work, since the benches otherwise run for minutes with their defaults;
// --help prints the usage and exits 0.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { speedAgainstFirst } from '../../scripts/compare_report.mjs';

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

test('compare.mjs --cases: one file is taken as a folder of one; none to compare is said so', () => {
  const invalid = fs.readdirSync(path.join(root, 'tests/cases/gqa')).find((f) => f.startsWith('invalid--'));
  const r = run('scripts/compare.mjs', '--cases', `tests/cases/gqa/${invalid}`);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /^compare: --cases: no case to compare in .*invalid--.*\(1 validation cases, with expect_error/);
  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-no-cases-'));
  const none = run('scripts/compare.mjs', '--cases', empty);
  fs.rmSync(empty, { recursive: true, force: true });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /^compare: --cases: no case to compare in [^(]*\nUsage: /);
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

// A user's own folder of cases: fp16 without a tolerance (judged by the anchors, not fp32's 1e-5), a case whose
// expected output is wrong, and a file that is not JSON.
test('compare.mjs --cases: a wrong expected output or an unreadable file fails the run; the rest still run', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-user-cases-'));
  const tensor = (dtype, shape, seed) => ({ dtype, shape, random: { seed } });
  const ints = (shape, values) => ({ dtype: 'int32', shape, data: values });
  const gqa = (name, dtype, extra = {}) => ({
    name, op: 'GroupQueryAttention', attrs: { num_heads: 2, kv_num_heads: 1 },
    inputs: {
      query: tensor(dtype, [1, 3, 32], 1), key: tensor(dtype, [1, 3, 16], 2), value: tensor(dtype, [1, 3, 16], 3),
      seqlens_k: ints([1], [2]), total_sequence_length: ints([], [3]),
    },
    ...extra,
  });
  const write = (file, value) =>
    fs.writeFileSync(path.join(dir, file), typeof value === 'string' ? value : JSON.stringify(value));
  const hundreds = { dtype: 'float32', shape: [1, 3, 32], data: new Array(96).fill(100) };
  try {
    write('a-fp16.json', gqa('user/fp16', 'float16'));
    write('b-expected.json', gqa('user/expected', 'float32', { outputs: ['output'], expected: { output: hundreds } }));
    const report = path.join(dir, 'report.html');
    const args = ['--cases', dir, '--targets', 'attnkit-native', '--repeat', '1', '--out', report];
    const good = run('scripts/compare.mjs', ...args, '--filter', 'fp16');
    assert.equal(good.status, 0, good.stdout + good.stderr);
    assert.match(good.stdout, /attnkit native +1 ok/);
    write('c-broken.json', '{"op": ');
    const bad = run('scripts/compare.mjs', ...args);
    assert.equal(bad.status, 1, bad.stdout + bad.stderr);
    assert.match(bad.stderr, /c-broken\.json: /);
    assert.match(bad.stdout,
      /user\/expected on attnkit native: DIVERGES vs expected: output: element \d+: got .*, expected 100/);
    assert.match(bad.stdout, /attnkit native +1 ok, 1 DIVERGES/);
    assert.match(bad.stdout, /FAILED: 1 attnkit result\(s\) diverge or fail, 1 case file\(s\) unreadable/);
    // The report lists the divergence first, linked to its case's row, and gives each target's time against the first.
    assert.match(bad.stdout, /attnkit native +1 ok, 1 DIVERGES; time 1\.00x \(2 cases\)/);
    const html = fs.readFileSync(report, 'utf8');
    const anchor = html.match(/<li><a href="#(case-\d)">user\/expected<\/a> on attnkit native: <b>DIVERGES<\/b>/);
    assert.ok(anchor, html);
    assert.match(html, new RegExp(`<tr id="${anchor[1]}"><td>user/expected</td>.*<td class="bad"><b>DIVERGES</b>`));
    assert.match(html, /<tr id="case-\d" class="quiet"><td>user\/fp16<\/td>/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// A target's time against the first: the geometric mean of the per-case ratios, over the cases both timed only.
test('compare_report.mjs: speedAgainstFirst', () => {
  const row = (timeMs) => ({ timeMs });
  const entries = [[1, 2, null], [2, 16, 3], [null, 5, 4]].map((times) => ({ rows: times.map(row) }));
  const speed = speedAgainstFirst(entries, [{ label: 'a' }, { label: 'b' }, { label: 'c' }]);
  assert.deepEqual(speed.a, { ratio: 1, cases: 2 });
  assert.equal(speed.b.cases, 2);
  assert.ok(Math.abs(speed.b.ratio - 4) < 1e-12, String(speed.b.ratio));  // sqrt(2 * 8)
  assert.equal(speed.c.cases, 1);
  assert.ok(Math.abs(speed.c.ratio - 1.5) < 1e-12);
  assert.deepEqual(speedAgainstFirst([{ rows: [row(null), row(1)] }], [{ label: 'a' }, { label: 'b' }]).b,
    { ratio: null, cases: 0 });
});
