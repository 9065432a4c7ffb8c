// attnkit JS package: picks and instantiates one of the two wasm builds in js/dist.
// The threaded build needs SharedArrayBuffer and wasm threads (Node: always; a page: only when it is
// cross-origin isolated by COOP/COEP); otherwise the single-thread build runs. Works in Node 20, pages
// and workers; Node's modules are asked for where bundlers do not look (nodeBuiltin), so a web bundle needs none.
import { AttnkitError } from './errors.js';

// No prototype, as case.js's DTYPES: a build named "toString" is unknown.
export const BUILDS = Object.assign(Object.create(null), {
  'simd-threaded': {
    script: 'attnkit-simd-threaded.js', wasm: 'attnkit-simd-threaded.wasm', worker: 'attnkit-simd-threaded.worker.js',
    threaded: true,
  },
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

// Which build this environment can run and why: { build, reason } (build null: none can run); where that is the
// single-thread one, `why` says what the threaded one lacks.
export function detectBuild() {
  if (!validates(SIMD_PROBE)) {
    return { build: null, reason: 'this engine has no WebAssembly SIMD128, which both attnkit builds need' };
  }
  const singleThread = (why) => ({ build: 'simd', why, reason: `${why}: single-thread build` });
  // Browsers hide SharedArrayBuffer unless the page is cross-origin isolated, so that is the usual cause.
  if (!isNode && globalThis.crossOriginIsolated !== true) {
    return singleThread('page is not cross-origin isolated (serve it with COOP/COEP)');
  }
  if (!validates(THREADS_PROBE) || typeof SharedArrayBuffer !== 'function') {
    return singleThread('no SharedArrayBuffer / wasm threads in this engine');
  }
  if (isNode) return { build: 'simd-threaded', reason: 'Node: worker_threads and SharedArrayBuffer available' };
  return { build: 'simd-threaded', reason: 'cross-origin isolated: SharedArrayBuffer and wasm threads available' };
}

// Each file's default URL, written out whole: Vite, webpack 5 and Parcel emit a file that a bundle names as
// new URL('./literal', import.meta.url) with the bundle and rewrite the URL (Vite's build missed the worker script
// of new URL(`./dist/${file}`)). Functions, since a bundle without import.meta (IIFE) has no URL to resolve against.
const DIST_URLS = {
  'attnkit-simd-threaded.js': () => new URL('./dist/attnkit-simd-threaded.js', import.meta.url),
  'attnkit-simd-threaded.wasm': () => new URL('./dist/attnkit-simd-threaded.wasm', import.meta.url),
  'attnkit-simd-threaded.worker.js': () => new URL('./dist/attnkit-simd-threaded.worker.js', import.meta.url),
  'attnkit-simd.js': () => new URL('./dist/attnkit-simd.js', import.meta.url),
  'attnkit-simd.wasm': () => new URL('./dist/attnkit-simd.wasm', import.meta.url),
};

// The names a wasmPaths map may give.
export const DIST_FILES = Object.keys(DIST_URLS);

// Where a dist file lives. wasmPaths: a prefix (URL or folder, ending in '/') or a map from file name (the five of
// js/dist) to its URL/path, as bundlers and CDNs need; default: js/dist beside this file.
function locate(file, wasmPaths) {
  if (wasmPaths && typeof wasmPaths === 'object' && wasmPaths[file]) return String(wasmPaths[file]);
  if (typeof wasmPaths === 'string') return wasmPaths.endsWith('/') ? wasmPaths + file : `${wasmPaths}/${file}`;
  try {
    return DIST_URLS[file]().href;
  } catch {
    // A bundle in a format without import.meta (IIFE, CommonJS) cannot say where it was served from.
    throw new AttnkitError(`attnkit: cannot tell where ${file} is (this bundle has no import.meta.url): pass ` +
      "init({ wasmPaths }) with the URL of the folder holding js/dist's files", 1);
  }
}

// One of Node's modules, asked for where bundlers do not look: a bundle for the web must not try to resolve them
// (esbuild stops at a literal import of node:fs). process.getBuiltinModule is Node 20.16's; import() before that.
async function nodeBuiltin(name) {
  return globalThis.process?.getBuiltinModule?.(name) ?? import(/* webpackIgnore: true */ /* @vite-ignore */ name);
}

async function loadInNode(spec, wasmPaths, options) {
  const [{ createRequire }, fs, path, url] = await Promise.all(
    ['node:module', 'node:fs/promises', 'node:path', 'node:url'].map(nodeBuiltin));
  const toPath = (where) => (where.startsWith('file:') ? url.fileURLToPath(where) : path.resolve(where));
  const scriptPath = toPath(locate(spec.script, wasmPaths));
  const wasmPath = toPath(locate(spec.wasm, wasmPaths));
  const workerPath = spec.worker && toPath(locate(spec.worker, wasmPaths));
  let wasmBinary;
  try {
    wasmBinary = await fs.readFile(wasmPath);
  } catch (e) {
    throw new AttnkitError(`attnkit: cannot read ${wasmPath} (run \`npm run build\` to build the wasm modules): ${e.message}`, 1);
  }
  // A worker script that is not there would make the pool's workers throw in Node's event loop (the process dies).
  if (workerPath) {
    try {
      await fs.access(workerPath);
    } catch (e) {
      throw new AttnkitError(`attnkit: cannot read ${workerPath}: ${e.message}`, 1);
    }
  }
  const factory = createRequire(import.meta.url)(scriptPath);
  // Node 20's fetch() cannot read file paths, so the bytes are handed over; workers get the compiled module.
  const Module = await instantiate(factory, {
    ...options,
    wasmBinary,
    mainScriptUrlOrBlob: scriptPath,
    locateFile: (file) => (file === spec.worker ? workerPath : path.join(path.dirname(scriptPath), file)),
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
      tag.onerror = () => reject(new AttnkitError(`attnkit: cannot load ${scriptUrl} (serve js/dist's files there, ` +
        'or say where they are with init({ wasmPaths }))', 1));
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

// The threaded build's worker script, fetched before Emscripten starts its pool of workers: one that cannot load
// left init() waiting for it forever. A browser refuses a worker script of another origin (a CDN's), so such a one
// runs from a blob of its text (its own loads, the main script's, go to the CDN as the page's do).
async function workerScriptUrl(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (e) {
    throw new AttnkitError(`attnkit: cannot load ${url}: ${e.message}`, 1);
  }
  if (!response.ok) {
    throw new AttnkitError(`attnkit: cannot load ${url}: HTTP ${response.status} (serve js/dist's files together, ` +
      'or give each one\'s URL in init({ wasmPaths }))', 1);
  }
  const text = await response.text();  // a few KB; read whole, not cancelled, which devtools would show as failed
  if (new URL(url).origin === globalThis.location?.origin) return url;
  return URL.createObjectURL(new Blob([text], { type: 'text/javascript' }));
}

async function loadInBrowser(spec, wasmPaths, options) {
  const where = (file) => new URL(locate(file, wasmPaths), globalThis.location?.href).href;
  const scriptUrl = where(spec.script), wasmUrl = where(spec.wasm);
  const workerUrl = spec.worker && await workerScriptUrl(where(spec.worker));
  const factory = await loadFactoryInBrowser(scriptUrl);
  if (typeof factory !== 'function') throw new AttnkitError(`attnkit: ${scriptUrl} did not define createAttnkitModule`, 1);
  const files = { [spec.wasm]: wasmUrl, ...(spec.worker ? { [spec.worker]: workerUrl } : {}) };
  return instantiate(factory, {
    ...options,
    mainScriptUrlOrBlob: scriptUrl,
    locateFile: (file) => files[file] ?? new URL(file, scriptUrl).href,
  });
}

// factory(moduleArg), ending the pthread workers it started when it fails: the pool is spawned before the wasm is
// instantiated, and workers left behind keep Node alive (and idle in a page) after init() has given up on them.
async function instantiate(factory, moduleArg) {
  try {
    return await factory(moduleArg);
  } catch (e) {
    try {
      moduleArg.PThread?.terminateAllThreads();
    } catch {
      // nothing more to end
    }
    throw e;
  }
}

// Instantiates a build ('simd-threaded' | 'simd') whose calls may use up to `threads` threads; returns the Emscripten
// module. The threaded build starts a worker per thread (at most its capacity; each costs init() time and memory,
// wasm/CMakeLists.txt) and limits its calls to them.
export async function loadModule(build, wasmPaths, threads = 1) {
  const spec = BUILDS[build];
  if (!spec) throw new AttnkitError(`attnkit: unknown build "${build}" (simd-threaded | simd)`);
  let Module;
  try {
    const options = { attnkitPoolSize: Math.max(1, threads) };  // read by PTHREAD_POOL_SIZE (wasm/CMakeLists.txt)
    Module = await (isNode ? loadInNode(spec, wasmPaths, options) : loadInBrowser(spec, wasmPaths, options));
    Module._attnkit_wasm_set_max_threads(Math.min(threads, Module._attnkit_wasm_thread_capacity()));
  } catch (e) {
    if (e instanceof AttnkitError) throw e;
    throw new AttnkitError(`attnkit: loading the ${build} build failed: ${e?.message ?? e}`, 1);
  }
  return Module;
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
    const [os, fs] = await Promise.all(['node:os', 'node:fs'].map(nodeBuiltin));
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
