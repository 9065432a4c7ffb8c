// attnkit bench: GroupQueryAttention on attnkit native (the CLI's `bench`) next to onnxruntime-node 1.30,
// same cases, same thread counts, in one run, printed as ratios. Shapes are issue 3's (N=16, Nk=8, H=128).
// Usage: node bench/js/gqa_ort.mjs [--quick] [--threads 1,2] [--iters N]
import { benchNative } from '../../js/targets/native.js';
import { runOrt } from '../../js/targets/ort.js';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const quick = args.includes('--quick');
const threadList = flag('--threads', '1,2').split(',').map(Number);
const iters = Number(flag('--iters', quick ? 3 : 10));

const N = 16, Nk = 8, H = 128;
const rand = (seed) => ({ random: { seed, low: -1, high: 1 } });

function gqaCase(kind, S, past, cache) {
  const T = past + S;
  const inputs = {
    query: { dtype: 'float32', shape: [1, S, N * H], ...rand(1) },
    key: { dtype: 'float32', shape: [1, S, Nk * H], ...rand(2) },
    value: { dtype: 'float32', shape: [1, S, Nk * H], ...rand(3) },
    seqlens_k: { dtype: 'int32', shape: [1], data: [T - 1] },
    total_sequence_length: { dtype: 'int32', shape: [1], data: [T] },
  };
  const attrs = { num_heads: N, kv_num_heads: Nk };
  if (cache !== 'f32') {
    attrs.k_quant_type = attrs.v_quant_type = 'PER_CHANNEL';
    attrs.kv_cache_bit_width = cache === 'int8' ? 8 : 4;
    inputs.k_scale = { dtype: 'float32', shape: [1, Nk, 1, H], random: { seed: 4, low: 0.005, high: 0.01 } };
    inputs.v_scale = { dtype: 'float32', shape: [1, Nk, 1, H], random: { seed: 5, low: 0.005, high: 0.01 } };
  }
  if (past > 0 || cache !== 'f32') {
    const dtype = cache === 'f32' ? 'float32' : cache === 'int8' ? 'int8' : 'uint8';
    const row = cache === 'int4' ? H / 2 : H;
    const gen = cache === 'f32' ? rand(6) : { random: { seed: 6 } };
    inputs.past_key = { dtype, shape: [1, Nk, past, row], ...gen };
    inputs.past_value = { dtype, shape: [1, Nk, past, row], ...gen, random: { ...gen.random, seed: 7 } };
  }
  return {
    name: `gqa/${kind}/T${T}/${cache}`,
    op: 'GroupQueryAttention',
    attrs,
    inputs,
    outputs: ['output', 'present_key', 'present_value'],
  };
}

const shapes = [];
for (const T of quick ? [512] : [512, 2048]) for (const cache of ['f32', 'int8', 'int4']) shapes.push(gqaCase('prefill', T, 0, cache));
for (const T of quick ? [2048] : [512, 2048, 4096]) for (const cache of ['f32', 'int8', 'int4']) shapes.push(gqaCase('decode', 1, T - 1, cache));

const rows = [];
for (const c of shapes) {
  for (const threads of threadList) {
    process.stderr.write(`bench ${c.name} threads=${threads}\n`);
    const native = await benchNative(c, { iters, warmup: 2, threads });
    let ortMs;
    try {
      ortMs = (await runOrt(c, { backend: 'node', threads, repeat: iters })).timeMs;
    } catch (err) {
      ortMs = NaN;
      process.stderr.write(`  ORT failed: ${err.message.split('\n')[0]}\n`);
    }
    const attnkitMs = native.error ? NaN : native.median_us / 1000;
    rows.push({ case: c.name, threads, attnkit_ms: attnkitMs, ort_ms: ortMs, speedup: ortMs / attnkitMs, isa: native.isa });
  }
}
console.log('case                          threads  attnkit ms    ORT ms   ORT/attnkit');
for (const r of rows) {
  console.log(`${r.case.padEnd(30)}${String(r.threads).padStart(4)}${r.attnkit_ms.toFixed(3).padStart(12)}${r.ort_ms.toFixed(3).padStart(10)}${r.speedup.toFixed(2).padStart(12)}x`);
}
