// attnkit JS package: moves tensors between JS typed arrays and the wasm heap around one C ABI call.
// Everything a call needs (strings, shapes, attnkit_tensor records, input bytes) goes into one malloc'd
// block that is freed with the result before returning, so repeated calls do not grow the heap.
import { AttnkitError, shown, thrownLine } from './errors.js';
import { DTYPES, materializeTensor } from './case.js';

// dtype codes of core/include/attnkit/attnkit.h, in order.
const DTYPE_NAMES = ['float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64'];
// No prototype, as case.js's DTYPES.
export const DTYPE_CODES = Object.assign(Object.create(null),
  Object.fromEntries(DTYPE_NAMES.map((name, code) => [name, code])));
// attnkit_tensor on wasm32: name, dtype, rank, shape, data (4 bytes each); pinned by wasm/wasm_exports.cc.
const TENSOR_RECORD_BYTES = 20;

// Float16Array (browsers since 2025, and onnxruntime-web's float16 tensors there; not Node 20): its bytes are the
// fp16 bits attnkit reads and writes, so it is taken wherever float16 data goes in or comes back through `into`.
const Float16ArrayType = globalThis.Float16Array;

// Typed arrays whose element type names exactly one dtype. Uint16Array holds fp16 or bf16 bits, so it
// needs the dtype spelled out.
const INFERRED_DTYPES = new Map([
  [Float32Array, 'float32'],
  [Int8Array, 'int8'],
  [Uint8Array, 'uint8'],
  [Int32Array, 'int32'],
  [BigInt64Array, 'int64'],
  ...(Float16ArrayType ? [[Float16ArrayType, 'float16']] : []),
]);

// Whether `data` may carry `dtype`'s elements, and the array types that may, for the messages.
function holdsDtype(data, dtype) {
  return data instanceof DTYPES[dtype].array
    || (dtype === 'float16' && Float16ArrayType !== undefined && data instanceof Float16ArrayType);
}
function arrayTypesOf(dtype) {
  return DTYPES[dtype].array.name + (dtype === 'float16' && Float16ArrayType ? ' or Float16Array' : '');
}

// An exception out of a call into the module itself (a trap, an abort): the module's state is unknown after it, so
// the instance refuses later calls (AttnkitInstance._guard). Anything thrown before or after that call is not one.
export class WasmTrap extends Error {}
export function enterModule(call) {
  try {
    return call();
  } catch (e) {
    throw new WasmTrap(thrownLine(e), { cause: e });
  }
}

export function dtypeName(code) {
  return DTYPE_NAMES[code];
}

// A tensor copied once into an instance's wasm memory (AttnkitInstance.pin). Passed as an input, its pointer goes
// into the call as it is: constant inputs (rotary tables, QAttention's weights) are not copied in on every call.
export class PinnedTensor {
  #instance;
  #ptr;
  constructor(instance, ptr, dtype, shape, byteLength) {
    this.#instance = instance;
    this.#ptr = ptr;
    this.dtype = dtype;
    this.shape = shape;
    this.byteLength = byteLength;
  }

  // normalizeInput's form for a call on `Module`, its data a view of wasm memory as it is now.
  _normalized(name, Module) {
    if (!this.#ptr) throw new AttnkitError(`${name}: the pinned tensor was disposed`);
    if (this.#instance.disposed) {
      const gone = this.#instance.replacedBy ? `was replaced when init() loaded the ${this.#instance.replacedBy} build`
        : 'was disposed';
      throw new AttnkitError(`${name}: the instance the tensor is pinned in ${gone}; pin it again`);
    }
    if (this.#instance.Module !== Module) {
      throw new AttnkitError(`${name}: the tensor is pinned in another attnkit instance`);
    }
    const { array, bytes } = DTYPES[this.dtype];
    const data = new array(heapBuffer(Module), this.#ptr, this.byteLength / bytes);
    return callTensor(name, this.dtype, this.shape, data, this.#ptr, this.byteLength);
  }

  // Frees its wasm memory (also freed with its instance).
  dispose() {
    if (!this.#ptr) return;
    if (!this.#instance.disposed) this.#instance.Module._free(this.#ptr);
    this.#ptr = 0;
  }
}

// malloc in wasm memory, or 0. wasm32's malloc takes a 32-bit size: 4 GiB or more would wrap around to a small block
// that the copy after it overruns (over whatever the heap holds there), so such a request fails here instead.
function wasmMalloc(Module, bytes) {
  return bytes >= 2 ** 32 ? 0 : Module._malloc(bytes) >>> 0;
}

// Copies a tensor into `instance`'s wasm memory once; see PinnedTensor.
export function pinTensor(instance, tensor) {
  const { Module } = instance;
  const t = normalizeInput('pin', tensor, Module);
  const bytes = t.pinned ? t.pinnedBytes : t.data.byteLength;
  const ptr = wasmMalloc(Module, Math.max(bytes, 1));
  if (ptr === 0) throw new AttnkitError(`pin: out of memory for ${bytes} bytes in wasm memory`, 1);
  // A tensor pinned already is copied from where it lies: the malloc may have grown wasm memory, and growth
  // detaches views of the old buffer, its data included.
  const heap = heapBuffer(Module);
  new Uint8Array(heap, ptr, bytes).set(t.pinned ? new Uint8Array(heap, t.pinned, bytes)
    : new Uint8Array(t.data.buffer, t.data.byteOffset, bytes));
  return new PinnedTensor(instance, ptr, t.dtype, [...t.shape], bytes);
}

// One input of a call as the marshaller handles it: data a typed array of the dtype's element type; `pinned` the
// pointer of a PinnedTensor of the call's module (else 0); `cache` the layout of a past copied in with room for the
// new rows (sharedCachePlan; else null). One object shape for every input, so the per-call loops over the inputs
// stay monomorphic in V8.
function callTensor(name, dtype, shape, data, pinned = 0, pinnedBytes = 0, cache = null) {
  return { name, dtype, shape, data, pinned, pinnedBytes, cache };
}

// Returns the callTensor of `tensor`, given as a { dtype?, shape, data }, an onnxruntime Tensor or a
// PinnedTensor of `Module`. An onnxruntime Tensor ({ type, dims, data, location }: ORT's dtype names are
// attnkit's) is taken as it is, so tensors of a model run in onnxruntime-web or -node pass straight in; one on a GPU
// must be brought to the CPU by its owner first.
export function normalizeInput(name, tensor, Module) {
  if (tensor instanceof PinnedTensor) return tensor._normalized(name, Module);
  if (!tensor || typeof tensor !== 'object') throw new AttnkitError(`${name}: not a tensor object`);
  if (ArrayBuffer.isView(tensor)) {
    throw new AttnkitError(`${name}: a tensor is { data, shape, dtype? }, not a bare ${tensor.constructor.name}`);
  }
  const ortTensor = tensor.shape === undefined && tensor.dims !== undefined;
  if (ortTensor && tensor.location !== undefined && tensor.location !== 'cpu' && tensor.location !== 'cpu-pinned') {
    throw new AttnkitError(`${name}: an onnxruntime tensor on "${tensor.location}": bring it to the CPU first `
      + '(await tensor.getData())');
  }
  const shape = ortTensor ? tensor.dims : tensor.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new AttnkitError(`${name}: shape must be an array of non-negative integers`);
  }
  let { dtype = ortTensor ? tensor.type : undefined, data } = tensor;
  if (dtype != null && DTYPE_CODES[dtype] === undefined) {
    throw new AttnkitError(`${name}: unknown dtype "${shown(dtype)}" (${DTYPE_NAMES.join(', ')})`);
  }
  if (Array.isArray(data)) {
    if (!dtype) throw new AttnkitError(`${name}: a plain array needs a dtype`);
    try {
      ({ data } = materializeTensor({ dtype, shape, data }, name));
    } catch (e) {
      throw new AttnkitError(e.message);
    }
  }
  if (!ArrayBuffer.isView(data) || data instanceof DataView) {
    throw new AttnkitError(`${name}: data must be a typed array`);
  }
  const inferred = INFERRED_DTYPES.get(data.constructor);
  if (!dtype) {
    if (!inferred) {
      const hint = data instanceof Uint16Array ? ' (Uint16Array holds float16 or bfloat16: give dtype)' : '';
      throw new AttnkitError(`${name}: cannot infer a dtype from ${data.constructor.name}${hint}`);
    }
    dtype = inferred;
  }
  if (!holdsDtype(data, dtype)) {
    throw new AttnkitError(`${name}: dtype ${dtype} needs a ${arrayTypesOf(dtype)}, got ${data.constructor.name}`);
  }
  // A transferred (detached) buffer reads as empty, and no view of it can be made.
  if (data.byteLength === 0 && isDetached(data.buffer)) {
    throw new AttnkitError(`${name}: the data's buffer was transferred (detached)`);
  }
  const count = shape.reduce((n, d) => n * d, 1);
  if (data.length !== count) {
    throw new AttnkitError(`${name}: data holds ${data.length} elements, shape [${shape.join(', ')}] needs ${count}`);
  }
  return callTensor(name, dtype, shape, data);
}

function isDetached(buffer) {
  try {
    new Uint8Array(buffer, 0, 0);
    return false;
  } catch {
    return true;
  }
}

const align = (n, a) => Math.ceil(n / a) * a;
const encoder = new TextEncoder();

// A decode loop passes the same op name, attributes, output list and input names on every call: their
// NUL-terminated UTF-8 bytes are kept, so each call does not encode them (and collect the garbage) again:
// TextEncoder alone was 15% of a small KvCache step's profile (N=2, Nk=1, H=8), besides the garbage.
const encodedStrings = new Map();
function cString(s) {
  let bytes = encodedStrings.get(s);
  if (!bytes) {
    if (encodedStrings.size >= 256) encodedStrings.clear();
    bytes = encoder.encode(`${s}\0`);
    encodedStrings.set(s, bytes);
  }
  return bytes;
}

// int64 shape entries as two 32-bit halves (dims are safe integers): no BigInt per dimension.
function setInt64(view, at, value) {
  view.setUint32(at, value % 0x100000000, true);
  view.setInt32(at + 4, Math.floor(value / 0x100000000), true);
}
function getInt64(view, at) {
  return view.getInt32(at + 4, true) * 0x100000000 + view.getUint32(at, true);
}

// The current heap. Growth replaces the buffer: the threaded build exposes its shared memory (a worker
// may have grown it), the single-thread build refreshes HEAPU8 whenever it grows.
export function heapBuffer(Module) {
  return Module.wasmMemory ? Module.wasmMemory.buffer : Module.HEAPU8.buffer;
}

// A byte view and a DataView of the current heap, made again only when growth has replaced its buffer.
const heapViewsOf = new WeakMap();
function heapViews(Module) {
  const buffer = heapBuffer(Module);
  let views = heapViewsOf.get(Module);
  if (views?.buffer !== buffer) {
    views = { buffer, bytes: new Uint8Array(buffer), view: new DataView(buffer) };
    heapViewsOf.set(Module, views);
  }
  return views;
}

// Lays out every argument of attnkit_run in one block; returns the block plus offsets into it. Plain loops and the
// kept views: this runs on every call, and with them a small KvCache step (N=2, Nk=1, H=8) ran 10-13% faster.
function packArguments(Module, op, attrsJson, inputs, outputsCsv, path) {
  const n = inputs.length;
  const strings = [cString(op), cString(attrsJson), cString(outputsCsv), cString(path ?? '')];
  for (let i = 0; i < n; i++) strings.push(cString(inputs[i].name));
  let size = 0;
  const stringAt = strings.map((bytes) => (size += bytes.length) - bytes.length);
  const recordsAt = align(size, 8);
  size = recordsAt + TENSOR_RECORD_BYTES * Math.max(n, 1);
  const shapeAt = [];
  const dataAt = [];
  for (let i = 0; i < n; i++) {
    shapeAt.push(size = align(size, 8));
    size += 8 * Math.max(inputs[i].shape.length, 1);
  }
  // A pinned tensor goes by its pointer, unless it is a past laid out again with room for the new rows.
  for (let i = 0; i < n; i++) {
    const t = inputs[i];
    if (t.pinned && !t.cache) {
      dataAt.push(-1);
    } else {
      dataAt.push(size = align(size, 16));
      size += Math.max(t.cache ? t.cache.bytes : t.data.byteLength, 1);
    }
  }
  const resultSlotAt = align(size, 4);
  size = resultSlotAt + 4;
  const base = wasmMalloc(Module, size);
  if (base === 0) throw new AttnkitError(`out of memory: cannot allocate ${size} bytes of inputs in wasm memory`, 1);
  const { buffer, bytes, view } = heapViews(Module);
  for (let i = 0; i < strings.length; i++) bytes.set(strings[i], base + stringAt[i]);
  for (let i = 0; i < n; i++) {
    const t = inputs[i];
    const record = base + recordsAt + TENSOR_RECORD_BYTES * i;
    view.setUint32(record, base + stringAt[4 + i], true);
    view.setInt32(record + 4, DTYPE_CODES[t.dtype], true);
    view.setInt32(record + 8, t.shape.length, true);
    view.setUint32(record + 12, base + shapeAt[i], true);
    view.setUint32(record + 16, dataAt[i] >= 0 ? base + dataAt[i] : t.pinned, true);
    for (let k = 0; k < t.shape.length; k++) setInt64(view, base + shapeAt[i] + 8 * k, t.shape[k]);
    if (dataAt[i] < 0) continue;
    // A pinned source is viewed afresh: the malloc above may have grown (and so replaced) the heap's buffer.
    const source = t.pinned ? new Uint8Array(buffer, t.pinned, t.pinnedBytes)
      : new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    if (!t.cache) {
      bytes.set(source, base + dataAt[i]);
      continue;
    }
    // A past cache laid out with room for the new rows (see sharedCachePlan): each head's rows, then its gap.
    const { heads, rows, capacity, rowBytes } = t.cache;
    for (let h = 0; h < heads; h++) {
      const head = source.subarray(h * rows * rowBytes, (h + 1) * rows * rowBytes);
      bytes.set(head, base + dataAt[i] + h * capacity * rowBytes);
    }
  }
  return {
    base,
    op: base + stringAt[0],
    attrs: base + stringAt[1],
    outputs: base + stringAt[2],
    path: path ? base + stringAt[3] : 0,
    records: base + recordsAt,
    resultSlot: base + resultSlotAt,
    data: dataAt.map((at) => (at < 0 ? 0 : base + at)),
  };
}

// Copies every result tensor out of wasm memory into fresh typed arrays the caller owns.
// `into` (a call option): the caller's typed arrays to fill, by output name, instead of fresh ones. A fresh
// array of several MB pays its page faults on every call (4 MB took 12 ms on the project's VM, about a third
// of a 512-token prefill); filling one the caller keeps across calls is a plain copy (0.1 ms).
function checkInto(what, into) {
  if (into === undefined) return;
  if (into === null || typeof into !== 'object') {
    throw new AttnkitError(`${what}: into must be an object of typed arrays by output name`);
  }
  for (const [name, a] of Object.entries(into)) {
    if (a === undefined) continue;  // absent
    if (!ArrayBuffer.isView(a) || a instanceof DataView) {
      throw new AttnkitError(`${what}: into.${name} must be a typed array, got ${a?.constructor?.name ?? typeof a}`);
    }
  }
}

// The result's tensors as { name, dtype, shape, dataPtr, byteLength }.
function resultEntries(Module, result) {
  const found = [];
  const count = Module._attnkit_result_count(result);
  for (let i = 0; i < count; i++) {
    const name = Module.UTF8ToString(Module._attnkit_result_name(result, i) >>> 0);
    const dtype = dtypeName(Module._attnkit_result_dtype(result, i));
    const rank = Module._attnkit_result_rank(result, i);
    const shapePtr = Module._attnkit_result_shape(result, i) >>> 0;
    const { view } = heapViews(Module);
    const shape = [];
    for (let k = 0; k < rank; k++) shape.push(getInt64(view, shapePtr + 8 * k));
    found.push({ name, dtype, shape, dataPtr: Module._attnkit_result_data(result, i) >>> 0,
      byteLength: Module._attnkit_result_bytes(result, i) >>> 0 });
  }
  return found;
}

// Checks `into` against a call's outputs (resultEntries' form): every target before any is written, so a refused
// call leaves the caller's arrays as they were.
function checkIntoTargets(what, into, found) {
  for (const name of Object.keys(into)) {
    if (into[name] !== undefined && !found.some((r) => r.name === name)) {
      const produced = found.map((r) => r.name).join(', ');
      throw new AttnkitError(`${what}: into.${name} is not an output of this call (it produces ${produced})`);
    }
  }
  for (const { name, dtype, shape, byteLength } of found) {
    const target = into[name];
    const length = byteLength / DTYPES[dtype].bytes;
    if (target && !(holdsDtype(target, dtype) && target.length === length)) {
      throw new AttnkitError(`${what}: into.${name} must be a ${arrayTypesOf(dtype)} of ${length} elements `
        + `(${dtype} [${shape.join(', ')}]), got a ${target.constructor.name} of ${target.length}`);
    }
  }
}

// Copies tensors (resultEntries' form) out of wasm memory into fresh typed arrays the caller owns, or into `into`.
function readResults(Module, found, what, into = {}) {
  checkIntoTargets(what, into, found);
  const outputs = {};
  for (const { name, dtype, shape, dataPtr, byteLength } of found) {
    const source = new Uint8Array(heapBuffer(Module), dataPtr, byteLength);
    let data = into[name];
    if (data) {
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength).set(source);
    } else {
      // slice() copies into a new, unshared, aligned ArrayBuffer: no view into wasm memory escapes.
      data = new DTYPES[dtype].array(source.slice().buffer);
    }
    outputs[name] = { data, shape, dtype };
  }
  return outputs;
}

// Packs the inputs and attributes, calls `invoke(args, count, shared)` (one C entry point taking the packed block;
// `shared` when sharedCachePlan chose the in-place form, `op` says which op may), and returns its results as fresh
// typed arrays (or the caller's `into`); frees everything it allocated in wasm memory.
export function callPacked(Module, what, inputs, attrs, { outputs, path, into, op, stats, stepOutput } = {}, invoke) {
  if (!inputs || typeof inputs !== 'object') throw new AttnkitError(`${what}: inputs must be an object of tensors`);
  checkInto(what, into);
  // An empty list asks for the default outputs, as the C ABI reads an empty one (and the native CLI a case's []).
  if (outputs?.length === 0) outputs = undefined;
  const normalized = [];
  for (const name of Object.keys(inputs)) {
    if (inputs[name] !== undefined) normalized.push(normalizeInput(name, inputs[name], Module));  // undefined: absent
  }
  // A cache step cannot be taken back: its `into` is refused before it runs, against the output its inputs imply
  // (stepOutput; null where they do not say, and the op then refuses them before it changes the cache).
  const predicted = into && stepOutput ? stepOutput(normalized) : null;
  if (predicted) checkIntoTargets(what, into, [predicted]);
  const shared = op ? sharedCachePlan(op, normalized, attrs, outputs) : null;
  if (shared) {
    try {
      return callPackedAs(Module, what, normalized, attrs, { outputs, path, into, stats }, invoke, shared);
    } catch (e) {
      // A refused call is refused again by the ordinary form, whose message names the shapes as the caller gave them.
      if (!(e instanceof AttnkitError) || e.code !== 2) throw e;
    }
  }
  return callPackedAs(Module, what, normalized, attrs, { outputs, path, into, stats }, invoke, null);
}

// BigInt attribute values (int64 in ONNX) go as numbers, and NaN and infinities, which JSON would turn into null, as
// the strings the C++ attribute reader takes ("NaN", "Infinity", "-Infinity"; each op's validation decides whether it
// accepts them). The replacer that does both, called for every key, runs only where plain JSON would be wrong.
const attrReplacer = (key, value) =>
  typeof value === 'bigint' ? Number(value) : typeof value === 'number' && !Number.isFinite(value) ? String(value) : value;
function attrsToJson(attrs) {
  let plain = true;
  for (const key in attrs) {
    const value = attrs[key];
    // JSON would drop these without a word, and the attribute would take its default.
    if (typeof value === 'function' || typeof value === 'symbol') {
      throw new AttnkitError(`${key}: attribute must be a number, string or array, got a ${typeof value}`);
    }
    if (typeof value === 'bigint' || (typeof value === 'number' && !Number.isFinite(value))) plain = false;
  }
  const json = (replacer) => JSON.stringify(attrs ?? {}, replacer);
  try {
    if (plain) {
      try {
        return json();
      } catch {
        // a BigInt inside an array: the replacer takes it
      }
    }
    return json(attrReplacer);
  } catch (e) {
    throw new AttnkitError(`attrs: cannot be written as JSON (${thrownLine(e)})`);
  }
}

function callPackedAs(Module, what, normalized, attrs, { outputs, path, into, stats }, invoke, shared) {
  const packed = shared ? normalized.map((t) => shared.caches[t.name] ?? t) : normalized;
  const attrsJson = attrsToJson(attrs);
  const outputsCsv = outputs ? outputs.join(',') : '';
  const args = packArguments(Module, what, attrsJson, packed, outputsCsv, path);
  let result = 0;
  try {
    const rc = enterModule(() => invoke(args, packed.length, shared));
    result = heapViews(Module).view.getUint32(args.resultSlot, true);
    if (rc !== 0) {
      const message = result ? Module.UTF8ToString(Module._attnkit_result_error(result) >>> 0) : '';
      throw new AttnkitError(message || `${what}: internal error (code ${rc})`, rc === 2 ? 2 : 1);
    }
    if (stats) stats.peakScratchBytes = Module._attnkit_result_peak_scratch_bytes(result) >>> 0;
    let found = resultEntries(Module, result);
    if (shared) {
      // The caches now hold present_key/present_value: they are read where they lie, in the argument block.
      const cacheEntry = (name) => {
        const i = packed.findIndex((t) => t.name === shared.pastOf[name]);
        const t = packed[i];
        return { name, dtype: t.dtype, shape: t.shape, dataPtr: args.data[i], byteLength: t.cache.bytes };
      };
      found = (outputs ?? shared.outputs)
        .map((name) => found.find((r) => r.name === name) ?? cacheEntry(name));
    }
    return readResults(Module, found, what, into);
  } finally {
    if (result) Module._attnkit_result_free(result);
    Module._free(args.base);
  }
}

const GQA_OPS = new Set(['GroupQueryAttention', 'com.microsoft.GroupQueryAttention']);
const SHARED_OUTPUTS = new Set(['output', 'present_key', 'present_value']);

// The plans look inputs up by name with a loop: an object of them built per call (Object.fromEntries) and copies by
// spread made V8 create and transition new object shapes on every call, 2 us of a 13 us small decode step.
export function named(tensors, name) {
  for (const t of tensors) if (t.name === name) return t;
  return undefined;
}
const withCache = (t, shape, cache) => callTensor(t.name, t.dtype, shape, t.data, t.pinned, t.pinnedBytes, cache);

// A stateless GroupQueryAttention call that continues every batch entry's P past rows by its S new tokens
// (seqlens_k all P + S - 1, total_sequence_length P + S; a decode step) makes the same present as ORT's
// shared-buffer form over caches of P + S rows. Its past is then copied into the argument block with a gap of S
// rows per head and the op writes the new rows there (attnkit_run_gqa_in_place): the cache is copied once on
// its way in, instead of once more inside the op from the past into a separate present, and read out from where
// it lies. Any other call (or malformed inputs, whose errors the ordinary path reports) returns null.
function sharedCachePlan(op, normalized, attrs, outputs) {
  if (QATTENTION_OPS.has(op)) return qattentionCachePlan(normalized, attrs, outputs);
  if (!GQA_OPS.has(op) || (outputs && !outputs.every((name) => SHARED_OUTPUTS.has(name)))) return null;
  const query = named(normalized, 'query');
  const pastKey = named(normalized, 'past_key');
  const pastValue = named(normalized, 'past_value');
  const seqlens = named(normalized, 'seqlens_k');
  const total = named(normalized, 'total_sequence_length');
  if (!query || !pastKey || !pastValue || !seqlens || !total || attrs?.sliding_window_cache) return null;
  if (query.shape.length !== 3 || pastKey.shape.length !== 4 || pastKey.dtype !== pastValue.dtype) return null;
  if (pastKey.shape.some((d, i) => d !== pastValue.shape[i])) return null;
  const [B, Nk, P, columns] = pastKey.shape;
  const S = query.shape[1];
  if (query.shape[0] !== B || B < 1 || Nk < 1 || P < 1 || S < 1 || columns < 1) return null;
  // key with 0 tokens is ORT's shared KV, where the past already holds the new rows: not a continuation.
  for (const x of [named(normalized, 'key'), named(normalized, 'value')]) {
    if (x && (x.shape.length !== 3 || x.shape[1] !== S)) return null;
  }
  if (seqlens.dtype !== 'int32' || seqlens.data.length !== B) return null;
  if (!seqlens.data.every((x) => x === P + S - 1)) return null;
  if (total.dtype !== 'int32' || total.data.length !== 1 || total.data[0] !== P + S) return null;
  const heads = B * Nk;
  const rowBytes = pastKey.data.byteLength / (heads * P);
  const cache = { heads, rows: P, capacity: P + S, rowBytes, bytes: heads * (P + S) * rowBytes };
  const shape = [B, Nk, P + S, columns];
  return {
    caches: { past_key: withCache(pastKey, shape, cache), past_value: withCache(pastValue, shape, cache) },
    pastOf: { present_key: 'past_key', present_value: 'past_value' },
    outputs: ['output', 'present_key', 'present_value'],
    entry: 'gqa',
  };
}

const QATTENTION_OPS = new Set(['QAttention', 'com.microsoft.QAttention']);

// QAttention with past (2, B, N, P, H): its present (2, B, N, P + S, H) is the past followed by each head's S new
// rows, so the past is copied in with a gap of S rows per head and the op writes the new rows there
// (attnkit_run_qattention_in_place), as for GroupQueryAttention above. Calls without past or present (whose
// errors the ordinary path reports) return null.
function qattentionCachePlan(normalized, attrs, outputs) {
  const input = named(normalized, 'input');
  const past = named(normalized, 'past');
  if (!input || !past || input.shape.length !== 3 || past.shape.length !== 5 || past.dtype !== 'float32') return null;
  if (outputs && !(outputs.includes('present') && outputs.every((name) => name === 'output' || name === 'present'))) {
    return null;
  }
  const [two, B, N, P, H] = past.shape;
  const S = input.shape[1];
  if (two !== 2 || input.shape[0] !== B || B < 1 || N < 1 || P < 1 || H < 1 || S < 1) return null;
  if (attrs?.past_present_share_buffer) return null;
  const heads = 2 * B * N;  // keys' heads, then values'
  const rowBytes = H * 4;
  const cache = { heads, rows: P, capacity: P + S, rowBytes, bytes: heads * (P + S) * rowBytes };
  return {
    caches: { past: withCache(past, [2, B, N, P + S, H], cache) },
    pastOf: { present: 'past' },
    outputs: ['output', 'present'],
    entry: 'qattention',
  };
}

// Runs one operator through attnkit_run. inputs: { name: { data, shape, dtype? } }; attrs: ORT attribute
// names; options: { outputs?: string[], path?: 'auto'|'naive'|'flash', into?: { name: TypedArray } }; threads: 0 for
// the module's default. (Arguments, not spread into options: a spread per call was a tenth of a small step's time.)
export function runOperator(Module, op, inputs, attrs, { outputs, path, into, stats } = {}, threads = 0) {
  return callPacked(Module, op, inputs, attrs, { outputs, path, into, op, stats }, (a, count, shared) => {
    if (!shared) return Module._attnkit_run(a.op, a.attrs, a.records, count, a.outputs, threads, a.path, a.resultSlot);
    const entry = shared.entry === 'qattention' ? Module._attnkit_run_qattention_in_place
      : Module._attnkit_run_gqa_in_place;
    return entry(a.attrs, a.records, count, a.outputs, threads, a.path, a.resultSlot);
  });
}

// One step of a KV cache living in wasm memory (attnkit_kv_cache_step); returns { output }.
