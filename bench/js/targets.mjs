// attnkit bench: issue 3's targets, each against the limit or peer measured in the same `npm run bench` run, read
// from the JSON that run wrote (kernels_bench and gqa_bench through --benchmark_out, gqa_ort.mjs through --json).
// It prints what was measured next to what each target needs, so a run says by itself which targets it met;
// wasm_vs_ort.mjs prints issue 5's the same way. Usage: node bench/js/targets.mjs DIR
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CACHES = ['fp32', 'int8', 'int4'];  // gqa_bench's cache kinds 0, 1, 2
const decodeRow = (cache, threads) => `BM_GQA_Decode_16x8/T:4096/cache:${cache}/threads:${threads}/mode:3/real_time`;
const prefillRow = (T, threads, flash) => `BM_GQA_Prefill/T:${T}/cache:0/threads:${threads}/flash:${flash}/real_time`;
const S8_QK = /^BM_QKGemm\/[^/]+\/s8\/M:1\/N:512\/K:128$/;
const FMA_PEAK = /^BM_FmaPeak\//;

// The gqa_bench rows the targets read (the tests check that gqa_bench still registers each of them).
export const GQA_ROWS = [...[1, 2].flatMap((t) => [0, 1, 2].map((c) => decodeRow(c, t))),
  prefillRow(2048, 1, 1), prefillRow(2048, 2, 1), prefillRow(4096, 1, 0), prefillRow(4096, 1, 1)];
export const KERNEL_ROWS = [S8_QK, FMA_PEAK];

// Google Benchmark's iteration rows by name. Its JSON keeps each counter as a top-level field: kernels_bench's
// GFLOP/s in FLOP/s, gqa_bench's GFLOPs and KV_GBs already in G per second.
export function benchmarkRows(json) {
  const rows = json?.benchmarks ?? [];
  return new Map(rows.filter((r) => r.run_type !== 'aggregate' && !r.error_occurred).map((r) => [r.name, r]));
}

const whole = (x) => x.toFixed(0), ratio = (x) => x.toFixed(2), fraction = (x) => `1/${Math.round(1 / x)}`;

// Rows {what, shown, need, ok (null where the benchmark did not run), detail} from kernels_bench's and gqa_bench's
// rows (benchmarkRows) and gqa_ort.mjs's.
export function issue3Targets({ kernels = new Map(), gqa = new Map(), ort = [] }) {
  const rows = [];
  const target = (what, measured, need, { atMost = false, unit = '', show = whole, detail = '' } = {}) => {
    const ran = Number.isFinite(measured);
    rows.push({ what, shown: ran ? `${show(measured)}${unit}` : 'not run',
      need: `${atMost ? '<=' : '>='} ${show(need)}${unit}`,
      ok: ran ? (atMost ? measured <= need : measured >= need) : null, detail: ran ? detail : '' });
  };
  const pct = (part, of) => (part && of ? (100 * part) / of : null);

  // Each percentage is of a peak measured beside it in the same binary (the host's speed moves within minutes):
  // kernels_bench's BM_FmaPeak for the kernel, and for gqa_bench's rows the FMA peak or read bandwidth of the same
  // threads, measured right after each row (fma_peak_GFLOPs, read_GBs).
  const kernelPeaks = [...kernels.values()].filter((r) => FMA_PEAK.test(r.name)).map((r) => r['GFLOP/s'] / 1e9);
  const fmaPeak = kernelPeaks.length ? Math.max(...kernelPeaks) : null;

  // Exact fp32 x int8 per-tensor QK: the fastest exact table (the one dispatch picks).
  const s8 = [...kernels.values()].filter((r) => S8_QK.test(r.name)).map((r) => r['GFLOP/s'] / 1e9);
  const s8Best = s8.length ? Math.max(...s8) : null;
  target('exact fp32 x int8 QK, M=1 N=512 K=128: % of one core\'s FMA peak', pct(s8Best, fmaPeak), 50,
    { unit: '%', detail: `${s8Best?.toFixed(1)} of ${fmaPeak?.toFixed(1)} GFLOP/s` });

  // Decode T=4096 in place over cold layers: each step's cache comes from DRAM, as layer after layer in a model.
  for (const threads of [1, 2]) {
    CACHES.forEach((cache, kind) => {
      const r = gqa.get(decodeRow(kind, threads));
      target(`decode T=4096 ${cache}, ${threads} thread(s): % of the read bandwidth`, pct(r?.KV_GBs, r?.read_GBs), 70,
        { unit: '%', detail: `${r?.KV_GBs?.toFixed(1)} of ${r?.read_GBs?.toFixed(1)} GB/s` });
    });
  }

  // Prefill fp32 causal S=T=2048 (flash): GFLOP/s over the causal FLOPs against threads x one core's peak.
  for (const threads of [1, 2]) {
    const r = gqa.get(prefillRow(2048, threads, 1));
    target(`prefill fp32 S=T=2048, ${threads} thread(s): % of the FMA peak`, pct(r?.GFLOPs, r?.fma_peak_GFLOPs), 70,
      { unit: '%', detail: `${r?.GFLOPs?.toFixed(1)} of ${r?.fma_peak_GFLOPs?.toFixed(1)} GFLOP/s` });
  }

  const naive = gqa.get(prefillRow(4096, 1, 0))?.scratch_MiB, flash = gqa.get(prefillRow(4096, 1, 1))?.scratch_MiB;
  target('flash peak scratch at S=T=4096 / the naive path\'s', naive && flash ? flash / naive : null, 0.1,
    { atMost: true, show: fraction, detail: `${flash?.toFixed(2)} / ${naive?.toFixed(1)} MiB` });

  // Against onnxruntime-node's own run (its profiler), same threads (medians of the alternating rounds; "not run"
  // where either side failed); session.run from JS, which also copies the outputs out, beside.
  const ortCases = [['gqa/prefill T=2048 fp32', 1.5], ...CACHES.map((cache) => [`gqa/decode T=4096 ${cache}`, 3])];
  for (const [name, need] of ortCases) {
    for (const threads of [1, 2]) {
      const r = ort.find((row) => row.name === name && row.threads === threads);
      const fromJs = r ? `; session.run ${ratio(r.ortJsMs / r.attnkitMs)}x` : '';
      target(`${name.slice(4)}, ${threads} thread(s): ORT / attnkit`, r?.ratio, need,
        { unit: 'x', show: ratio, detail: `rounds ${r?.spread.map(ratio).join('-')}${fromJs}` });
    }
  }
  return rows;
}

function main() {
  const dir = process.argv[2];
  if (!dir || process.argv.length > 3 || !existsSync(dir)) {
    process.stderr.write(`${dir && !existsSync(dir) ? `no such folder: ${dir}\n` : ''}`
      + 'Usage: node bench/js/targets.mjs DIR (holding kernels.json, gqa.json, gqa_ort.json)\n');
    process.exit(2);
  }
  const read = (file) => (existsSync(join(dir, file)) ? JSON.parse(readFileSync(join(dir, file), 'utf8')) : null);
  const rows = issue3Targets({ kernels: benchmarkRows(read('kernels.json')), gqa: benchmarkRows(read('gqa.json')),
    ort: read('gqa_ort.json') ?? [] });
  console.log('issue 3 targets, this run:');
  for (const r of rows) {
    const verdict = r.ok === null ? '-' : r.ok ? 'met' : 'NOT met';
    console.log(`  ${r.what.padEnd(66)}${r.shown.padStart(9)}  (${r.need})  ${verdict.padEnd(8)}${r.detail}`);
  }
  const measured = rows.filter((r) => r.ok !== null);
  console.log(`  ${measured.filter((r) => r.ok).length} of ${measured.length} measured targets met (the host is `
    + 'shared: a figure near its bound moves from run to run; bench/RESULTS.md keeps every run)');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
