// attnkit bench: QAttention on attnkit native (the CLI's `bench`) next to onnxruntime-node 1.30, same cases, same
// thread counts, in one run, printed as ratios. Issue 4's shapes: B=1, D=768, N=12, u8 x s8 per-column, prefill
// S in {128, 512} and a decode step S=1 with P=511. The weight is a graph input for ORT (not an initializer), so
// neither side can prepack it: both pack per call. ORT times are session.run from JS (adds ~0.05 ms of binding).
// Usage: node bench/js/qattention_ort.mjs [--threads 1,2] [--iters N]
import { benchNative } from '../../js/targets/native.js';
import { runOrt } from '../../js/targets/ort.js';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const threadList = flag('--threads', '1,2').split(',').map(Number);
const iters = Number(flag('--iters', 10));
const cli = flag('--cli', undefined);

const D = 768, N = 12, H = 64, C = 3 * D;
const wmag = 1 / (74 * Math.sqrt(D));

function qaCase(S, P) {
  const inputs = {
    input: { dtype: 'uint8', shape: [1, S, D], random: { seed: 1 } },
    weight: { dtype: 'int8', shape: [D, C], random: { seed: 2 } },
    bias: { dtype: 'float32', shape: [C], random: { seed: 3, low: -0.5, high: 0.5 } },
    input_scale: { dtype: 'float32', shape: [], data: [1 / 128] },
    weight_scale: { dtype: 'float32', shape: [C], random: { seed: 4, low: 0.5 * wmag, high: 1.5 * wmag } },
    input_zero_point: { dtype: 'uint8', shape: [], data: [128] },
    weight_zero_point: { dtype: 'int8', shape: [C], random: { seed: 5, low: -20, high: 20 } },
  };
  if (P > 0) inputs.past = { dtype: 'float32', shape: [2, 1, N, P, H], random: { seed: 6, low: -1, high: 1 } };
  return {
    name: P > 0 ? `qattention/decode/S1-P${P}` : `qattention/prefill/S${S}`,
    op: 'QAttention',
    attrs: { num_heads: N },
    inputs,
    outputs: P > 0 ? ['output', 'present'] : ['output'],
  };
}

const rows = [];
for (const c of [qaCase(128, 0), qaCase(512, 0), qaCase(1, 511)]) {
  for (const threads of threadList) {
    process.stderr.write(`bench ${c.name} threads=${threads}\n`);
    const native = await benchNative(c, { iters, warmup: 2, threads, ...(cli ? { cli } : {}) });
    let ortMs;
    try {
      ortMs = (await runOrt(c, { backend: 'node', threads, repeat: iters })).timeMs;
    } catch (err) {
      ortMs = NaN;
      process.stderr.write(`  ORT failed: ${err.message.split('\n')[0]}\n`);
    }
    if (native.error) process.stderr.write(`  attnkit failed: ${native.error}\n`);
    const attnkitMs = native.error ? NaN : native.median_us / 1000;
    rows.push({ case: c.name, threads, attnkitMs, ortMs, isa: native.isa });
  }
}
console.log('case                          threads  attnkit ms    ORT ms   ORT/attnkit');
for (const r of rows) {
  console.log(`${r.case.padEnd(30)}${String(r.threads).padStart(4)}${r.attnkitMs.toFixed(3).padStart(12)}${r.ortMs.toFixed(3).padStart(10)}${(r.ortMs / r.attnkitMs).toFixed(2).padStart(12)}x  (${r.isa})`);
}
