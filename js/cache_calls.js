// attnkit JS package: the calls on caches living in wasm memory (attnkit_kv_cache_* and attnkit_qattention_cache_*
// of the C ABI): create, step, load, read, reserve, truncate, each through the marshaller's one packed call form.
// A step's `into` is checked before the step runs, since a cache cannot take a step back.
import { AttnkitError, shown } from './errors.js';
import { DTYPES } from './case.js';
import { callPacked, DTYPE_CODES, enterModule, heapBuffer, named } from './marshal.js';

const FLOAT_OUTPUTS = new Set(['float32', 'float16', 'bfloat16']);
// A cache step's one output, { name, dtype, shape, byteLength }: (batch, sequence) of `rows` and hidden columns.
function stepOutputOf(rows, dtype, hidden) {
  if (!rows || rows.shape.length !== 3 || !FLOAT_OUTPUTS.has(dtype) || !(Number.isInteger(hidden) && hidden > 0)) {
    return null;
  }
  const shape = [rows.shape[0], rows.shape[1], hidden];
  return { name: 'output', dtype, shape, byteLength: shape[0] * shape[1] * hidden * DTYPES[dtype].bytes };
}

export function stepKvCache(Module, cache, inputs, attrs, { path, into, stats } = {}, threads = 0, headSize = 0) {
  const stepOutput = (normalized) => {
    const query = named(normalized, 'query');
    return stepOutputOf(query, query?.dtype, Number(attrs?.num_heads) * headSize);
  };
  return callPacked(Module, 'GroupQueryAttention', inputs, attrs, { path, into, stats, stepOutput }, (args, count) =>
    Module._attnkit_kv_cache_step(cache, args.attrs, args.records, count, threads, args.path, args.resultSlot));
}

// A KV cache's tokens themselves: load replaces them with past_key/past_value (the present layout), read copies
// them out as { present_key, present_value }, truncate keeps the first `length`; reserve grows the capacity.
function cacheLength(length, what, cache = 'kv cache') {
  if (!Number.isInteger(length) || length < 0 || length > 0x7fffffff) {
    throw new AttnkitError(`${cache}: ${what} must be an integer in [0, 2147483647], got ${shown(length)}`);
  }
  return length;
}

export function loadKvCache(Module, cache, inputs, length) {
  const rows = length === undefined ? -1 : cacheLength(length, 'length');
  callPacked(Module, 'kv cache', inputs, {}, {}, (args, count) =>
    Module._attnkit_kv_cache_load(cache, args.records, count, rows, args.resultSlot));
}

export function readKvCache(Module, cache, into) {
  return callPacked(Module, 'kv cache', {}, {}, { into }, (args) =>
    Module._attnkit_kv_cache_read(cache, args.resultSlot));
}

export function reserveKvCache(Module, cache, capacity) {
  const rows = cacheLength(capacity, 'capacity');
  callPacked(Module, 'kv cache', {}, {}, {}, (args) => Module._attnkit_kv_cache_reserve(cache, rows, args.resultSlot));
}

export function truncateKvCache(Module, cache, length) {
  const rows = cacheLength(length, 'truncate length');
  callPacked(Module, 'kv cache', {}, {}, {}, (args) => Module._attnkit_kv_cache_truncate(cache, rows, args.resultSlot));
}

// Creates a cache in wasm memory through `create(sizes, slots)`, a C ABI create that writes the cache and the result
// pointers at slots and slots + 4; returns the cache's handle or throws AttnkitError with the C ABI's message.
function createHandle(Module, what, sizes, create) {
  for (const [name, v] of Object.entries(sizes)) {
    if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) {
      throw new AttnkitError(`${what}: ${name} must be an integer in [0, 2147483647], got ${shown(v)}`);
    }
  }
  const slots = Module._malloc(8) >>> 0;
  if (slots === 0) throw new AttnkitError('out of memory', 1);
  try {
    const rc = enterModule(() => create(sizes, slots));
    const view = new DataView(heapBuffer(Module));
    const cache = view.getUint32(slots, true);
    const result = view.getUint32(slots + 4, true);
    const message = rc !== 0 && result ? Module.UTF8ToString(Module._attnkit_result_error(result) >>> 0) : '';
    if (result) Module._attnkit_result_free(result);
    if (rc !== 0) throw new AttnkitError(message || `${what}: internal error (code ${rc})`, rc === 2 ? 2 : 1);
    return cache;
  } finally {
    Module._free(slots);
  }
}

// Creates a KV cache in wasm memory; returns its handle or throws AttnkitError with the C ABI's message.
export function createKvCache(Module, { batch = 1, kvHeads, headSize, capacity, dtype = 'float32', window = 0 }) {
  const code = DTYPE_CODES[dtype];
  if (code === undefined) throw new AttnkitError(`kv cache: unknown dtype "${shown(dtype)}"`);
  return createHandle(Module, 'kv cache', { batch, kvHeads, headSize, capacity, window }, (n, slots) =>
    Module._attnkit_kv_cache_create_window(n.batch, n.kvHeads, n.headSize, n.capacity, n.window, code, slots,
      slots + 4));
}

// A QAttention past/present cache in wasm memory (attnkit_qattention_cache_*): create, step (QAttention's inputs
// without past; returns { output }), load (past in ORT's present layout), read ({ present }), truncate.
export function createQAttentionCache(Module, { batch = 1, heads, headSize, capacity }) {
  return createHandle(Module, 'qattention cache', { batch, heads, headSize, capacity }, (n, slots) =>
    Module._attnkit_qattention_cache_create(n.batch, n.heads, n.headSize, n.capacity, slots, slots + 4));
}

export function stepQAttentionCache(Module, cache, inputs, attrs, { path, into, stats } = {}, threads = 0, hidden = 0) {
  const stepOutput = (normalized) => stepOutputOf(named(normalized, 'input'), 'float32', hidden);
  return callPacked(Module, 'QAttention', inputs, attrs, { path, into, stats, stepOutput }, (args, count) =>
    Module._attnkit_qattention_cache_step(cache, args.attrs, args.records, count, threads, args.path,
      args.resultSlot));
}

export function loadQAttentionCache(Module, cache, past) {
  callPacked(Module, 'qattention cache', { past }, {}, {}, (args, count) =>
    Module._attnkit_qattention_cache_load(cache, args.records, count, args.resultSlot));
}

export function readQAttentionCache(Module, cache, into) {
  return callPacked(Module, 'qattention cache', {}, {}, { into }, (args) =>
    Module._attnkit_qattention_cache_read(cache, args.resultSlot));
}

export function truncateQAttentionCache(Module, cache, length) {
  const rows = cacheLength(length, 'truncate length', 'qattention cache');
  callPacked(Module, 'qattention cache', {}, {}, {}, (args) =>
    Module._attnkit_qattention_cache_truncate(cache, rows, args.resultSlot));
}
