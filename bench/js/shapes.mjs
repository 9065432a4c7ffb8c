// attnkit benches: the shapes every Node bench runs (issue 3's GQA, any GQA shape for models_ort.mjs, issue 4's
// QAttention) as case objects, the command-line flags they share, and the attnkit-native-vs-onnxruntime-node loop, so all benches measure the
// same cases the same way.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ORT_NODE, runOrt } from '../../js/targets/ort.js';

const argv = process.argv.slice(2);
export const hasFlag = (name) => argv.includes(name);
export const flag = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
export const benchArgs = argv;

// Checks the command line against a bench's usage line ("node bench/js/x.mjs [--quick] [--iters N] ..."): --help
// prints it and exits 0; a flag it does not list, or a listed value left out, exits 2 with it on stderr, where a
// mistyped flag would otherwise run the whole bench for minutes with the defaults.
export function checkArgs(usage) {
  const takesValue = new Map([...usage.matchAll(/\[(--[\w-]+)( [^\]]+)?\]/g)].map((m) => [m[1], Boolean(m[2])]));
  const fail = (why) => {
    process.stderr.write(`${why}\nUsage: ${usage}\n`);
    process.exit(2);
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--help' || argv[i] === '-h') {
      process.stdout.write(`Usage: ${usage}\n`);
      process.exit(0);
    }
    if (!takesValue.has(argv[i])) fail(`unknown argument: ${argv[i]}`);
    const name = argv[i];
    if (takesValue.get(name) && (++i >= argv.length || argv[i].startsWith('--'))) fail(`${name} needs a value`);
  }
}

export const GQA = { N: 16, Nk: 8, H: 128 };
const rand = (seed, low = -1, high = 1) => ({ random: { seed, low, high } });

const CACHE_DTYPE = { fp32: 'float32', fp16: 'float16', int8: 'int8', int4: 'uint8' };

// GroupQueryAttention, one shape: B, N, Nk, H; S new tokens after P cached ones; cache fp32 | fp16 (then the query
// is fp16 too) | int8 | int4 (per-channel scales); rotary (split halves), softcap, window.
export function gqaShapeCase(name, { B = 1, N, Nk, H, S, P, cache = 'fp32', rotary = false, softcap = 0, window = -1,
  windowCache = 0, qkNorm = false }) {
  const T = P + S;
  const dtype = cache === 'fp16' ? 'float16' : 'float32';
  const inputs = {
    query: { dtype, shape: [B, S, N * H], ...rand(1) },
    key: { dtype, shape: [B, S, Nk * H], ...rand(2) },
    value: { dtype, shape: [B, S, Nk * H], ...rand(3) },
    seqlens_k: { dtype: 'int32', shape: [B], data: Array(B).fill(T - 1) },
    total_sequence_length: { dtype: 'int32', shape: [], data: [T] },
  };
  const attrs = { num_heads: N, kv_num_heads: Nk };
  const quantized = cache === 'int8' || cache === 'int4';
  if (quantized) {
    attrs.k_quant_type = attrs.v_quant_type = 'PER_CHANNEL';
    attrs.kv_cache_bit_width = cache === 'int8' ? 8 : 4;
    inputs.k_scale = { dtype: 'float32', shape: [1, Nk, 1, H], ...rand(4, 0.005, 0.01) };
    inputs.v_scale = { dtype: 'float32', shape: [1, Nk, 1, H], ...rand(5, 0.005, 0.01) };
  }
  if (rotary) {
    attrs.do_rotary = 1;
    inputs.cos_cache = { dtype, shape: [T + 16, H / 2], ...rand(11) };
    inputs.sin_cache = { dtype, shape: [T + 16, H / 2], ...rand(12) };
  }
  if (qkNorm) {
    inputs.q_norm_weight = { dtype, shape: [H], ...rand(13, 0.5, 1.5) };
    inputs.k_norm_weight = { dtype, shape: [H], ...rand(14, 0.5, 1.5) };
  }
  if (softcap) attrs.softcap = softcap;
  if (window > 0) attrs.local_window_size = window;
  // windowCache: sliding_window_cache = 1, past holds the latest windowCache rows of the P tokens.
  if (windowCache > 0) attrs.sliding_window_cache = 1;
  // A quantized prompt still needs (empty) past tensors of the cache dtype, or ORT cannot bind the cache type.
  if (P > 0 || quantized || windowCache > 0) {
    const row = cache === 'int4' ? H / 2 : H, rows = windowCache > 0 ? windowCache : P;
    const random = (seed) => (quantized ? { seed } : rand(seed).random);
    inputs.past_key = { dtype: CACHE_DTYPE[cache], shape: [B, Nk, rows, row], random: random(6) };
    inputs.past_value = { dtype: CACHE_DTYPE[cache], shape: [B, Nk, rows, row], random: random(7) };
  }
  return { name, op: 'GroupQueryAttention', attrs, inputs, outputs: ['output', 'present_key', 'present_value'] };
}

// A bench case's kind: 'decode' (one new token: a GQA query or QAttention input of one row) or 'prefill'. Derived,
// not stored: the case loaders refuse fields the case format does not define.
export function benchKind(c) {
  return (c.inputs.query ?? c.inputs.input).shape[1] === 1 ? 'decode' : 'prefill';
}

// Issue 3's GroupQueryAttention (N=16, Nk=8, H=128), B=1: `kind` 'prefill' (S = T, past 0) or 'decode' (S = 1 after
// `past` tokens); cache 'fp32' | 'int8' | 'int4'.
export function gqaCase(kind, S, past, cache) {
  return gqaShapeCase(`gqa/${kind} T=${past + S} ${cache}`, { ...GQA, S, P: past, cache });
}

// QAttention, issue 4's shape: B=1, D=768, N=12, u8 x s8 with per-column scale and zero point; `past` > 0 makes it
// a decode step. The weight is an input (not an initializer), so neither side can prepack it.
export function qattentionCase(S, past) {
  const D = 768, N = 12, C = 3 * D;
  const wmag = 1 / (74 * Math.sqrt(D));
  const inputs = {
    input: { dtype: 'uint8', shape: [1, S, D], random: { seed: 1 } },
    weight: { dtype: 'int8', shape: [D, C], random: { seed: 2 } },
    bias: { dtype: 'float32', shape: [C], ...rand(3, -0.5, 0.5) },
    input_scale: { dtype: 'float32', shape: [], data: [1 / 128] },
    weight_scale: { dtype: 'float32', shape: [C], ...rand(4, 0.5 * wmag, 1.5 * wmag) },
    input_zero_point: { dtype: 'uint8', shape: [], data: [128] },
    weight_zero_point: { dtype: 'int8', shape: [C], random: { seed: 5, low: -20, high: 20 } },
  };
  const outputs = ['output'];
  if (past > 0) {
    inputs.past = { dtype: 'float32', shape: [2, 1, N, past, D / N], ...rand(6) };
    outputs.push('present');
  }
  return { name: `qattention S=${S}${past ? ` P=${past}` : ''}`, op: 'QAttention', attrs: { num_heads: N }, inputs,
    outputs };
}

// A bench whose side failed has no ratio to show: name each failure and exit non-zero, so `npm run bench` (set -e)
// stops instead of judging the targets on the rows left.
export function failIfAny(failures) {
  if (!failures.length) return;
  process.stderr.write(`bench failures:\n${failures.map((f) => `  ${f}\n`).join('')}`);
  process.exitCode = 1;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

// The native CLI's `bench`, run through native_runner.mjs: a process that measures ORT node or attnkit wasm in itself
// must not spawn the CLI. After one spawn of /bin/true, a wasm prefill S=T=512 took 2,060 page faults (about 14 us
// each on this VM) and 58-82 ms on its next call, against 30 ms, and ORT node's prefill ran 25-48 ms in rounds that
// followed spawns against 14-31 without. Start it before allocating anything large (its own fork write-protects what
// exists then); close() lets the process exit.
export function startNativeRunner() {
  const proc = fork(fileURLToPath(new URL('./native_runner.mjs', import.meta.url)), [],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
  const pending = new Map();
  let next = 0;
  proc.on('message', ({ id, result }) => {
    pending.get(id)?.(result);
    pending.delete(id);
  });
  proc.on('exit', (code, signal) => {
    for (const resolve of pending.values()) resolve({ error: `native runner exited (${signal ?? code})` });
    pending.clear();
  });
  return {
    bench: (caseObject, options) => new Promise((resolve) => {
      const id = next++;
      pending.set(id, resolve);
      proc.send({ id, caseObject, options });
    }),
    close: () => proc.connected && proc.disconnect(),
  };
}

// onnxruntime-node's pool threads keep spinning for some tens of ms after session.run returns. A 2-thread
// attnkit run started at once shared its second core with them in 3 of 8 trials and took 1.7-1.9 ms instead
// of 0.95 ms (QAttention S=128); after a 100 ms pause, 8 of 8 runs were undisturbed.
const ORT_SPIN_PAUSE_MS = 200;

// Runs each case on attnkit native (the CLI's `bench`) and onnxruntime-node at every thread count, side by side,
// and prints the times and ORT / attnkit ratios. The host is shared and its load comes in bursts, so the two
// alternate in `rounds` rounds of `iters` calls each; a row shows the median over rounds of each side's median
// and the median of the per-round ratios (a burst then spoils one round, not one side). ORT's time is its own
// session run as its profiler measures it, as attnkit's is its C++ op call: from JS, session.run also copies every
// output into a fresh JS array, which made ORT 1.3-3.4x slower at decode T=4096 (shown beside, not judged).
// ORT's CPU EP refuses q/k_norm_weight: it times the same attention without them, the fused norm's few
// operations per row aside.
function withoutQkNorm(c) {
  const { q_norm_weight: q, k_norm_weight: k, ...inputs } = c.inputs;
  return q || k ? { ...c, inputs } : c;
}

// Which ORT ran, and which pages this Node process's fresh multi-MB arrays (attnkit wasm's and the ORT peers'
// outputs) come in: the peers' times depend on both (README, "Fresh multi-MB arrays in Node"), so every table says.
export function setupLine(peer) {
  const tunables = process.env.GLIBC_TUNABLES ?? '';
  return `${peer}; GLIBC_TUNABLES=${tunables} (glibc.malloc.hugetlb=1: fresh arrays in 2 MB pages)`;
}

export async function nativeVsOrt(cases, { threadList, iters, cli, rounds = 3 }) {
  const runner = startNativeRunner();
  const rows = [];
  const failures = [];
  for (const c of cases) {
    for (const threads of threadList) {
      process.stderr.write(`bench ${c.name} threads=${threads}\n`);
      const native = [], ort = [], ortJs = [], ratios = [];
      let isa = '?';
      // Both sides' first calls run slower (page faults, arenas and thread pools growing): after 2 untimed calls ORT's
      // fp32 prefill S=T=2048 took 184-247 ms where it runs at 134-140 after 8, its Qwen2.5 decode step 17-19 ms where
      // it runs at 1.0-1.6 after 20, and attnkit's two-thread Qwen2.5 step 0.27 ms where it runs at 0.08.
      const warmup = benchKind(c) === 'decode' ? 20 : 8;
      for (let round = 0; round < rounds; round++) {
        const n = await runner.bench(c, { iters, warmup, threads, ...(cli ? { cli } : {}) });
        if (n.error !== undefined) {
          failures.push(`${c.name} threads=${threads}: attnkit: ${n.error}`);
          break;
        }
        isa = n.isa;
        let ortRun;
        try {
          ortRun = await runOrt(withoutQkNorm(c), { backend: 'node', threads, repeat: iters, warmup, ownTime: true });
          await new Promise((resolve) => setTimeout(resolve, ORT_SPIN_PAUSE_MS));
        } catch (err) {
          failures.push(`${c.name} threads=${threads}: ORT: ${err.message.split('\n')[0]}`);
          break;
        }
        native.push(n.median_us / 1000);
        ort.push(ortRun.ownMs);
        ortJs.push(ortRun.timeMs);
        ratios.push(ortRun.ownMs / (n.median_us / 1000));
      }
      const ok = ratios.length > 0;
      rows.push({ name: c.name, threads, isa, attnkitMs: ok ? median(native) : NaN, ortMs: ok ? median(ort) : NaN,
        ortJsMs: ok ? median(ortJs) : NaN, ratio: ok ? median(ratios) : NaN,
        spread: ok ? [Math.min(...ratios), Math.max(...ratios)] : [NaN, NaN] });
    }
  }
  runner.close();
  console.log(setupLine(`${ORT_NODE} (onnxruntime-node)`));
  console.log('ORT ms: ORT\'s own run (its profiler); from JS: session.run, which also copies the outputs into JS '
    + 'arrays');
  console.log('case                          threads  attnkit ms    ORT ms   ORT/attnkit  (rounds: min-max)  from JS');
  for (const r of rows) {
    console.log(`${r.name.padEnd(30)}${String(r.threads).padStart(4)}${r.attnkitMs.toFixed(3).padStart(12)}`
      + `${r.ortMs.toFixed(3).padStart(10)}${r.ratio.toFixed(2).padStart(12)}x`
      + `  (${r.spread.map((x) => x.toFixed(2)).join('-')}, ${r.isa})`
      + `  ${r.ortJsMs.toFixed(3)} ms, ${(r.ortJsMs / r.attnkitMs).toFixed(2)}x`);
  }
  failIfAny(failures);
  return rows;
}
