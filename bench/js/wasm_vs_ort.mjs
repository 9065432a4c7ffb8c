// attnkit bench (issue 5): attnkit's wasm build (the one init() picks: single-thread at 1 thread, threaded at 2) vs
// onnxruntime-web's wasm EP, both inside Node, at 1 and 2 threads, next to attnkit native single-thread (default ISA
// and AVX2). Shapes: issue 3's GQA (N=16, Nk=8, H=128;
// prefill S=T 512 [2048 with --full]; decode T 512/2048/4096; fp32/int8/int4 caches) and QAttention (B=1, D=768,
// N=12, u8 x s8 per-column; S 128/512, and S=1 after 511 past tokens; --window adds decoding through window-sized
// caches); each decode also as a step of a cache in wasm memory (KvCache, QAttentionCache). ORT web fixes its thread
// count when its wasm module first loads, so each thread count runs in its own child process (attnkit and ORT side
// by side in it).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInstance, prepareCase } from '../../js/index.js';
import { benchNative, cliAvailable, defaultCli } from '../../js/targets/native.js';
import { ORT_WEB, runOrt } from '../../js/targets/ort.js';
import { benchArgs as args, benchKind, checkArgs, failIfAny, flag, GQA, gqaCase, gqaShapeCase, hasFlag, qattentionCase,
  setupLine, startNativeRunner } from './shapes.mjs';
import { simd128PeakGflops } from './simd128_peak.mjs';

// Each thread count runs in a child process of this script (--child N, then the parent's flags).
if (args[0] !== '--child') {
  checkArgs('node bench/js/wasm_vs_ort.mjs [--full] [--quick] [--window] [--threads 1,2] [--iters N] ' +
    '[--filter SUBSTR] [--json FILE] [--dist DIR] [--build B] [--budget-ms MS] [--native-rounds R]');
}

const full = hasFlag('--full');
const quick = hasFlag('--quick');
const threadList = flag('--threads', '1,2').split(',').map(Number);
const iters = Number(flag('--iters', quick ? 3 : 10));
const filter = flag('--filter', '');
// Timed calls stop once they add up to this, so ORT's multi-second prefill does not take minutes per shape.
const BUDGET_MS = Number(flag('--budget-ms', quick ? 1500 : 4000));
const DECODE = { warmup: quick ? 5 : 20, repeat: Math.max(iters, quick ? 10 : 30) };
// Untimed prompt calls for ORT web and native, as nativeVsOrt gives both sides (attnkit wasm: WARMUP_MS below); ORT
// web's stop once they take BUDGET_MS, as its multi-second prompts would take minutes.
const PROMPT = { warmup: quick ? 1 : 8, repeat: iters };
// V8 runs a wasm function on its baseline compiler until the optimizing one, in the background, has caught up: the
// first prefill calls of a shape ran up to 1.5x slower (per-round wasm/AVX2 ratios 3.8x falling to 2.4x). attnkit
// warms up for this long (and at least 3 calls) before any timed call.
const WARMUP_MS = quick ? 300 : 1500;
// Rounds of wasm then native AVX2 at one thread (see child()).
const NATIVE_ROUNDS = Number(flag('--native-rounds', quick ? 2 : 5));

// ---- shapes (bench/js/shapes.mjs) ----
const { N, Nk, H } = GQA;
const rand = (seed, low = -1, high = 1) => ({ random: { seed, low, high } });

function allShapes() {
  const shapes = [];
  for (const T of quick ? [512] : full ? [512, 2048] : [512]) {
    for (const cache of ['fp32', 'int8', 'int4']) shapes.push(gqaCase('prefill', T, 0, cache));
  }
  for (const T of quick ? [2048] : [512, 2048, 4096]) {
    for (const cache of ['fp32', 'int8', 'int4']) shapes.push(gqaCase('decode', 1, T - 1, cache));
  }
  for (const S of quick ? [128] : [128, 512]) shapes.push(qattentionCase(S, 0));
  shapes.push(qattentionCase(1, 511));
  // --window: decode through a window-sized cache (sliding_window_cache, 1024 rows, window 1024) after 4096 tokens.
  if (hasFlag('--window')) {
    for (const cache of ['fp32', 'int8']) {
      shapes.push(gqaShapeCase(`gqa/decode T=4096 ${cache} window`, { ...GQA, S: 1, P: 4095, cache, window: 1024,
        windowCache: 1024 }));
    }
  }
  return shapes.filter((c) => c.name.includes(filter));
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;

function maxAbsDiff(a, b) {
  if (!a || !b || a.data.length !== b.data.length) return NaN;
  let m = 0;
  for (let i = 0; i < a.data.length; i++) m = Math.max(m, Math.abs(Number(a.data[i]) - Number(b.data[i])));
  return m;
}

// The same decode step on a KvCache living in wasm memory (the stateful form): the cache is filled once with
// T-1 tokens, then single-token steps are timed; nothing is copied in or out but the new token and the output.
// The first steps run before V8 has optimized the in-place path (int8, T=512: 0.72 ms over the first 10 steps,
// 0.35 after), so untimed steps come first, then the cache is cleared and filled again: the timed steps start at T.
function timeKvCacheDecode(instance, c, threads) {
  const T = c.inputs.seqlens_k.data[0] + 1;
  const dtype = c.inputs.past_key.dtype;
  const warmup = DECODE.warmup;
  const window = c.attrs.sliding_window_cache ? c.attrs.local_window_size : 0;
  const capacity = window ? c.inputs.past_key.shape[2] : T + Math.max(iters, warmup) + 1;
  const cache = instance.createKvCache({ kvHeads: Nk, headSize: H, capacity, window, dtype });
  try {
    const scales = c.inputs.k_scale ? { k_scale: c.inputs.k_scale, v_scale: c.inputs.v_scale } : {};
    const prompt = prepareCase({ ...c, inputs: {
      query: { dtype: 'float32', shape: [1, T - 1, N * H], ...rand(8) },
      key: { dtype: 'float32', shape: [1, T - 1, Nk * H], ...rand(9) },
      value: { dtype: 'float32', shape: [1, T - 1, Nk * H], ...rand(10) }, ...scales } });
    const step = prepareCase({ ...c, inputs: { query: c.inputs.query, key: c.inputs.key, value: c.inputs.value, ...scales } });
    cache.step(prompt.inputs, c.attrs, { threads });
    for (let r = 0; r < warmup; r++) cache.step(step.inputs, c.attrs, { threads });
    cache.clear();
    cache.step(prompt.inputs, c.attrs, { threads });
    const times = [];
    for (let r = 0; r < iters && cache.length < T + iters; r++) {
      const t0 = performance.now();
      cache.step(step.inputs, c.attrs, { threads });
      times.push(performance.now() - t0);
    }
    return median(times);
  } finally {
    cache.dispose();
  }
}

// QAttention's decode step on a QAttentionCache (the stateful form): the case's past is loaded once and the model's
// constants (weight, bias, scales, zero points) pinned, as an app would; then each timed step appends one token and is
// truncated back, untimed, so every step sees the case's P past tokens.
function timeQAttentionCacheDecode(instance, prepared, threads) {
  const { past, input, ...constants } = prepared.inputs;
  const [, batch, heads, P, headSize] = past.shape;
  const pinned = Object.entries(constants).map(([name, t]) => [name, instance.pin(t)]);
  const step = { input, ...Object.fromEntries(pinned) };
  const cache = instance.createQAttentionCache({ batch, heads, headSize, capacity: P + 1 });
  try {
    cache.load({ past });
    const output = new Float32Array(batch * heads * headSize);
    const times = [];
    for (let r = 0; r < DECODE.warmup + DECODE.repeat; r++) {
      const t0 = performance.now();
      cache.step(step, prepared.attrs, { threads, into: { output } });
      if (r >= DECODE.warmup) times.push(performance.now() - t0);
      cache.truncate(P);
    }
    return median(times);
  } finally {
    cache.dispose();
    for (const [, t] of pinned) t.dispose();
  }
}

// What any stateless decode call in a wasm module must spend just moving the cache (ORT web too): the past
// (GQA's past_key and past_value, QAttention's past) copied into the module's (shared, reused) memory, and the
// present copied out into fresh arrays the caller owns and keeps -- whose first touch page-faults, which
// dominates for large caches. Timed as the same typed-array operations js/marshal.js performs, without the op.
function timeCacheCopies(prepared) {
  const caches = ['past_key', 'past_value', 'past'].filter((k) => prepared.inputs[k]).map((k) => prepared.inputs[k].data);
  const bytes = caches.map((a) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
  const module = bytes.map((b) => new Uint8Array(new SharedArrayBuffer(b.length)));
  const times = [];
  let held = null;  // the caller holds the last outputs, as a decode loop does
  for (let r = 0; r < DECODE.warmup + DECODE.repeat; r++) {
    const t0 = performance.now();
    const out = [];
    for (let k = 0; k < bytes.length; k++) {
      module[k].set(bytes[k]);        // in
      out.push(module[k].slice());    // out, fresh
    }
    if (r >= DECODE.warmup) times.push(performance.now() - t0);
    held = out;
  }
  return median(times);
}

// ---- child: attnkit wasm and ORT web wasm at one thread count ----
async function child(threads) {
  const rounds = threads === 1 && cliAvailable() ? NATIVE_ROUNDS : 1;
  // Native AVX2 runs through a runner started before the module exists: spawning the CLI from here would fork this
  // process and slow the wasm calls after it (startNativeRunner in shapes.mjs).
  const runner = rounds > 1 ? startNativeRunner() : null;
  // --dist DIR benchmarks another build of the modules (e.g. a fresh emcmake tree) instead of js/dist; --build
  // simd-threaded keeps the threaded build at one thread too (auto: what init() picks).
  const instance = await createInstance({ build: flag('--build', 'auto'), threads,
    wasmPaths: flag('--dist', undefined) });
  const results = [];
  for (const c of allShapes()) {
    process.stderr.write(`  [${threads}T] ${c.name}\n`);
    const prepared = prepareCase(c);
    const call = (into) => instance.run(prepared.op, prepared.inputs, prepared.attrs, { outputs: prepared.outputs, threads, into });
    // A decode step is called thousands of times in a row: both sides are timed past the first calls, whose fresh
    // output arrays page-fault (a QAttention step took 3.9 ms over its first 20 calls and 1.0 ms after).
    const decode = benchKind(c) === 'decode';
    const { warmup, repeat } = decode ? DECODE : PROMPT;
    let wasmOut = null;
    let wasmError = null;
    // Timed calls fill the first call's output arrays again (the `into` option), as an application keeps its
    // buffers and as the native side reuses its heap. Fresh arrays, as ORT web hands out, are timed apart: on this
    // VM the page faults and garbage collection of multi-MB arrays added 2-15 ms to a 512-token prefill.
    let into;
    const times = [];
    const freshTimes = [];
    const timeCalls = (series, reuse) => {
      const round = [];
      for (let r = 0; r < repeat && round.reduce((x, y) => x + y, 0) < BUDGET_MS; r++) {
        const t0 = performance.now();
        wasmOut = call(reuse ? into : undefined);
        round.push(performance.now() - t0);
      }
      series.push(...round);
      return median(round);
    };
    const timeWasm = () => timeCalls(times, true);
    // At one thread, native AVX2 runs side by side with wasm: the two alternate in rounds and the ratio is the
    // median of the per-round ratios, so a burst of load on this shared host spoils one round, not one side.
    const vsAvx2 = [];
    const avx2Times = [];
    let avx2Error = null;
    try {
      for (let r = 0, t0 = performance.now(); r < Math.max(warmup, 3) || performance.now() - t0 < WARMUP_MS; r++) wasmOut = call();
      into = Object.fromEntries(Object.entries(wasmOut).map(([name, t]) => [name, t.data]));
      for (let round = 0; round < rounds; round++) {
        const wasmMs = timeWasm();
        if (rounds === 1) break;
        const native = await runner.bench(c, { iters: repeat, warmup, threads: 1, isa: 'avx2' });
        if (native.error !== undefined) {
          avx2Error = native.error;
          break;
        }
        avx2Times.push(native.median_us / 1000);
        vsAvx2.push(wasmMs / (native.median_us / 1000));
      }
    } catch (err) {
      wasmError = String(err.message ?? err).split('\n')[0];
    }
    // Fresh arrays and ORT web alternate in rounds too (ORT/fresh is the median of the per-round ratios): what a fresh
    // multi-MB array costs moved 5x from one burst of calls to the next on this VM (page faults), so a single burst
    // of each made the decode ratios a coin toss. Prefill takes one round: ORT web needs seconds per call there.
    let ortError = null;
    let diff = NaN;
    const ortTimes = [];
    const ortMeans = [];
    const vsOrt = [];
    for (let round = 0; round < (decode && !quick ? 3 : 1) && !ortError; round++) {
      let freshMs = null;
      try {
        if (!wasmError) freshMs = timeCalls(freshTimes, false);
      } catch (err) {
        wasmError = String(err.message ?? err).split('\n')[0];
      }
      try {
        const ort = await runOrt(c, { backend: 'web', threads, repeat, warmup, budgetMs: BUDGET_MS });
        ortTimes.push(ort.timeMs);
        ortMeans.push(ort.meanMs);
        if (freshMs) vsOrt.push(ort.timeMs / freshMs);
        diff = maxAbsDiff(wasmOut?.output, ort.outputs.output);
      } catch (err) {
        ortError = String(err.message ?? err).split('\n')[0];
      }
    }
    const ortMs = ortTimes.length ? median(ortTimes) : null;
    const inPlaceMs = !decode ? null
      : c.op === 'GroupQueryAttention' ? timeKvCacheDecode(instance, c, threads)
        : timeQAttentionCacheDecode(instance, prepared, threads);
    const copyMs = decode ? timeCacheCopies(prepared) : null;
    results.push({ name: c.name, threads, wasmMs: times.length ? median(times) : null,
      freshMs: freshTimes.length ? median(freshTimes) : null, wasmError, ortMs, ortError, avx2Error, diff,
      freshMeanMs: freshTimes.length ? mean(freshTimes) : null, ortMeanMs: ortMeans.length ? mean(ortMeans) : null,
      inPlaceMs, copyMs, avx2Ms: avx2Times.length ? median(avx2Times) : null,
      vsOrt: vsOrt.length ? median(vsOrt) : null, vsOrtSpread: vsOrt.length > 1 ? [Math.min(...vsOrt), Math.max(...vsOrt)] : null,
      vsAvx2: vsAvx2.length ? median(vsAvx2) : null, vsAvx2Spread: vsAvx2.length ? [Math.min(...vsAvx2), Math.max(...vsAvx2)] : null });
  }
  runner?.close();
  const info = instance.info();
  instance.dispose();
  process.stdout.write(`${JSON.stringify({ info: { isa: info.isa, build: info.build }, results })}\n`);
}

function runChild(threads) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), '--child', String(threads), ...args],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (d) => { out += d; });
    proc.on('error', reject);
    proc.on('close', (code) => {
      if (code !== 0) reject(new Error(`bench child (threads ${threads}) exited ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

// ---- parent: children per thread count, native single-thread, the table ----
const fmt = (x, w = 9) => (typeof x === 'number' && Number.isFinite(x) ? (x < 10 ? x.toFixed(3) : x.toFixed(1)) : '-').padStart(w);
const fmtRatio = (x, w = 8) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : '-').padStart(w);

// A prompt's multiply-adds over the causal scores and values, 2 FLOP each (as gqa_bench counts them).
function causalGflop(c) {
  const [, S, NH] = c.inputs.query.shape, P = c.inputs.past_key?.shape[2] ?? 0;
  return (4 * NH * (S * P + (S * (S + 1)) / 2)) / 1e9;
}

async function parent() {
  const shapes = allShapes();
  const byName = Object.fromEntries(shapes.map((c) => [c.name, { c, threads: {} }]));
  const wasmInfo = {};
  for (const threads of threadList) {
    process.stderr.write(`attnkit wasm + ORT web wasm, ${threads} thread(s):\n`);
    const { info, results } = await runChild(threads);
    wasmInfo[threads] = info;
    for (const r of results) byName[r.name].threads[threads] = r;
  }
  const haveNative = cliAvailable();
  if (!haveNative) process.stderr.write(`native: ${defaultCli} is not built; native columns stay empty\n`);
  for (const entry of Object.values(byName)) {
    if (!haveNative) break;
    process.stderr.write(`  native ${entry.c.name}\n`);
    const { warmup, repeat } = benchKind(entry.c) === 'decode' ? DECODE : PROMPT;
    const native = await benchNative(entry.c, { iters: repeat, warmup, threads: 1 });
    entry.nativeMs = native.error !== undefined ? null : native.median_us / 1000;
    entry.nativeError = native.error;
    entry.nativeIsa = native.isa;
  }

  // ORT/wasm compares fresh output arrays on both sides; wasm/avx2 the reused ones (see child()).
  const head = `${'shape'.padEnd(26)}${'thr'.padStart(4)}${'wasm ms'.padStart(10)}${'fresh ms'.padStart(10)}${'ORT ms'.padStart(10)}${'ORT/fresh'.padStart(10)}`
    + `${'target'.padStart(8)}${'nat ms'.padStart(10)}${'avx2 ms'.padStart(10)}${'wasm/avx2'.padStart(10)}${'|out diff|'.padStart(11)}`;
  const builds = Object.entries(wasmInfo).map(([t, info]) => `${info.build} build at ${t} thread(s)`).join(', ');
  const wasmLine = `attnkit wasm: ${builds}, kernels ${Object.values(wasmInfo)[0]?.isa}; `
    + `native: ${Object.values(byName)[0]?.nativeIsa ?? '-'} and avx2, 1 thread`;
  const lines = [wasmLine, setupLine(`${ORT_WEB} (onnxruntime-web)`), head];
  const verdicts = new Map();
  const verdict = (key) => (verdicts.has(key) ? verdicts.get(key) : verdicts.set(key, []).get(key));
  for (const { c, threads, nativeMs } of Object.values(byName)) {
    for (const t of threadList) {
      const r = threads[t];
      if (!r) continue;
      const speedup = r.vsOrt ?? r.ortMs / (r.freshMs ?? r.wasmMs);
      const kind = benchKind(c);
      const need = kind === 'prefill' ? 10 : 2;
      const avx2Ms = t === 1 ? r.avx2Ms : null;
      const vsAvx2 = t === 1 && Number.isFinite(r.vsAvx2) ? r.vsAvx2 : NaN;
      if (Number.isFinite(speedup)) verdict(`${c.op} ${kind} >= ${need}x ORT web`).push(speedup >= need);
      if (Number.isFinite(vsAvx2)) verdict(`${c.op} within 2.5x of native AVX2 (1 thread)`).push(vsAvx2 <= 2.5);
      lines.push(`${c.name.padEnd(26)}${String(t).padStart(4)}${fmt(r.wasmMs, 10)}${fmt(r.freshMs, 10)}${fmt(r.ortMs, 10)}${fmtRatio(speedup, 10)}`
        + `${`>=${need}x`.padStart(8)}${t === 1 ? fmt(nativeMs, 10) : ''.padStart(10)}${t === 1 ? fmt(avx2Ms, 10) : ''.padStart(10)}`
        + `${fmtRatio(vsAvx2, 10)}${(Number.isFinite(r.diff) ? r.diff.toExponential(1) : '-').padStart(11)}`
        + (r.vsOrtSpread ? `  (ORT/fresh rounds ${r.vsOrtSpread.map((x) => x.toFixed(2)).join('-')})` : '')
        + (t === 1 && r.vsAvx2Spread ? `  (wasm/avx2 rounds ${r.vsAvx2Spread.map((x) => x.toFixed(2)).join('-')})` : '')
        // What a loop of such calls averages: fresh multi-MB arrays now and then stall a call for tens of ms.
        + (kind === 'decode' && Number.isFinite(r.freshMeanMs) && Number.isFinite(r.ortMeanMs)
          ? `  (means: fresh ${r.freshMeanMs.toFixed(2)}, ORT ${r.ortMeanMs.toFixed(2)} ms)` : '')
        + (r.wasmError ? `  attnkit: ${r.wasmError.slice(0, 80)}` : '') + (r.ortError ? `  ORT: ${r.ortError.slice(0, 80)}` : ''));
      if (Number.isFinite(r.copyMs)) {
        // ORT web pays these copies too: where ORT's time is under 2x of them, no stateless call can be 2x faster.
        lines.push(`${'  ... cache copies alone'.padEnd(26)}${String(t).padStart(4)}${fmt(r.copyMs, 10)}${''.padStart(10)}${fmt(r.ortMs, 10)}`
          + `${fmtRatio(r.ortMs / r.copyMs, 10)}${'ceiling'.padStart(8)}`);
      }
      if (Number.isFinite(r.inPlaceMs)) {
        const inPlaceSpeedup = r.ortMs / r.inPlaceMs;
        verdict(`${c.op} decode, cache in wasm memory, >= 2x ORT web`).push(inPlaceSpeedup >= 2);
        const label = c.op === 'QAttention' ? '  ... QAttentionCache step' : '  ... KvCache (in place)';
        lines.push(`${label.padEnd(26)}${String(t).padStart(4)}${fmt(r.inPlaceMs, 10)}${''.padStart(10)}${fmt(r.ortMs, 10)}`
          + `${fmtRatio(inPlaceSpeedup, 10)}`);
      }
    }
  }
  // The fp32 prompt's ceiling on wasm: what SIMD128's separate multiplies and adds allow in this Node, measured here.
  const fp32Prompts = Object.values(byName).filter(({ c, threads }) =>
    c.op === 'GroupQueryAttention' && benchKind(c) === 'prefill' && c.name.endsWith('fp32') && threads[1]);
  if (fp32Prompts.length) {
    const peak = await simd128PeakGflops();
    lines.push('', `SIMD128 multiply + add in this Node, one thread: ${peak.toFixed(1)} GFLOP/s (simd128_peak.mjs)`);
    for (const { c, threads } of fp32Prompts) {
      const r = threads[1];
      const gflops = causalGflop(c) / (r.wasmMs / 1e3), needed = 10 * causalGflop(c) / (r.ortMs / 1e3);
      lines.push(`  ${c.name}: attnkit wasm ${gflops.toFixed(1)} GFLOP/s, ${((100 * gflops) / peak).toFixed(0)}% of `
        + `it; 10x ORT web would take ${needed.toFixed(0)} GFLOP/s`);
    }
  }
  lines.push('', 'targets met (rows meeting / rows measured):');
  for (const [key, v] of verdicts) lines.push(`  ${key}: ${v.filter(Boolean).length}/${v.length}`);
  console.log(lines.join('\n'));
  const jsonOut = flag('--json', null);
  if (jsonOut) writeFileSync(jsonOut, JSON.stringify(Object.values(byName).map(({ c, ...rest }) => ({ name: c.name, ...rest })), null, 1));
  failIfAny(Object.values(byName).flatMap(({ c, threads, nativeError }) => [
    ...Object.entries(threads).flatMap(([t, r]) => [[r.wasmError, 'attnkit wasm'], [r.ortError, 'ORT web'],
      [r.avx2Error, 'attnkit native AVX2']]
      .filter(([e]) => e).map(([e, who]) => `${c.name} threads=${t}: ${who}: ${e}`)),
    ...(nativeError ? [`${c.name}: attnkit native: ${nativeError}`] : []),
  ]));
}

if (args[0] === '--child') {
  await child(Number(args[1]));
} else {
  await parent();
}
