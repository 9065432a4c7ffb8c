// attnkit demo page logic: init the package, run one case, show the build, timing and output summary; then, on
// request, time a model layer's decode steps through a KV cache in a module worker (decode.js). The outcome is also
// left on window.attnkitDemo ({ info, summary }, then decode: { ... }, or { error }) for browser tests.
import * as attnkit from '../index.js';
import { DECODE_STEPS } from './decode.js';

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
  setUpDecodeForm({ build: params.get('build') ?? 'auto', threads });
}

// The timer's worker, started on the first run; each run inits it as the page was (the same options keep its
// instance) and answers { info, result } or { error }.
let decodeWorker = null;
function decodeInWorker(init, settings) {
  decodeWorker ??= new Worker(new URL('./decode_worker.js', import.meta.url), { type: 'module' });
  return new Promise((resolve) => {
    decodeWorker.onmessage = ({ data }) => resolve(data);
    decodeWorker.onerror = (e) => resolve({ error: `the decode worker failed: ${e.message}` });
    decodeWorker.postMessage({ init, settings });
  });
}

function setUpDecodeForm(init) {
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
      const { info, result: r, error } = await decodeInWorker(init, settings);
      if (error) throw new Error(error);
      $('decodeResult').textContent = [
        `${layer} layer, ${cacheName} cache, ${settings.context} tokens of context, the ${info.build} build on ` +
          `${info.threads} thread(s) in a module worker:`,
        `  ${r.msPerStep.toFixed(3)} ms a step (median of ${DECODE_STEPS}; ${r.fastest.toFixed(3)}-` +
          `${r.slowest.toFixed(3)}), ${Math.round(1000 / r.msPerStep)} steps/s`,
        `  ${r.layers} layers: ${r.msPerToken.toFixed(1)} ms of attention a token`,
        `  the first step gives the stateless op's output bit for bit: ${r.matchesStateless ? 'yes' : 'NO'}`,
      ].join('\n');
      window.attnkitDemo.decode = { ...settings, ...r };
    } catch (e) {
      $('decodeResult').textContent = e.message;
      window.attnkitDemo.decode = { error: e.message };
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
