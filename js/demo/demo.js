// attnkit demo page logic: init the package, run one case, show the build, timing and output summary.
// The outcome is also left on window.attnkitDemo ({ info, summary } or { error }) for browser tests.
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
}

main().catch((e) => {
  $('status').textContent = `${e.name}: ${e.message}`;
  $('status').className = 'error';
  window.attnkitDemo = { error: `${e.name}: ${e.message}` };
});
