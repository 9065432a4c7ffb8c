// attnkit demo page logic: init the package, run one case, show the build, timing and output summary; then, on
// request, time a model layer's decode steps through a KV cache. The outcome is also left on window.attnkitDemo
// ({ info, summary }, then decode: { ... }, or { error }) for browser tests.
import * as attnkit from '../index.js';

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

// A small GQA prompt used when no ?case= is given: 8 tokens, 4 query heads over 2 KV heads, head size 32.
const DEFAULT_CASE = {
  name: 'demo/gqa-prompt',
  op: 'GroupQueryAttention',
  attrs: { num_heads: 4, kv_num_heads: 2 },
  inputs: {
    query: { dtype: 'float32', shape: [1, 8, 128], random: { seed: 1 } },
    key: { dtype: 'float32', shape: [1, 8, 64], random: { seed: 2 } },
    value: { dtype: 'float32', shape: [1, 8, 64], random: { seed: 3 } },
    seqlens_k: { dtype: 'int32', shape: [1], data: [7] },
    total_sequence_length: { dtype: 'int32', shape: [], data: [8] },
  },
};

function summarize(outputs) {
  return Object.fromEntries(Object.entries(outputs).map(([name, t]) => {
    let sum = 0;
    for (const v of t.data) sum += Number(v);
    return [name, { dtype: t.dtype, shape: t.shape, first: Array.from(t.data.slice(0, 4), Number), sum }];
  }));
}

async function main() {
  const caseUrl = params.get('case');
  const caseObject = caseUrl ? await (await fetch(caseUrl)).json() : DEFAULT_CASE;
  const threads = Number(params.get('threads')) || undefined;
  const info = await attnkit.init({ build: params.get('build') ?? 'auto', threads });
  $('info').textContent = JSON.stringify(info, null, 2);
  const start = performance.now();
  const { outputs } = await attnkit.runCase(caseObject);
  const ms = performance.now() - start;
  const summary = summarize(outputs);
  $('result').textContent = `${caseObject.name ?? '(unnamed)'}: ${ms.toFixed(2)} ms\n${JSON.stringify(summary, null, 2)}`;
  $('status').textContent = `ran on the ${info.build} build (${info.threads} threads)`;
  window.attnkitDemo = { info, summary, outputs, ms };
  setUpDecodeForm(info);
}

// Deterministic filler (an LCG): float inputs in [-1, 1), cache bytes over their whole range.
function filled(Type, length, seed) {
  const out = new Type(length);
  let state = seed >>> 0;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = Type === Float32Array ? state / 2147483648 - 1 : state >>> 24;
  }
  return out;
}

function sameBits(a, b) {
  const [x, y] = [a, b].map((f) => new Uint32Array(f.buffer, f.byteOffset, f.length));
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

const DECODE_WARMUP = 8, DECODE_STEPS = 64;
const CACHE_ARRAYS = { float32: Float32Array, int8: Int8Array, uint8: Uint8Array };

// One attention layer: a cache loaded with `context` tokens (random: the time does not depend on the values), one
// step checked against the stateless op over the same past, then DECODE_STEPS timed steps (after DECODE_WARMUP
// untimed ones) into a reused array.
async function runDecode({ N, Nk, H, layers, dtype, context }) {
  const bits = dtype === 'int8' ? 8 : dtype === 'uint8' ? 4 : 0;
  const attrs = { num_heads: N, kv_num_heads: Nk };
  if (bits) {
    Object.assign(attrs, { k_quant_type: 'PER_CHANNEL', v_quant_type: 'PER_CHANNEL', kv_cache_bit_width: bits });
  }
  const row = bits === 4 ? H / 2 : H;
  const tensor = (data, shape) => ({ data, shape });
  const pastShape = [1, Nk, context, row];
  const past = {
    past_key: tensor(filled(CACHE_ARRAYS[dtype], Nk * context * row, 1), pastShape),
    past_value: tensor(filled(CACHE_ARRAYS[dtype], Nk * context * row, 2), pastShape),
  };
  const scale = tensor(new Float32Array(Nk * H).fill(bits === 4 ? 0.1 : 0.01), [Nk * H]);
  const scales = bits ? { k_scale: scale, v_scale: scale } : {};
  const token = (seed) => ({
    query: tensor(filled(Float32Array, N * H, seed), [1, 1, N * H]),
    key: tensor(filled(Float32Array, Nk * H, seed + 1), [1, 1, Nk * H]),
    value: tensor(filled(Float32Array, Nk * H, seed + 2), [1, 1, Nk * H]),
    ...scales,
  });
  const capacity = context + 1 + DECODE_WARMUP + DECODE_STEPS;
  const cache = attnkit.createKvCache({ kvHeads: Nk, headSize: H, capacity, dtype });
  try {
    cache.load(past);
    const first = token(10);
    const stepped = cache.step(first, attrs).output.data;
    const stateless = await attnkit.groupQueryAttention({
      ...first, ...past,
      seqlens_k: tensor(new Int32Array([context]), [1]),
      total_sequence_length: tensor(new Int32Array([context + 1]), [1]),
    }, attrs, { outputs: ['output'] });
    const tokens = Array.from({ length: DECODE_WARMUP + DECODE_STEPS }, (_, i) => token(20 + 3 * i));
    const into = { output: new Float32Array(N * H) };
    for (const t of tokens.splice(0, DECODE_WARMUP)) cache.step(t, attrs, { into });
    const times = tokens.map((t) => {
      const start = performance.now();
      cache.step(t, attrs, { into });
      return performance.now() - start;
    }).sort((a, b) => a - b);
    const msPerStep = times[DECODE_STEPS >> 1];
    return { msPerStep, fastest: times[0], slowest: times[DECODE_STEPS - 1], layers, msPerToken: msPerStep * layers,
      matchesStateless: sameBits(stepped, stateless.output.data) };
  } finally {
    cache.dispose();
  }
}

function setUpDecodeForm(info) {
  const form = $('decode');
  const button = form.querySelector('button');
  button.disabled = false;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    const [N, Nk, H, layers] = form.shape.value.split(',').map(Number);
    const settings = { N, Nk, H, layers, dtype: form.dtype.value, context: Number(form.context.value) };
    const layer = form.shape.selectedOptions[0].textContent.replace(/ \(.*/, '');
    const cacheName = form.dtype.selectedOptions[0].textContent;
    $('decodeResult').textContent = 'running…';
    try {
      const r = await runDecode(settings);
      $('decodeResult').textContent = [
        `${layer} layer, ${cacheName} cache, ${settings.context} tokens of context, the ${info.build} build on ` +
          `${info.threads} thread(s):`,
        `  ${r.msPerStep.toFixed(3)} ms a step (median of ${DECODE_STEPS}; ${r.fastest.toFixed(3)}-` +
          `${r.slowest.toFixed(3)}), ${Math.round(1000 / r.msPerStep)} steps/s`,
        `  ${r.layers} layers: ${r.msPerToken.toFixed(1)} ms of attention a token`,
        `  the first step gives the stateless op's output bit for bit: ${r.matchesStateless ? 'yes' : 'NO'}`,
      ].join('\n');
      window.attnkitDemo.decode = { ...settings, ...r };
    } catch (e) {
      $('decodeResult').textContent = `${e.name}: ${e.message}`;
      window.attnkitDemo.decode = { error: `${e.name}: ${e.message}` };
    } finally {
      button.disabled = false;
    }
  });
}

main().catch((e) => {
  $('status').textContent = `${e.name}: ${e.message}`;
  $('status').className = 'error';
  window.attnkitDemo = { error: `${e.name}: ${e.message}` };
});
