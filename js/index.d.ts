// attnkit JS package: TypeScript declarations for js/index.js.
// Tensors follow the WebGPU kernel card's calling convention: { data: TypedArray, shape, dtype? }.

export type DType = 'float32' | 'float16' | 'bfloat16' | 'int8' | 'uint8' | 'int32' | 'int64';
/** Float16Array where the TypeScript library declares it (lib es2025 / esnext), else nothing, so that older libraries
 * still compile. Float16 data may come as one (browsers since 2025, and onnxruntime-web's float16 tensors there);
 * outputs come as Uint16Array (`new Float16Array(t.data.buffer)` views the same bits) unless `into` gives one. */
export type Float16ArrayIfDeclared = typeof globalThis extends { Float16Array: { prototype: infer A } } ? A : never;
export type TensorData =
  Float32Array | Uint16Array | Float16ArrayIfDeclared | Int8Array | Uint8Array | Int32Array | BigInt64Array;

export interface TensorInput {
  data: TensorData | number[];
  shape: number[];
  /** Required for Uint16Array (float16 | bfloat16) and plain arrays; otherwise inferred from the array type
   * (Float16Array: float16). */
  dtype?: DType | undefined;
}

export interface Tensor {
  /** A fresh typed array the caller owns (never a view into wasm memory). */
  data: TensorData;
  shape: number[];
  dtype: DType;
}

export type Inputs = Record<string, TensorInput>;
/** An onnxruntime-web or onnxruntime-node Tensor, taken as it is: its `type` names are attnkit's dtypes, and one on a
 * GPU (location other than 'cpu' or 'cpu-pinned') is refused until its owner brings it to the CPU
 * (`await tensor.getData()`). */
export interface OrtTensorLike {
  readonly type: string;
  readonly dims: readonly number[];
  readonly data: unknown;
  readonly location?: string | undefined;
}
/** A tensor copied once into an instance's wasm memory (`pin()`): as an input of that instance's calls it is not
 * copied again, as a model's constants (rotary tables, QAttention's weights) need not be. */
export class PinnedTensor {
  readonly dtype: DType;
  readonly shape: number[];
  readonly byteLength: number;
  /** Frees its wasm memory (also freed with its instance); a call given it afterwards is refused. */
  dispose(): void;
}
/** What the op calls take: attnkit tensors, onnxruntime tensors, pinned tensors, or any mix; an input set to
 * undefined is absent. */
export type CallInputs = Record<string, TensorInput | OrtTensorLike | PinnedTensor | undefined>;
export type Outputs = Record<string, Tensor>;
/** ORT attribute names and values, e.g. { num_heads: 16, kv_num_heads: 8, k_quant_type: 'PER_CHANNEL' }. Float
 * attributes may be Infinity, -Infinity or NaN (a QAttention mask_filter_value of -Infinity); each op's rules decide. */
export type Attributes = Record<string, number | string | number[]>;

export interface CallOptions {
  /** Output names to produce (default: the op's required outputs). */
  outputs?: string[] | undefined;
  /** Threads for this call (0/absent: the init() setting); clamped to the instance's workers (info().maxThreads). */
  threads?: number | undefined;
  path?: 'auto' | 'naive' | 'flash' | undefined;
  /** Typed arrays the caller owns and keeps across calls, by output name: they are filled and returned as
   * that output's data instead of fresh arrays (each must be the output dtype's array type, or a Float16Array for
   * float16, with exactly its element count). A fresh multi-MB array costs its page faults on every call. */
  into?: Record<string, TensorData> | undefined;
  /** An object the call fills in: peakScratchBytes, the bytes of wasm memory the op used beside its inputs and
   * outputs (the CLI's `bench` reports it as peak_scratch_bytes). */
  stats?: { peakScratchBytes?: number | undefined } | undefined;
}

/** A cache step's options: a call's, for its one output. */
export type StepOptions = Pick<CallOptions, 'threads' | 'path' | 'stats'> &
  { into?: { output: TensorData } | undefined };

export type Build = 'simd-threaded' | 'simd';
/** The files of js/dist, as a wasmPaths map names them. */
export type DistFile = 'attnkit-simd-threaded.js' | 'attnkit-simd-threaded.wasm' | 'attnkit-simd-threaded.worker.js'
  | 'attnkit-simd.js' | 'attnkit-simd.wasm';
/** URL where the TypeScript library declares it (lib dom, or @types/node), else nothing. */
export type URLIfDeclared = typeof globalThis extends { URL: { prototype: infer U } } ? U : never;

export interface InitOptions {
  /** Default threads per call; default: the CPUs the process may use (in Node its affinity mask and cgroup quota, in
   * a page navigator.hardwareConcurrency), clamped to the threaded build's most, 8 (a worker each); 1 on the
   * single-thread build. */
  threads?: number | undefined;
  /** 'auto' (default) picks simd-threaded where SharedArrayBuffer and cross-origin isolation allow and more than
   * one thread is wanted; for one thread (threads: 1, or a one-core host) the single-thread build, whose copies
   * in and out are faster and which then runs every call on one thread. */
  build?: 'auto' | Build | undefined;
  /** Where js/dist's files are served: a prefix ending in '/' (a string or URL), or a map from file name to URL/path
   * (another name is refused). */
  wasmPaths?: string | URLIfDeclared | { [file in DistFile]?: string | URLIfDeclared | undefined } | undefined;
}

export interface Info {
  build: Build;
  /** Why this build was chosen (or why the threaded one could not be). */
  reason: string;
  threads: number;
  /** The most threads a call may use: the workers init() started (its thread count, at most 8), 1 single-thread. */
  maxThreads: number;
  /** Kernel ISA in use: 'wasm128' or 'scalar'. */
  isa: string;
  /** How scores against int8/int4 caches are computed: 'exact-int16-limbs' (the same bits as native
   * scalar, AVX512-VNNI, AVX-VNNI and NEON with sdot) or 'fp32-conversion'. */
  quantized_qk: string;
  /** Which instruction path runs QAttention's integer projection: 'wasm128-dot16' (i32x4.dot_i16x8) or
   * 'scalar'. */
  qattention_gemm: string;
  available_isas: string[];
  cpu_features: string[];
  version: string;
  /** Current size of the wasm heap in bytes. */
  memoryBytes: number;
}

/** A case object of the corpus format (DESIGN.md "The case format"); any other field is refused. */
export interface CaseObject {
  name?: string | undefined;
  op: 'GroupQueryAttention' | 'QAttention' | 'com.microsoft.GroupQueryAttention' | 'com.microsoft.QAttention';
  attrs?: Attributes | undefined;
  inputs: Record<string, object>;
  outputs?: string[] | undefined;
  /** Outputs every target must match (npm start checks them), by output name. */
  expected?: Record<string, object> | undefined;
  /** For ORT and `expected`: |a - e| <= atol + rtol |e|. */
  tolerance?: { atol?: number | undefined; rtol?: number | undefined } | undefined;
  /** A fragment of the message a case that must be refused gives. */
  expect_error?: string | undefined;
  /** "skip: why" where ORT cannot run the case, "skip-cpu: why" where only its WebGPU EP can. */
  ort?: string | undefined;
  note?: string | undefined;
}

/** What every call throws, with a one-line message; the instance goes on, unless the wasm module trapped (code 1,
 * "the wasm module trapped"): that instance is disposed, and init() or createInstance() starts a fresh one. */
export class AttnkitError extends Error {
  /** 2: invalid input or attribute (the message names it); 1: internal (out of memory, not initialised). */
  code: 1 | 2;
}

export interface PreparedCase {
  name: string;
  op: string;
  inputs: Record<string, Tensor>;
  attrs: Attributes;
  outputs: string[];
}

export function prepareCase(caseObject: CaseObject): PreparedCase;

export class AttnkitInstance {
  readonly build: Build;
  /** Why this build was chosen (as info().reason), the call's default threads and the pool's maximum. */
  readonly reason: string;
  readonly threads: number;
  readonly maxThreads: number;
  info(): Info;
  memoryBytes(): number;
  setIsa(isa: string): boolean;
  run(op: string, inputs: CallInputs, attrs: Attributes, options?: CallOptions): Outputs;
  groupQueryAttention(inputs: CallInputs, attrs: Attributes, options?: CallOptions): Outputs;
  qAttention(inputs: CallInputs, attrs: Attributes, options?: CallOptions): Outputs;
  runCase(caseObject: CaseObject, options?: CallOptions): { outputs: Outputs };
  createKvCache(config: KvCacheConfig): KvCache;
  createQAttentionCache(config: QAttentionCacheConfig): QAttentionCache;
  /** A tensor copied once into this instance's wasm memory (a PinnedTensor of it: copied again). */
  pin(tensor: TensorInput | OrtTensorLike | PinnedTensor): PinnedTensor;
  dispose(): void;
}

/** An independent module (e.g. to hold both builds at once); dispose() it when done. */
export function createInstance(options?: InitOptions): Promise<AttnkitInstance>;

/** Loads the default instance that the functions below use. Called again for the same build from the same wasmPaths
 * and no more threads than it has workers, it keeps the module (and the caches and pins made so far) and takes the
 * new thread count; else it replaces it. */
export function init(options?: InitOptions): Promise<Info>;
export function info(): Info;
export function groupQueryAttention(inputs: CallInputs, attrs: Attributes, options?: CallOptions): Promise<Outputs>;
export function qAttention(inputs: CallInputs, attrs: Attributes, options?: CallOptions): Promise<Outputs>;
export function runCase(caseObject: CaseObject, options?: CallOptions): Promise<{ outputs: Outputs }>;
/** Frees the default instance's memory (its caches and pins too) and ends its worker threads now; init() starts
 * afresh. A script ends without it. */
export function dispose(): void;

export interface KvCacheConfig {
  /** Default 1. */
  batch?: number | undefined;
  kvHeads: number;
  headSize: number;
  /** Most tokens the cache holds. */
  capacity: number;
  /** Cache element type (default 'float32'); 'int8' and 'uint8' (packed int4) need the matching k/v_quant_type
   * attributes. Under wasm32 the cache takes its whole size of the 4 GiB memory at creation. */
  dtype?: 'float32' | 'float16' | 'bfloat16' | 'int8' | 'uint8' | undefined;
  /** > 0: a window cache (ORT's sliding_window_cache, local_window_size = window <= capacity): `capacity` rows hold
   * the latest tokens however many have passed, and steps attend over the last `window`. */
  window?: number | undefined;
}

/** A GroupQueryAttention KV cache in wasm memory that grows in place (no copy of the cache per step). */
export class KvCache {
  /** Most tokens (rows, with a window) the cache holds now (reserve() grows a cache without a window). */
  readonly capacity: number;
  /** The window it was created with (0: none). */
  readonly window: number;
  /** Tokens the cache stands for so far (rotary positions go on from here). */
  readonly length: number;
  /** Tokens it holds: `length`, or with a window its latest ones. */
  readonly rows: number;
  /** New tokens only: GroupQueryAttention's inputs without past_key, past_value, seqlens_k, total_sequence_length. */
  step(inputs: CallInputs, attrs: Attributes, options?: StepOptions): { output: Tensor };
  clear(): void;
  /** Grows the capacity to `capacity` tokens, keeping the cached ones. */
  reserve(capacity: number): void;
  /** Keeps the first `length` tokens (a rejected speculative draft, a regenerated reply); a window cache goes back
   * as far as its rows allow. */
  truncate(length: number): void;
  /** Replaces the cached tokens with past tensors in the present layout (batch, kvHeads, rows, row) of the cache
   * dtype, e.g. a shared prompt prefix; `length` is the tokens they stand for (default: every row): the first rows,
   * or a window cache's rows after that many tokens (an ORT window present with its seqlens_k + 1). */
  load(past: { past_key: TensorInput | OrtTensorLike | PinnedTensor; past_value: TensorInput | OrtTensorLike | PinnedTensor },
    options?: { length?: number | undefined }): void;
  /** The held tokens, (batch, kvHeads, rows, row) each, in arrays the caller owns. */
  read(options?: {
    into?: { present_key?: TensorData | undefined; present_value?: TensorData | undefined } | undefined;
  }): { present_key: Tensor; present_value: Tensor };
  dispose(): void;
}

export function createKvCache(config: KvCacheConfig): KvCache;

export interface QAttentionCacheConfig {
  batch?: number | undefined;
  /** num_heads. */
  heads: number;
  /** hidden size / num_heads. */
  headSize: number;
  /** Most tokens the cache holds. */
  capacity: number;
}

/** QAttention's past/present in wasm memory, (2, batch, heads, capacity, headSize) float32, growing in place: a step
 * passes only the new tokens, where a stateless decode step copies the whole past in and the present out. */
export class QAttentionCache {
  readonly capacity: number;
  /** Tokens held. */
  readonly length: number;
  /** New tokens only: QAttention's inputs without past. */
  step(inputs: CallInputs, attrs: Attributes, options?: StepOptions): { output: Tensor };
  clear(): void;
  /** Keeps the first `length` tokens. */
  truncate(length: number): void;
  /** Replaces the held tokens with a past in ORT's present layout, (2, batch, heads, rows, headSize) float32. */
  load(past: { past: TensorInput | OrtTensorLike | PinnedTensor }): void;
  /** The held tokens, (2, batch, heads, length, headSize), in an array the caller owns. */
  read(options?: { into?: { present?: TensorData | undefined } | undefined }): { present: Tensor };
  dispose(): void;
}
export function createQAttentionCache(config: QAttentionCacheConfig): QAttentionCache;
/** pin() on the default instance. */
export function pin(tensor: TensorInput | OrtTensorLike | PinnedTensor): PinnedTensor;
