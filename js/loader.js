// attnkit JS package: picks and instantiates one of the two wasm builds in js/dist.
// The threaded build needs SharedArrayBuffer and wasm threads (Node: always; a page: only when it is
// cross-origin isolated by COOP/COEP); otherwise the single-thread build runs. Works in Node 20, pages
// and workers; Node-only modules are imported lazily so bundlers for the web never see them.
import { AttnkitError } from './errors.js';

// No prototype, as case.js's DTYPES: a build named "toString" is unknown.
export const BUILDS = Object.assign(Object.create(null), {
  'simd-threaded': { script: 'attnkit-simd-threaded.js', wasm: 'attnkit-simd-threaded.wasm', threaded: true },
  simd: { script: 'attnkit-simd.js', wasm: 'attnkit-simd.wasm', threaded: false },
});

export const isNode = typeof process === 'object' && typeof process.versions?.node === 'string' &&
  typeof window === 'undefined';

// Smallest modules that only validate with the feature: one v128 constant, and a shared memory.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 22, 1, 20, 0,
  253, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11]);
const THREADS_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 4, 1, 3, 1, 1]);

function validates(bytes) {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(bytes);
  } catch {
    return false;
  }
}

// Which build this environment can run and why: { build, reason } (build null: none can run).
export function detectBuild() {
  if (!validates(SIMD_PROBE)) {
    return { build: null, reason: 'this engine has no WebAssembly SIMD128, which both attnkit builds need' };
  }
  // Browsers hide SharedArrayBuffer unless the page is cross-origin isolated, so that is the usual cause.
  if (!isNode && globalThis.crossOriginIsolated !== true) {
    return { build: 'simd', reason: 'page is not cross-origin isolated (serve it with COOP/COEP): single-thread build' };
  }
  if (!validates(THREADS_PROBE) || typeof SharedArrayBuffer !== 'function') {
    return { build: 'simd', reason: 'no SharedArrayBuffer / wasm threads in this engine: single-thread build' };
  }
  if (isNode) return { build: 'simd-threaded', reason: 'Node: worker_threads and SharedArrayBuffer available' };
  return { build: 'simd-threaded', reason: 'cross-origin isolated: SharedArrayBuffer and wasm threads available' };
}

// Where a dist file lives. wasmPaths: a prefix (URL or folder, ending in '/') or a map from file name to
// its URL/path, as bundlers and CDNs need; default: js/dist beside this file.
function locate(file, wasmPaths) {
  if (wasmPaths && typeof wasmPaths === 'object' && wasmPaths[file]) return String(wasmPaths[file]);
  if (typeof wasmPaths === 'string') return wasmPaths.endsWith('/') ? wasmPaths + file : `${wasmPaths}/${file}`;
  return new URL(`./dist/${file}`, import.meta.url).href;
}

async function loadInNode(spec, wasmPaths) {
  const [{ createRequire }, fs, path, url] = await Promise.all(
    [import('node:module'), import('node:fs/promises'), import('node:path'), import('node:url')]);
  const toPath = (where) => (where.startsWith('file:') ? url.fileURLToPath(where) : path.resolve(where));
  const scriptPath = toPath(locate(spec.script, wasmPaths));
  const wasmPath = toPath(locate(spec.wasm, wasmPaths));
  let wasmBinary;
  try {
    wasmBinary = await fs.readFile(wasmPath);
  } catch (e) {
    throw new AttnkitError(`attnkit: cannot read ${wasmPath} (run \`npm run build\` to build the wasm modules): ${e.message}`, 1);
  }
  const factory = createRequire(import.meta.url)(scriptPath);
  // Node 20's fetch() cannot read file paths, so the bytes are handed over; workers get the compiled module.
  const Module = await factory({
    wasmBinary,
    mainScriptUrlOrBlob: scriptPath,
    locateFile: (file) => path.join(path.dirname(scriptPath), file),
  });
  // The pool's workers are all loaded by now, and they only work inside a call, which holds the main thread until
  // they are done: they need not keep Node alive, so a script ends without dispose(). A worker allocated later
  // (none is, with the pool as large as the most threads) would be unref'd too.
  const PThread = Module.PThread;
  if (PThread) {
    for (const worker of [...PThread.unusedWorkers, ...PThread.runningWorkers]) worker.unref();
    const allocate = PThread.allocateUnusedWorker;
    PThread.allocateUnusedWorker = () => {
      allocate();
      PThread.unusedWorkers.at(-1).unref();
    };
  }
  return Module;
}

// The Emscripten loader is a classic script defining createAttnkitModule: a <script> tag in a page,
// importScripts in a classic worker, evaluated source in a module worker.
async function loadFactoryInBrowser(scriptUrl) {
  if (typeof document !== 'undefined') {
    await new Promise((resolve, reject) => {
      const tag = document.createElement('script');
      tag.src = scriptUrl;
      tag.onload = resolve;
      tag.onerror = () => reject(new AttnkitError(`attnkit: cannot load ${scriptUrl} (is js/dist served?)`, 1));
      document.head.appendChild(tag);
    });
    return globalThis.createAttnkitModule;
  }
  if (typeof importScripts === 'function') {
    try {
      importScripts(scriptUrl);
      return globalThis.createAttnkitModule;
    } catch {
      // Module workers have importScripts but refuse it; fall through to evaluating the source.
    }
  }
  const response = await fetch(scriptUrl);
  if (!response.ok) throw new AttnkitError(`attnkit: cannot load ${scriptUrl}: HTTP ${response.status}`, 1);
  return new Function(`${await response.text()}\nreturn createAttnkitModule;`)();
}

async function loadInBrowser(spec, wasmPaths) {
  const scriptUrl = new URL(locate(spec.script, wasmPaths), globalThis.location?.href).href;
  const wasmUrl = new URL(locate(spec.wasm, wasmPaths), globalThis.location?.href).href;
  const factory = await loadFactoryInBrowser(scriptUrl);
  if (typeof factory !== 'function') throw new AttnkitError(`attnkit: ${scriptUrl} did not define createAttnkitModule`, 1);
  return factory({
    mainScriptUrlOrBlob: scriptUrl,
    locateFile: (file) => (file === spec.wasm ? wasmUrl : new URL(file, scriptUrl).href),
  });
}

// Instantiates a build ('simd-threaded' | 'simd'); returns the Emscripten module.
export async function loadModule(build, wasmPaths) {
  const spec = BUILDS[build];
  if (!spec) throw new AttnkitError(`attnkit: unknown build "${build}" (simd-threaded | simd)`);
  try {
    return await (isNode ? loadInNode(spec, wasmPaths) : loadInBrowser(spec, wasmPaths));
  } catch (e) {
    if (e instanceof AttnkitError) throw e;
    throw new AttnkitError(`attnkit: loading the ${build} build failed: ${e?.message ?? e}`, 1);
  }
}

// CPUs a cgroup quota allows, rounded up, from cgroup v2's cpu.max text ("max 100000", "150000 100000") or v1's
// "quota period" (quota -1: none); 0 when there is no limit or the text does not parse. The native library's
// cpus_from_cgroup_quota, for Node 20, whose availableParallelism() follows the affinity mask but not a quota.
export function cpusFromCgroupQuota(text) {
  const m = /^\s*(\S+)\s+(\d+)\s*$/.exec(text ?? '');
  if (!m || m[1] === 'max' || !/^-?\d+$/.test(m[1])) return 0;
  const quota = Number(m[1]), period = Number(m[2]);
  return quota > 0 && period > 0 ? Math.ceil(quota / period) : 0;
}

// The CPUs this process may use; the threaded build's default thread count. In Node: the affinity mask, lowered to
// the cgroup quota at the namespace root (where Docker and Kubernetes put a container's --cpus).
export async function availableCores() {
  if (isNode) {
    const os = await import('node:os');
    const fs = await import('node:fs');
    const cores = os.availableParallelism ? os.availableParallelism() : os.cpus().length;
    const read = (file) => {
      try {
        return fs.readFileSync(file, 'utf8').split('\n')[0];
      } catch {
        return '';
      }
    };
    const v1 = `${read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')} ${read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')}`;
    const quota = cpusFromCgroupQuota(read('/sys/fs/cgroup/cpu.max')) || cpusFromCgroupQuota(v1);
    return Math.max(1, quota ? Math.min(cores, quota) : cores);
  }
  return globalThis.navigator?.hardwareConcurrency || 1;
}

// Stops the pthread workers (and so lets Node exit). The module cannot run threaded code afterwards.
export function terminateWorkers(Module) {
  // Join the pool's threads first: a worker still starting, or spinning for work, when it is terminated
  // kept running on thread data Emscripten had already freed (a memory-access trap in ~1 of 10 disposes).
  try {
    Module._attnkit_stop_threads?.();
  } catch {
    // a module that trapped: terminate its workers all the same
  }
  Module.PThread?.terminateAllThreads();
}
