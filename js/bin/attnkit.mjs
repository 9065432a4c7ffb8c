#!/usr/bin/env node
// attnkit CLI for the WebAssembly target: `run` and `bench` with the native CLI's options (but --reference) and
// output (native/cli.cc), so scripts can swap `build/native/attnkit` for `node js/bin/attnkit.mjs ... --target wasm`.
// Exit codes as native: 0 ok, 2 invalid case or arguments (one line on stderr), 1 I/O or internal.
import fs from 'node:fs';
import { AttnkitError, createInstance, prepareCase } from '../index.js';
import { listCases, parseCaseJson } from '../case.js';
import { writeRunResults } from '../run_result.js';

const USAGE = `usage: attnkit.mjs run CASE.json --target wasm [--out OUT.json] [--threads N] [--isa NAME] [--path auto|naive|flash] [--case NAME|INDEX] [--build auto|simd-threaded|simd]
       attnkit.mjs bench CASE.json --target wasm [--iters N] [--warmup N] [--threads N] [--isa NAME] [--path ...] [--case NAME|INDEX] [--out OUT.json] [--build ...]
       attnkit.mjs info --target wasm [--threads N] [--isa NAME] [--out OUT.json] [--build ...]`;

class UsageError extends Error {}

function parseCount(text, min, what) {
  const v = /^\d+$/.test(text ?? '') ? Number(text) : NaN;
  if (!(v >= min && v <= 1000000)) throw new UsageError(`${what}: must be an integer in [${min}, 1000000]`);
  return v;
}

// Asked for (`help`, or --help / -h anywhere), usage is the output: stdout, exit 0.
const wantsHelp = (argv) => argv[0] === 'help' || argv.some((a) => a === '--help' || a === '-h');

// The options each command takes (its usage line), as the native CLI refuses another command's.
const OPTIONS = {
  run: ['--target', '--out', '--threads', '--isa', '--path', '--case', '--build'],
  bench: ['--target', '--out', '--iters', '--warmup', '--threads', '--isa', '--path', '--case', '--build'],
  info: ['--target', '--out', '--threads', '--isa', '--build'],
};
const HINT = '(run attnkit.mjs without arguments for usage)';

function parseArgs(argv) {
  const o = { command: argv[0], target: 'wasm', threads: 0, iters: 10, warmup: 2, build: 'auto' };
  if (!OPTIONS[o.command]) {
    throw new UsageError(o.command === undefined ? `missing command (run, bench or info)\n${USAGE}`
      : `unknown command "${o.command}" (run, bench or info)`);
  }
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) {
      if (o.casePath || o.command === 'info') throw new UsageError(`unexpected argument "${arg}" ${HINT}`);
      o.casePath = arg;
      continue;
    }
    if (arg === '--reference') {
      throw new UsageError(
        '--reference: the fp64 reference runs natively only (build/native/attnkit run CASE.json --reference)');
    }
    if (!OPTIONS[o.command].includes(arg)) {
      const known = Object.values(OPTIONS).some((names) => names.includes(arg));
      throw new UsageError(known ? `${arg}: not an option of ${o.command} ${HINT}` : `unknown option ${arg} ${HINT}`);
    }
    const value = argv[++i];
    if (value === undefined) throw new UsageError(`${arg}: needs a value`);
    if (arg === '--target') o.target = value;
    else if (arg === '--out') o.out = value;
    else if (arg === '--threads') o.threads = parseCount(value, 0, '--threads');
    else if (arg === '--iters') o.iters = parseCount(value, 1, '--iters');
    else if (arg === '--warmup') o.warmup = parseCount(value, 0, '--warmup');
    else if (arg === '--isa') o.isa = value;
    else if (arg === '--case') o.caseSelector = value;
    else if (arg === '--build') o.build = value;
    else if (arg === '--path') {
      if (!['auto', 'naive', 'flash'].includes(value)) throw new UsageError(`--path: "${value}" must be auto, naive or flash`);
      o.path = value;
    }
  }
  if (o.target !== 'wasm') {
    throw new UsageError(`--target: "${o.target}" is not served here (wasm); the native CLI is build/native/attnkit`);
  }
  if (o.command !== 'info' && !o.casePath) throw new UsageError(`${o.command}: missing CASE.json ${HINT}`);
  return o;
}

// The file's cases with their display names, filtered by --case as the native CLI does.
function loadCases(o) {
  let text;
  try {
    text = fs.readFileSync(o.casePath, 'utf8');
  } catch (e) {
    throw Object.assign(new Error(`${o.casePath}: cannot read: ${e.message}`), { exitCode: 1 });
  }
  let doc;
  try {
    doc = parseCaseJson(text);
  } catch (e) {
    throw new UsageError(`${o.casePath}: ${e.message}`);
  }
  let list;
  try {
    list = listCases(doc);
  } catch (e) {
    throw new UsageError(e.message);
  }
  const many = Array.isArray(doc) && o.caseSelector === undefined;
  const all = list.map((c, index) => ({
    c,
    name: typeof c.name === 'string' ? c.name : `#${index}`,
  }));
  if (o.caseSelector === undefined) return { many, cases: all };
  let picked = all.find((e) => e.name === o.caseSelector);
  if (!picked && /^\d+$/.test(o.caseSelector)) picked = all[Number(o.caseSelector)];
  if (!picked) {
    throw new UsageError(`--case: no case named or numbered "${o.caseSelector}" in ${o.casePath} (${all.length} cases)`);
  }
  return { many: false, cases: [picked] };
}

function write(o, text) {
  if (o.out) fs.writeFileSync(o.out, text);
  else process.stdout.write(text);
}

function runCommand(attnkit, o) {
  const { many, cases } = loadCases(o);
  const results = [];
  for (const { c, name } of cases) {
    let outputs;
    try {
      ({ outputs } = attnkit.runCase(c, { threads: o.threads, path: o.path }));
    } catch (e) {
      if (e instanceof AttnkitError && many) e.message = `case ${name}: ${e.message}`;
      throw e;
    }
    results.push({ name, outputs });
  }
  // Nothing is written unless every case succeeded, as natively; large tensors go out a slice at a time.
  const fd = o.out ? fs.openSync(o.out, 'w') : null;
  try {
    const put = fd === null ? (text) => process.stdout.write(text) : (text) => fs.writeSync(fd, text);
    writeRunResults(put, results, many);
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

function benchCommand(attnkit, o) {
  const { cases } = loadCases(o);
  if (cases.length !== 1) {
    throw new UsageError(`bench: ${o.casePath} holds ${cases.length} cases; pick one with --case NAME|INDEX`);
  }
  const { c, name } = cases[0];
  const { op, inputs, attrs, outputs } = prepareCase(c);
  const stats = {};
  const options = { outputs, threads: o.threads, path: o.path, stats };
  // Timed as a JS caller in a loop sees it: inputs copied in, the op, outputs copied out into the first call's
  // arrays (`into`), as the native CLI reuses its heap. Fresh multi-MB arrays page-fault: a decode step after 4095
  // int8 tokens took 30-40 ms per call for its first 7 fresh calls and every ~6th after, 3 ms otherwise.
  const first = attnkit.run(op, inputs, attrs, options);
  let peak = stats.peakScratchBytes;
  options.into = Object.fromEntries(Object.entries(first).map(([name, t]) => [name, t.data]));
  const times = [];
  for (let i = 0; i < o.warmup + o.iters; i++) {
    const start = performance.now();
    attnkit.run(op, inputs, attrs, options);
    const us = (performance.now() - start) * 1000;
    if (i >= o.warmup) times.push(us);
    peak = Math.max(peak, stats.peakScratchBytes);
  }
  const sorted = times.slice().sort((a, b) => a - b);
  const n = sorted.length;
  const median = n % 2 ? sorted[(n - 1) / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const info = attnkit.info();
  const line = {
    name, op, median_us: median, min_us: sorted[0], mean_us: sorted.reduce((s, t) => s + t, 0) / n,
    iters: o.iters, warmup: o.warmup, isa: info.isa,
    threads: o.threads ? Math.min(o.threads, info.maxThreads) : info.threads,
    path: o.path ?? 'auto', peak_scratch_bytes: peak, target: 'wasm', build: info.build,
  };
  write(o, `${JSON.stringify(line)}\n`);
}

async function main(argv) {
  if (wantsHelp(argv)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let attnkit = null;
  try {
    const o = parseArgs(argv);
    attnkit = await createInstance({ build: o.build, threads: o.threads || undefined });
    if (o.isa && !attnkit.setIsa(o.isa)) {
      const available = attnkit.info().available_isas ?? [];
      throw new UsageError(`--isa: "${o.isa}" is not available here (available: ${available.join(', ')})`);
    }
    if (o.command === 'info') write(o, `${JSON.stringify(attnkit.info())}\n`);
    else if (o.command === 'run') runCommand(attnkit, o);
    else benchCommand(attnkit, o);
    return 0;
  } catch (e) {
    process.stderr.write(`${e.message}\n`);
    if (e instanceof UsageError) return 2;
    if (e instanceof AttnkitError) return e.code;
    return e.exitCode ?? 1;
  } finally {
    attnkit?.dispose();
  }
}

process.exitCode = await main(process.argv.slice(2));
