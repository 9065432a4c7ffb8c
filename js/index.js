// attnkit JS package entry: GroupQueryAttention and QAttention on WebAssembly (SIMD128, threaded where
// the environment allows). `init()` loads a build; the op functions take { name: { data, shape, dtype? } }
// and return owned typed arrays; `createInstance()` gives independent modules (e.g. both builds at once).
import { AttnkitError, checkNames, shown, thrownLine } from './errors.js';
import { availableCores, BUILDS, detectBuild, DIST_FILES, loadModule, terminateWorkers } from './loader.js';
import { heapBuffer, runOperator, PinnedTensor, pinTensor, WasmTrap } from './marshal.js';
import {
  createKvCache as newCacheHandle, createQAttentionCache as newQAttentionCacheHandle, loadKvCache,
  loadQAttentionCache, readKvCache, readQAttentionCache, reserveKvCache, stepKvCache, stepQAttentionCache,
  truncateKvCache, truncateQAttentionCache,
} from './cache_calls.js';
import { CaseError, materializeTensor, normalizeCase } from './case.js';

export { AttnkitError, PinnedTensor };

const PATHS = new Set(['auto', 'naive', 'flash']);
const CALL_OPTIONS = ['threads', 'path', 'outputs', 'into', 'stats'];
const STEP_OPTIONS = ['threads', 'path', 'into', 'stats'];  // a cache step has one output

// A case's inputs as typed arrays, refused with the native case loader's messages (oversized shapes
// before anything is allocated), so `attnkit run` and runCase fail alike.
function materializeCaseInputs(c) {
  const inputs = {};
  for (const [name, t] of Object.entries(c.inputs)) {
    try {
      inputs[name] = materializeTensor(t, name);
    } catch (e) {
      throw new AttnkitError(e instanceof CaseError ? e.message : `${name}: ${e.message}`);
    }
  }
  return inputs;
}

function checkThreads(threads, what) {
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 0)) {
    throw new AttnkitError(`${what}: threads must be a non-negative integer (0 = default)`);
  }
}

// A call's options ({ threads, path, into, outputs, stats }; none when undefined or null), checked.
function callOptions(options, what, names = CALL_OPTIONS) {
  if (options == null) return {};
  if (typeof options !== 'object') throw new AttnkitError(`${what}: options must be an object`);
  checkNames(what, options, names);
  checkThreads(options.threads, what);
  if (options.path !== undefined && !PATHS.has(options.path)) {
    throw new AttnkitError(`${what}: path must be auto, naive or flash`);
  }
  const { outputs } = options;
  if (outputs !== undefined && !(Array.isArray(outputs) && outputs.every((name) => typeof name === 'string'))) {
    throw new AttnkitError(`${what}: outputs must be an array of output names`);
  }
  if (options.stats !== undefined && (options.stats === null || typeof options.stats !== 'object')) {
    throw new AttnkitError(`${what}: stats must be an object (the call fills in peakScratchBytes)`);
  }
  return options;
}

// A case object as the arguments of one op call: { op, inputs (typed arrays), attrs, outputs }. Benchmarks
// prepare once and time only the calls.
export function prepareCase(caseObject) {
  let c;
  try {
    c = normalizeCase(caseObject);
  } catch (e) {
    throw new AttnkitError(e.message);
  }
  return { name: c.name, op: c.op, inputs: materializeCaseInputs(c), attrs: c.attrs, outputs: c.outputs };
}

// One loaded wasm module and its settings.
export class AttnkitInstance {
  constructor(Module, build, reason, threads, maxThreads) {
    this.Module = Module;
    this.build = build;
    this.reason = reason;
    this.threads = threads;
    this.maxThreads = maxThreads;
    this.disposed = false;
    this.replacedBy = null;  // the build that init() replaced this default instance with
    this.fellBackFrom = null;  // the build that was picked but did not load (loadInstance)
    this.nativeInfo = JSON.parse(Module.UTF8ToString(Module._attnkit_info_json() >>> 0));
  }

  info() {
    return {
      ...this.nativeInfo,
      build: this.build,
      reason: this.reason,
      threads: this.threads,
      maxThreads: this.maxThreads,
      isa: this.nativeInfo.isa,
      version: this.nativeInfo.version,
      memoryBytes: this.memoryBytes(),
    };
  }

  // Size of the wasm heap now (it only grows; tests use it to show calls free what they allocate).
  memoryBytes() {
    return this.disposed ? 0 : heapBuffer(this.Module).byteLength;
  }

  // Forces a kernel ISA ('scalar' | 'wasm128'); false if this build lacks it.
  setIsa(isa) {
    this.#checkAlive();
    if (typeof isa !== 'string') throw new AttnkitError(`setIsa: the ISA must be a string, got ${typeof isa}`);
    const bytes = new TextEncoder().encode(`${isa}\0`);
    const at = this.Module._malloc(bytes.length) >>> 0;
    new Uint8Array(heapBuffer(this.Module)).set(bytes, at);
    const ok = this.Module._attnkit_set_isa(at) === 0;
    this.Module._free(at);
    if (ok) this.nativeInfo = JSON.parse(this.Module.UTF8ToString(this.Module._attnkit_info_json() >>> 0));
    return ok;
  }

  run(op, inputs, attrs, options) {
    if (typeof op !== 'string') throw new AttnkitError('run: op must be a string such as "GroupQueryAttention"');
    return this._guard(op, () => {
      const o = callOptions(options, op);
      return runOperator(this.Module, op, inputs, attrs, o, this._callThreads(o));
    });
  }

  // Whether this instance's pool runs `threads` threads, or as many as its build can.
  pooled(threads) {
    return Math.min(threads, this.Module._attnkit_wasm_thread_capacity()) <= this.maxThreads;
  }

  // Threads for one call: the call's, else the instance's, clamped to the pool.
  _callThreads(options) {
    return Math.min(options.threads || this.threads, this.maxThreads);
  }

  // Runs fn, which calls into the module. A trap leaves the module in an unknown state: the instance is disposed and
  // later calls refused rather than compute garbage. Anything else thrown (a getter of the caller's that throws) is
  // an AttnkitError for invalid input, and the instance goes on: a call frees what it allocated on every way out.
  _guard(what, fn) {
    this.#checkAlive();
    try {
      return fn();
    } catch (e) {
      if (e instanceof AttnkitError) throw e;
      if (e instanceof WasmTrap || e instanceof WebAssembly.RuntimeError) {
        this.dispose();
        throw new AttnkitError(`${what}: the wasm module trapped (${e.message}); call init() again`, 1);
      }
      throw new AttnkitError(`${what}: ${thrownLine(e)}`, 2);
    }
  }

  groupQueryAttention(inputs, attrs, options) {
    return this.run('GroupQueryAttention', inputs, attrs, options);
  }

  qAttention(inputs, attrs, options) {
    return this.run('QAttention', inputs, attrs, options);
  }

  // A GroupQueryAttention KV cache in wasm memory that grows in place: see KvCache.
  createKvCache(config) {
    return this._guard('kv cache', () => {
      checkNames('kv cache', config, ['batch', 'kvHeads', 'headSize', 'capacity', 'dtype', 'window']);
      return new KvCache(this, newCacheHandle(this.Module, config ?? {}), config ?? {});
    });
  }

  // Copies a tensor into this instance's wasm memory once; passed as an input (to any call or cache step of this
  // instance) it is not copied again: a model's rotary tables or QAttention's weights, constant across its calls.
  pin(tensor) {
    return this._guard('pin', () => pinTensor(this, tensor));
  }

  // A QAttention past/present cache in wasm memory that grows in place: see QAttentionCache.
  createQAttentionCache(config) {
    return this._guard('qattention cache', () => {
      checkNames('qattention cache', config, ['batch', 'heads', 'headSize', 'capacity']);
      return new QAttentionCache(this, newQAttentionCacheHandle(this.Module, config ?? {}), config ?? {});
    });
  }

  // Runs one case object (the corpus format, tests/cases); returns { outputs }.
  runCase(caseObject, options = {}) {
    const { op, inputs, attrs, outputs } = prepareCase(caseObject);
    const o = callOptions(options, 'runCase');
    return { outputs: this.run(op, inputs, attrs, { ...o, outputs: o.outputs ?? outputs }) };
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    terminateWorkers(this.Module);
    this.Module = null;
  }

  #checkAlive() {
    if (!this.disposed) return;
    if (this.replacedBy) {
      throw new AttnkitError(`attnkit: this instance was replaced when init() loaded the ${this.replacedBy} build; ` +
        'make caches and pins again from it', 1);
    }
    throw new AttnkitError('attnkit: this instance was disposed; call init() again', 1);
  }
}

// A cache living in an instance's wasm memory, freed by dispose() (or with its instance).
class ResidentCache {
  #instance;
  #handle;
  #what;
  #free;
  constructor(instance, handle, what, free) {
    this.#instance = instance;
    this.#handle = handle;
    this.#what = what;
    this.#free = free;
  }

  // fn(Module, handle), guarded as the instance's own calls are (AttnkitInstance._guard); throws once the cache or
  // its instance is gone.
  _call(fn) {
    if (!this.#handle) throw new AttnkitError(`${this.#what}: disposed`, 1);
    return this.#instance._guard(this.#what, () => fn(this.#instance.Module, this.#handle));
  }

  // One step: fn(Module, handle, options, threads) with the call's options checked.
  _step(options, fn) {
    return this._call((Module, handle) => {
      const o = callOptions(options, this.#what, STEP_OPTIONS);
      return fn(Module, handle, o, this.#instance._callThreads(o));
    });
  }

  // Frees the cache's wasm memory (also freed with its instance).
  dispose() {
    if (!this.#handle) return;
    if (!this.#instance.disposed) this.#instance.Module[this.#free](this.#handle);
    this.#handle = 0;
  }
}

// A KV cache that lives in the instance's wasm memory: each step() passes only the new tokens (query, key,
// value and any rotary/bias/sink/scale inputs) and attends over the whole cache without copying it in or out,
// so a decode step costs what the attention costs. Outputs equal the stateless op's on the same cache.
export class KvCache extends ResidentCache {
  constructor(instance, handle, config) {
    super(instance, handle, 'kv cache', '_attnkit_kv_cache_free');
    this.capacity = config.capacity;
    this.window = config.window ?? 0;
    this.#headSize = config.headSize;
  }

  #headSize;

  // inputs: GroupQueryAttention's inputs without past_key, past_value, seqlens_k, total_sequence_length;
  // attrs: its attributes. Returns { output }.
  step(inputs, attrs, options) {
    return this._step(options,
      (Module, handle, o, threads) => stepKvCache(Module, handle, inputs, attrs, o, threads, this.#headSize));
  }

  // Tokens the cache stands for (rotary positions go on from here); `rows` of them are held, fewer with a window.
  get length() {
    return this._call((Module, handle) => Module._attnkit_kv_cache_length(handle));
  }

  get rows() {
    return this._call((Module, handle) => Module._attnkit_kv_cache_rows(handle));
  }

  clear() {
    this._call((Module, handle) => Module._attnkit_kv_cache_clear(handle));
  }

  // Grows the capacity to `capacity` tokens, keeping the cached ones (a conversation that outgrows its first guess,
  // without the model's whole context allocated up front); a capacity not above the current one changes nothing.
  reserve(capacity) {
    this._call((Module, handle) => reserveKvCache(Module, handle, capacity));
    this.capacity = Math.max(this.capacity, capacity);
  }

  // Keeps the first `length` tokens: a rejected speculative draft or a regenerated reply is dropped, and the next
  // step gives what a cache that never held it would. A window cache goes back as far as its rows allow.
  truncate(length) {
    this._call((Module, handle) => truncateKvCache(Module, handle, length));
  }

  // Replaces the cached tokens with { past_key, past_value } in the present layout (batch, kvHeads, rows, row) of
  // the cache dtype: ORT's present_key/present_value or read()'s, such as a prompt prefix computed once and shared.
  // options.length is the tokens they stand for (default: every row): the first rows, or a window cache's rows
  // after that many tokens. Quantized rows must be continued with the scales that wrote them.
  load(tensors, options) {
    this._call((Module, handle) => {
      checkNames('kv cache load', tensors, ['past_key', 'past_value'], 'a tensor it takes');
      checkNames('kv cache load', options, ['length']);
      const { past_key, past_value } = tensors ?? {};
      loadKvCache(Module, handle, { past_key, past_value }, options?.length);
    });
  }

  // The held tokens as { present_key, present_value }, arrays the caller owns (or options.into's).
  read(options) {
    return this._call((Module, handle) => {
      checkNames('kv cache read', options, ['into']);
      return readKvCache(Module, handle, options?.into);
    });
  }
}

// QAttention's past/present in the instance's wasm memory, (2, batch, heads, capacity, headSize): each step() passes
// only the new tokens (QAttention's inputs without past) and the op writes their rows after the held ones and
// attends over them in place, where a stateless decode step copies the whole past in and the present out. Outputs
// equal the stateless op's fed the previous present.
export class QAttentionCache extends ResidentCache {
  constructor(instance, handle, config) {
    super(instance, handle, 'qattention cache', '_attnkit_qattention_cache_free');
    this.capacity = config.capacity;
    this.#hidden = config.heads * config.headSize;
  }

  #hidden;

  // inputs: QAttention's inputs without past; attrs: its attributes. Returns { output }.
  step(inputs, attrs, options) {
    return this._step(options,
      (Module, handle, o, threads) => stepQAttentionCache(Module, handle, inputs, attrs, o, threads, this.#hidden));
  }

  get length() {
    return this._call((Module, handle) => Module._attnkit_qattention_cache_length(handle));
  }

  clear() {
    this._call((Module, handle) => Module._attnkit_qattention_cache_clear(handle));
  }

  // Keeps the first `length` tokens.
  truncate(length) {
    this._call((Module, handle) => truncateQAttentionCache(Module, handle, length));
  }

  // Replaces the cached tokens with { past }, (2, batch, heads, rows, headSize) float32: ORT's present or read()'s.
  load(tensors) {
    this._call((Module, handle) => {
      checkNames('qattention cache load', tensors, ['past'], 'a tensor it takes');
      loadQAttentionCache(Module, handle, tensors?.past);
    });
  }

  // The held tokens as { present }, (2, batch, heads, length, headSize), an array the caller owns (or into's).
  read(options) {
    return this._call((Module, handle) => {
      checkNames('qattention cache read', options, ['into']);
      return readQAttentionCache(Module, handle, options?.into);
    });
  }
}

// Loads a build. options: { threads (default: available cores, clamped to the build's pool), build
// ('auto' | 'simd-threaded' | 'simd'; auto takes the single-thread build for one thread), wasmPaths (prefix or
// { file: url } map) }.
export async function createInstance(options) {
  return loadInstance(await resolveSettings(options));
}

// Where the threaded build was picked rather than asked for and does not load (a page whose CSP refuses its workers,
// a file missing), the single-thread build runs, and info().reason says why.
async function loadInstance(settings) {
  let { build, reason } = settings;
  let Module;
  try {
    Module = await loadModule(build, settings.wasmPaths, settings.threads);
  } catch (e) {
    if (!settings.mayFallBack) throw e;
    build = 'simd';
    reason = `the threaded build did not load (${thrownLine(e)}): single-thread build`;
    Module = await loadModule(build, settings.wasmPaths, settings.threads);
  }
  const maxThreads = Module._attnkit_wasm_max_threads();
  const instance = new AttnkitInstance(Module, build, reason, clampThreads(settings.threads, maxThreads), maxThreads);
  if (build !== settings.build) instance.fellBackFrom = settings.build;
  return instance;
}

function clampThreads(wanted, maxThreads) {
  return Math.max(1, Math.min(wanted, maxThreads));
}

// The build, reason and thread count createInstance(options) loads, or an AttnkitError for bad options.
async function resolveSettings(options) {
  if (options != null && typeof options !== 'object') throw new AttnkitError('init: options must be an object');
  checkNames('init', options, ['threads', 'build', 'wasmPaths']);
  const { threads, build = 'auto' } = options ?? {};
  let { wasmPaths } = options ?? {};
  checkThreads(threads, 'init');
  if (typeof URL === 'function' && wasmPaths instanceof URL) wasmPaths = wasmPaths.href;  // a folder's URL object
  if (!(wasmPaths === undefined || typeof wasmPaths === 'string' || (wasmPaths && typeof wasmPaths === 'object'))) {
    throw new AttnkitError('init: wasmPaths must be a prefix (a string) or an object of URLs by file name');
  }
  if (typeof wasmPaths === 'object') checkNames('init: wasmPaths', wasmPaths, DIST_FILES, 'a file of js/dist');
  const detected = detectBuild();
  let chosen = detected.build;
  let reason = detected.reason;
  if (build !== 'auto') {
    if (!BUILDS[build]) throw new AttnkitError(`init: build must be auto, simd-threaded or simd, got "${shown(build)}"`);
    if (build === 'simd-threaded' && detected.build !== 'simd-threaded') {
      throw new AttnkitError(`init: the simd-threaded build cannot run here: ${detected.why ?? detected.reason}`, 1);
    }
    chosen = build;
    reason = `requested by init({ build: '${build}' })`;
  }
  if (!chosen) throw new AttnkitError(`init: ${reason}`, 1);
  const wanted = threads || (BUILDS[chosen].threaded ? await availableCores() : 1);
  // One thread gains nothing from the pool, and V8 copies into shared memory up to 1.7x slower (L2/L3-sized
  // caches; a stateless int8 step at T=512 took 1.18x as long): every input and output crosses that copy.
  if (build === 'auto' && chosen === 'simd-threaded' && wanted === 1) {
    chosen = 'simd';
    reason = threads ? 'one thread requested: single-thread build (copies into unshared memory are faster)'
      : 'one core available: single-thread build (copies into unshared memory are faster)';
  }
  const mayFallBack = build === 'auto' && chosen === 'simd-threaded';
  return { build: chosen, reason, threads: wanted, wasmPaths, mayFallBack };
}

let current = null;
let currentFiles = null;  // the wasmPaths current was loaded from, as JSON

function instance() {
  if (!current) throw new AttnkitError('attnkit: call `await init()` first', 1);
  return current;
}

// Calls of init() run one after the other, in the order they were made: overlapping ones (a settings change while
// a build loads) act as if each had been awaited, so the last one made decides, and a dispose() made while one
// loads disposes what it loads.
let initQueue = Promise.resolve();
let disposals = 0;

// Loads the package's default instance; returns info(). A later call that asks for the same build from the same
// files keeps the module, and with it the caches and pins made so far (two libraries in one page may both call
// init()), taking its thread count; another build replaces it.
export function init(options) {
  const disposalsBefore = disposals;
  const run = initQueue.then(async () => {
    const settings = await resolveSettings(options);  // a refused init() leaves the current instance as it was
    const files = JSON.stringify(settings.wasmPaths ?? null);
    // More threads than the pool holds need a larger pool: a fresh module.
    // A build that fell back for the same options (auto) is kept too: loading it again would fall back again.
    const sameBuild = current?.build === settings.build;
    const sameFallback = settings.mayFallBack && current?.fellBackFrom === settings.build;
    if (current && !current.disposed && (sameBuild || sameFallback) && currentFiles === files &&
        current.pooled(settings.threads)) {
      current.threads = clampThreads(settings.threads, current.maxThreads);
      if (sameBuild) {
        current.reason = settings.reason;
        current.fellBackFrom = null;  // now the build asked for
      }
      return current.info();
    }
    const next = await loadInstance(settings);
    if (current) {
      current.replacedBy = next.build;
      current.dispose();
    }
    current = next;
    currentFiles = files;
    const info = next.info();
    if (disposals !== disposalsBefore) {
      next.dispose();
      current = null;
    }
    return info;
  });
  initQueue = run.catch(() => {});  // a refused init() does not hold up the next
  return run;
}

export function info() {
  return instance().info();
}

export async function groupQueryAttention(inputs, attrs, options) {
  return instance().groupQueryAttention(inputs, attrs, options);
}

export async function qAttention(inputs, attrs, options) {
  return instance().qAttention(inputs, attrs, options);
}

// config: { batch = 1, kvHeads, headSize, capacity, dtype = 'float32' | 'float16' | 'bfloat16' | 'int8' | 'uint8' (int4) }.
export function createKvCache(config) {
  return instance().createKvCache(config);
}

export async function runCase(caseObject, options) {
  return instance().runCase(caseObject, options);
}

// Terminates the worker threads (so Node can exit) and drops the module; init() starts afresh.
export function dispose() {
  disposals++;
  if (current) current.dispose();
  current = null;
}

// config: { batch = 1, heads, headSize, capacity }.
export function createQAttentionCache(config) {
  return instance().createQAttentionCache(config);
}

// Pins a tensor in the default instance's wasm memory: see AttnkitInstance.pin.
export function pin(tensor) {
  return instance().pin(tensor);
}
