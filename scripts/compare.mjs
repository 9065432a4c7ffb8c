// attnkit: the cross-target comparison behind `npm start`. Runs every corpus case (validation cases excluded) on every
// available target (js/targets/index.js), measures each against the fp64 reference (`attnkit run --reference`), and
// prints per case the max abs / max rel difference and the median time of each target; writes report/index.html.
// Exits 1 when an attnkit target diverges or fails, or a case file cannot be read; a peer's divergences are reported.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { listCases, materializeTensor, normalizeCase, parseCaseJson } from '../js/case.js';
import { compareOutputs } from '../js/compare.js';
import { TARGETS } from '../js/targets/index.js';
import { attnkitTolerance, ortTolerance } from '../js/tolerance.js';
import { cliAvailable, defaultCli, repoRoot, runNative } from '../js/targets/native.js';
import { fmt, fmtMs, isBad, speedAgainstFirst, writeHtml } from './compare_report.mjs';

const USAGE = 'node scripts/compare.mjs [--cases DIR|FILE] [--filter SUBSTR] [--targets id,id] [--threads N] ' +
  '[--repeat N] [--out FILE]';

function usageError(why) {
  process.stderr.write(`compare: ${why}\nUsage: ${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { cases: join(repoRoot, 'tests/cases'), filter: '', targets: null, threads: 1, repeat: 5,
    out: join(repoRoot, 'report/index.html') };
  for (let i = 0; i < argv.length; i++) {
    const next = () => (i + 1 < argv.length ? argv[++i] : usageError(`${argv[i]} needs a value`));
    const count = () => {
      const flag = argv[i], n = Number(next());
      return Number.isInteger(n) && n >= 1 ? n : usageError(`${flag} takes a whole number of at least 1`);
    };
    switch (argv[i]) {
      case '-h':
      case '--help':
        process.stdout.write(`Usage: ${USAGE}\n`);
        process.exit(0);
      case '--cases': opts.cases = next(); break;
      case '--filter': opts.filter = next(); break;
      case '--targets': opts.targets = next().split(','); break;
      case '--threads': opts.threads = count(); break;
      case '--repeat': opts.repeat = count(); break;
      case '--out': opts.out = next(); break;
      default: usageError(`unknown option ${argv[i]}`);
    }
  }
  return opts;
}

// The .json files under a folder, or the one file named.
function listCaseFiles(dir) {
  if (!statSync(dir).isDirectory()) return [dir];
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...listCaseFiles(path));
    else if (entry.endsWith('.json')) out.push(path);
  }
  return out;
}

function describeShape(c) {
  const q = c.inputs.query ?? c.inputs.input;
  if (!q) return '';
  const a = c.attrs;
  const past = c.inputs.past_key?.shape?.[2] ?? c.inputs.past?.shape?.[3];
  const parts = [q.dtype, `B${q.shape[0]} S${q.shape[1]}`];
  if (past !== undefined) parts.push(`past ${past}`);
  parts.push(a.kv_num_heads ? `N${a.num_heads}/${a.kv_num_heads}` : `N${a.num_heads}`);
  if (a.k_quant_type && a.k_quant_type !== 'NONE') parts.push(`${a.k_quant_type} int${a.kv_cache_bit_width}`);
  return parts.join(' ');
}

// attnkit's own targets are held to the bound its tests hold them to; a peer (ORT) to the case's tolerance or the
// spec's accuracy anchors.
const isAttnkit = (target) => target.id.startsWith('attnkit-');

function failures(cmp) {
  return [...cmp.missing.map((n) => `${n} missing`),
    ...Object.entries(cmp.outputs).filter(([, r]) => !r.ok).map(([n, r]) => `${n}: ${r.reason}`)];
}

// One row: { target, status: 'ok'|'DIVERGES'|'error'|'skip'|'unchecked', maxAbs, maxRel, timeMs, detail }.
async function runTarget(target, c, file, opts, reference, expected) {
  const row = { target: target.label, status: 'ok', maxAbs: null, maxRel: null, timeMs: null, detail: '' };
  const skip = target.skipReason?.(c);
  if (skip) return { ...row, status: 'skip', detail: skip };
  const res = await target.run(c, { file, threads: opts.threads, repeat: opts.repeat });
  if (res.error !== undefined) {
    return { ...row, status: 'error', detail: res.error };
  }
  row.timeMs = res.timeMs;
  // The case's own expected outputs, where it gives them, judged by its tolerance (or the anchors).
  const vsExpected = expected ? failures(compareOutputs(c, res.outputs, expected, ortTolerance(c))) : [];
  const problems = vsExpected.map((f) => `vs expected: ${f}`);
  if (reference) {
    const cmp = compareOutputs(c, res.outputs, reference, isAttnkit(target) ? attnkitTolerance(c) : ortTolerance(c));
    row.maxAbs = cmp.maxAbs;
    row.maxRel = cmp.maxRel;
    problems.unshift(...failures(cmp));
  }
  if (problems.length) {
    const note = target.divergenceNote?.(c);
    return { ...row, status: 'DIVERGES', detail: [...(note ? [note] : []), ...problems].join('; ') };
  }
  if (!reference) return { ...row, status: 'unchecked', detail: 'no reference to compare with' };
  return row;
}

// Target labels carry the installed ORT's version ("ORT 1.31.1 WebGPU (Chromium)"): columns fit the longest.
const LABEL_WIDTH = Math.max(...TARGETS.map((t) => t.label.length));

function printCase(entry) {
  const { c, rows, referenceNote, shape } = entry;
  const lines = [`${c.name}  (${shape})${referenceNote ? `  [${referenceNote}]` : ''}`];
  lines.push(`  ${'target'.padEnd(LABEL_WIDTH)} ${'max abs'.padStart(9)} ${'max rel'.padStart(9)} ${'time ms'.padStart(9)}  status`);
  for (const r of rows) {
    const status = r.status + (r.detail && r.status !== 'ok' ? `: ${r.detail.slice(0, 100)}` : '');
    lines.push(`  ${r.target.padEnd(LABEL_WIDTH)} ${fmt(r.maxAbs).padStart(9)} ${fmt(r.maxRel).padStart(9)} ${fmtMs(r.timeMs).padStart(9)}  ${status}`);
  }
  console.log(lines.join('\n'));
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const unknown = (opts.targets ?? []).filter((id) => !TARGETS.some((t) => t.id === id));
  if (unknown.length) usageError(`unknown target ${unknown.join(', ')} (targets: ${TARGETS.map((t) => t.id).join(', ')})`);
  const cases = [];
  const unreadable = [];
  let all = 0;
  let validation = 0;
  if (!existsSync(opts.cases)) usageError(`--cases: ${opts.cases} does not exist`);
  for (const file of listCaseFiles(opts.cases)) {
    try {
      const json = parseCaseJson(readFileSync(file, 'utf8'));
      listCases(json).forEach((raw, index) => {
        // Validation cases (expect_error) are the tests' business; they may not even load.
        if (raw.expect_error !== undefined) {
          validation++;
          return;
        }
        const c = normalizeCase(raw, index);
        all++;
        if (!c.name.includes(opts.filter)) return;
        const expected = c.expected && Object.fromEntries(Object.entries(c.expected)
          .map(([name, t]) => [name, materializeTensor(t, `expected.${name}`)]));
        cases.push({ c, file: Array.isArray(json) ? null : file, expected });
      });
    } catch (err) {
      // One bad file is reported by name and the rest still run.
      unreadable.push(`  ${relative(process.cwd(), file)}: ${err.message}`);
    }
  }
  if (unreadable.length) console.error(`compare: case files that cannot be read:\n${unreadable.join('\n')}`);
  const where = relative(process.cwd(), opts.cases) || '.';
  if (all === 0) {
    usageError(`--cases: no case to compare in ${where}` +
      (validation ? ` (${validation} validation cases, with expect_error, are left to the tests)` : ''));
  }
  if (cases.length === 0) usageError(`no case name contains "${opts.filter}" (${all} cases in ${where})`);
  if (!cliAvailable()) throw new Error(`${defaultCli} is missing: run bash scripts/build.sh first`);
  const targets = [];
  for (const t of TARGETS) {
    if (opts.targets && !opts.targets.includes(t.id)) continue;
    const ok = await t.available();
    if (ok === true) targets.push(t);
    else console.error(`compare: target ${t.label} unavailable: ${ok}`);
  }
  if (targets.length === 0) throw new Error('no target can run here (the reasons are above)');
  const totals = Object.fromEntries(targets.map((t) => [t.label, {}]));
  const entries = [];
  const started = performance.now();
  for (const [i, { c, file, expected }] of cases.entries()) {
    process.stderr.write(`[${i + 1}/${cases.length}] ${c.name} (${((performance.now() - started) / 1000).toFixed(0)} s)\n`);
    const ref = await runNative(file ?? c, { reference: true });
    const reference = ref.error === undefined ? ref.outputs : null;
    const referenceNote = reference ? '' : `no reference: ${ref.error}`;
    const rows = [];
    for (const t of targets) {
      const row = await runTarget(t, c, file ?? undefined, opts, reference, expected);
      rows.push(row);
      totals[t.label][row.status] = (totals[t.label][row.status] ?? 0) + 1;
    }
    const entry = { c, rows, referenceNote, shape: describeShape(c) };
    entries.push(entry);
    printCase(entry);
  }
  const speed = speedAgainstFirst(entries, targets);
  console.log(`\nsummary (per target; time over ${targets[0].label}'s, geometric mean over the cases both ran):`);
  for (const t of targets) {
    const { ratio, cases: timed } = speed[t.label];
    const note = t.timeNote ? `, ${t.timeNote}` : '';
    const time = ratio === null ? '' : `; time ${ratio.toFixed(2)}x (${timed} cases${note})`;
    const counts = Object.entries(totals[t.label]).map(([k, v]) => `${v} ${k}`).join(', ');
    console.log(`  ${t.label.padEnd(LABEL_WIDTH)} ${counts}${time}`);
  }
  const divergent = entries.flatMap(({ c, rows }) => rows.filter(isBad)
    .map((r) => `  ${c.name} on ${r.target}: ${r.status} ${r.detail}`));
  if (divergent.length) console.log(`\ndivergences and errors:\n${divergent.join('\n')}`);
  writeHtml(opts.out, entries, targets, totals, { repeat: opts.repeat, threads: opts.threads, date: new Date().toISOString() });
  console.log(`\nreport: ${relative(process.cwd(), opts.out)} (${cases.length} cases, ${((performance.now() - started) / 1000).toFixed(1)} s)`);
  const ours = entries.reduce((n, { rows }) => n + rows.filter((r, i) => isBad(r) && isAttnkit(targets[i])).length, 0);
  if (ours || unreadable.length) {
    console.log(`compare: FAILED: ${ours} attnkit result(s) diverge or fail, ` +
      `${unreadable.length} case file(s) unreadable`);
    return 1;
  }
  console.log('compare: every attnkit target agrees with the reference ' +
    '(peers\' divergences, if any, are listed above)');
  return 0;
}

main().then((code) => process.exit(code), (err) => {
  console.error(`compare: ${err.message}`);
  process.exit(1);
});
