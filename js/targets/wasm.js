// attnkit: the 'attnkit-wasm' comparison target: the npm package's threaded wasm build (SIMD128 + pthreads) loaded
// in this Node process, the same module a page gets. One instance serves every case; the thread count is per call.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInstance, prepareCase } from '../index.js';
import { repoRoot } from './native.js';

const DIST_FILES = ['attnkit-simd-threaded.js', 'attnkit-simd-threaded.wasm'];
const DEFAULT_BUDGET_MS = 2000;

let instancePromise = null;

// The shared instance, with a pool as large as the build allows so any per-call thread count fits.
export async function wasmInstance() {
  instancePromise ??= createInstance({ build: 'simd-threaded', threads: 64 });
  try {
    return await instancePromise;
  } catch (err) {
    instancePromise = null;
    throw err;
  }
}

// Terminates the pool's workers (Node cannot exit while they run).
export async function close() {
  const pending = instancePromise;
  instancePromise = null;
  if (pending) (await pending.catch(() => null))?.dispose();
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// Runs a prepared case (prepareCase) `repeat` times after one warm-up, stopping once the timed calls exceed
// budgetMs. Returns { outputs, timeMs, times }; throws AttnkitError on invalid input.
export async function timeWasm(prepared, { threads = 1, repeat = 5, budgetMs = DEFAULT_BUDGET_MS, path } = {}) {
  const instance = await wasmInstance();
  const call = () => instance.run(prepared.op, prepared.inputs, prepared.attrs, { outputs: prepared.outputs, threads, path });
  let outputs = call();
  const times = [];
  for (let r = 0; r < repeat; r++) {
    const t0 = performance.now();
    outputs = call();
    times.push(performance.now() - t0);
    if (times.reduce((x, y) => x + y, 0) > budgetMs) break;
  }
  return { outputs, timeMs: times.length ? median(times) : null, times };
}

export const attnkitWasmTarget = {
  id: 'attnkit-wasm',
  label: 'attnkit wasm (Node)',
  async available() {
    const missing = DIST_FILES.filter((f) => !existsSync(join(repoRoot, 'js/dist', f)));
    if (missing.length) return `js/dist/${missing.join(', js/dist/')} not built (npm run build)`;
    try {
      await wasmInstance();
      return true;
    } catch (err) {
      return `the threaded wasm build did not load: ${err.message}`;
    }
  },
  async run(caseObj, { threads = 1, repeat = 5 } = {}) {
    try {
      const { outputs, timeMs } = await timeWasm(prepareCase(caseObj), { threads, repeat });
      return { outputs, timeMs };
    } catch (err) {
      return { error: String(err.message ?? err).split('\n')[0] };
    }
  },
};
