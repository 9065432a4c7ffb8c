// attnkit: the ONNX Runtime peer. Builds a single-node ModelProto (IR 10, opset 21 + com.microsoft 1) for a case with
// onnx-proto and runs it on onnxruntime-node (CPU EP) or onnxruntime-web's wasm EP inside Node. ORT oddities
// handled here come from probing (/work/shared/notes/webgpu-and-peers.md): presents are always requested with past.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import onnxProto from 'onnx-proto';
import { materializeInputs, normalizeCase, ortSkipReason } from '../case.js';

const { onnx } = onnxProto;

// The installed version of a peer package ("1.31.1"), for labels: package.json pins it, and a user who installs
// another one sees which ORT the comparison ran. (Neither package exports its package.json.)
function peerVersion(pkg) {
  try {
    const entry = createRequire(import.meta.url).resolve(pkg);
    const root = entry.slice(0, entry.lastIndexOf(`${sep}${pkg}${sep}`) + pkg.length + 1);
    return JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
  } catch {
    return '(not installed)';
  }
}
export const ORT_NODE = `ORT ${peerVersion('onnxruntime-node')}`;
export const ORT_WEB = `ORT ${peerVersion('onnxruntime-web')}`;

// Positional input/output names of each operator, as ORT's schemas declare them; absent optional inputs become "".
export const OP_SCHEMAS = {
  GroupQueryAttention: {
    inputs: ['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length', 'cos_cache',
      'sin_cache', 'position_ids', 'attention_bias', 'head_sink', 'k_scale', 'v_scale', 'q_norm_weight', 'k_norm_weight'],
    outputs: ['output', 'present_key', 'present_value', 'output_qk'],
    floatAttrs: new Set(['scale', 'softcap', 'qk_norm_epsilon']),
  },
  QAttention: {
    inputs: ['input', 'weight', 'bias', 'input_scale', 'weight_scale', 'mask_index', 'input_zero_point',
      'weight_zero_point', 'past'],
    outputs: ['output', 'present'],
    floatAttrs: new Set(['scale', 'mask_filter_value']),
  },
};

const ONNX_TYPES = {
  float32: onnx.TensorProto.DataType.FLOAT,
  float16: onnx.TensorProto.DataType.FLOAT16,
  bfloat16: onnx.TensorProto.DataType.BFLOAT16,
  int8: onnx.TensorProto.DataType.INT8,
  uint8: onnx.TensorProto.DataType.UINT8,
  int32: onnx.TensorProto.DataType.INT32,
  int64: onnx.TensorProto.DataType.INT64,
};

// Which outputs to ask ORT for. GQA with past but without both presents returns uninitialised output in ORT 1.30,
// and output_qk without qk_output is garbage, so the request is widened/narrowed to what gives defined results.
export function ortOutputNames(caseObj) {
  const c = normalizeCase(caseObj);
  const wanted = new Set(c.outputs);
  if (c.op === 'GroupQueryAttention') {
    wanted.add('output').add('present_key').add('present_value');
    if ((c.attrs.qk_output ?? 0) !== 0) wanted.add('output_qk');
    else wanted.delete('output_qk');
  } else if (c.op === 'QAttention') {
    wanted.add('output');
    if (c.inputs.past) wanted.add('present');
  }
  return OP_SCHEMAS[c.op].outputs.filter((n) => wanted.has(n));
}

// Float attributes may be spelled "Infinity", "-Infinity" or "NaN" (JSON has no such numbers; the C++ reader agrees).
const NON_FINITE = new Set(['Infinity', '-Infinity', 'NaN']);
function attributeProto(name, value, floatAttrs) {
  const a = { name };
  if (floatAttrs.has(name) && NON_FINITE.has(value)) value = Number(value);
  if (typeof value === 'string') {
    a.type = onnx.AttributeProto.AttributeType.STRING;
    a.s = new TextEncoder().encode(value);
  } else if (floatAttrs.has(name) || !Number.isInteger(value)) {
    a.type = onnx.AttributeProto.AttributeType.FLOAT;
    a.f = value;
  } else {
    a.type = onnx.AttributeProto.AttributeType.INT;
    a.i = value;
  }
  return a;
}

function valueInfo(name, dtype, shape) {
  const tensorType = { elemType: ONNX_TYPES[dtype] };
  if (shape) tensorType.shape = { dim: shape.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) };
  return { name, type: { tensorType } };
}

// Output element types: GQA output/output_qk follow the query, presents follow the cache (past_key, else query);
// QAttention's float outputs follow bias (T3).
function outputDtype(c, name) {
  if (c.op === 'GroupQueryAttention') {
    if (name === 'present_key' || name === 'present_value') return (c.inputs.past_key ?? c.inputs.query).dtype;
    return c.inputs.query.dtype;
  }
  return c.inputs.bias?.dtype ?? 'float32';
}

// Serialized ModelProto for the case's operator, attributes and input signature (data is not embedded: inputs are
// graph inputs, so one model serves every case with the same signature).
export function buildModelBytes(caseObj) {
  const c = normalizeCase(caseObj);
  const schema = OP_SCHEMAS[c.op];
  for (const name of Object.keys(c.inputs)) {
    if (!schema.inputs.includes(name)) throw new Error(`${c.op} has no input "${name}"`);
  }
  let last = -1;
  schema.inputs.forEach((n, i) => { if (c.inputs[n]) last = i; });
  const nodeInputs = schema.inputs.slice(0, last + 1).map((n) => (c.inputs[n] ? n : ''));
  const outNames = ortOutputNames(c);
  let lastOut = -1;
  schema.outputs.forEach((n, i) => { if (outNames.includes(n)) lastOut = i; });
  const nodeOutputs = schema.outputs.slice(0, lastOut + 1).map((n) => (outNames.includes(n) ? n : ''));

  const node = {
    opType: c.op,
    domain: 'com.microsoft',
    name: 'op',
    input: nodeInputs,
    output: nodeOutputs,
    attribute: Object.entries(c.attrs).map(([k, v]) => attributeProto(k, v, schema.floatAttrs)),
  };
  // Output shapes stay undeclared: ORT infers them, and a fixed present length would clash with max(past, total).
  const graph = {
    name: 'attnkit_case',
    node: [node],
    input: Object.entries(c.inputs).map(([n, t]) => valueInfo(n, t.dtype, t.shape)),
    output: outNames.map((n) => valueInfo(n, outputDtype(c, n), null)),
  };
  const model = onnx.ModelProto.create({
    irVersion: 10,
    producerName: 'attnkit',
    opsetImport: [{ domain: '', version: 21 }, { domain: 'com.microsoft', version: 1 }],
    graph,
  });
  return onnx.ModelProto.encode(model).finish();
}

const runtimes = {};
async function loadRuntime(backend, threads) {
  if (backend === 'node') {
    runtimes.node ??= (await import('onnxruntime-node')).default ?? (await import('onnxruntime-node'));
    return runtimes.node;
  }
  if (backend === 'web') {
    if (!runtimes.web) {
      const mod = await import('onnxruntime-web');
      const ort = mod.default ?? mod;
      // Thread count is fixed at the first session of the process (ORT web initializes its wasm module once).
      ort.env.wasm.numThreads = threads ?? 1;
      ort.env.logLevel = 'error';
      runtimes.web = ort;
    }
    return runtimes.web;
  }
  throw new Error(`runOrt: unknown backend "${backend}"`);
}

function sessionOptions(backend, threads) {
  const options = { graphOptimizationLevel: 'all', logSeverityLevel: 3 };
  if (backend === 'node') {
    options.intraOpNumThreads = threads ?? 1;
    options.interOpNumThreads = 1;
    options.executionProviders = ['cpu'];
  } else {
    options.executionProviders = ['wasm'];
  }
  return options;
}

const sessionCache = new Map();
async function getSession(ort, backend, threads, modelBytes) {
  // Key on the model bytes: identical signatures share one session within a process.
  const key = `${backend}:${threads}:${Buffer.from(modelBytes).toString('base64')}`;
  let session = sessionCache.get(key);
  if (!session) {
    session = ort.InferenceSession.create(modelBytes, sessionOptions(backend, threads));
    sessionCache.set(key, session);
  }
  try {
    return await session;
  } catch (err) {
    sessionCache.delete(key);
    throw err;
  }
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// onnxruntime-node's CPU EP multiplies u8 x s8 (QAttention, MatMulInteger) with vpmaddubsw on x86 CPUs without
// VNNI, whose int16 pair sums saturate (255 * 127 * 2 > 32767): its outputs then differ from the exact product for
// full-range weights (ORT's quantizer offers reduce_range, 7-bit weights, for such CPUs). With AVX512-VNNI or
// AVX-VNNI, on Arm and in ORT web's wasm EP (int16 dot products) the product is exact. Decided from Linux's
// /proc/cpuinfo flags (arch and cpuinfo can be passed in); false where they cannot be read.
export function ortNodeSaturatesU8S8({ arch = process.arch, cpuinfo } = {}) {
  if (arch !== 'x64') return false;
  if (cpuinfo === undefined) {
    try {
      cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return false;
    }
  }
  const line = cpuinfo.match(/^flags\s*:(.*)$/m)?.[1]?.trim();
  if (!line) return false;
  const flags = new Set(line.split(/\s+/));
  return !flags.has('avx512_vnni') && !flags.has('avx_vnni');
}

// Whether onnxruntime-node's output for this case carries that saturation on this host.
export function ortNodeSaturates(caseObj) {
  const c = normalizeCase(caseObj);
  return c.op === 'QAttention' && c.inputs.weight?.dtype === 'int8' && ortNodeSaturatesU8S8();
}

// ORT's own time of each session.run, from its profiler (model_run events, microseconds): from JS, session.run also
// turns every output into a fresh JS array (at decode T=4096, 1.3-3.4x ORT's own run), which attnkit native's C++
// timing does not pay. A session of its own, as profiling is fixed when one is created.
async function profiledSession(ort, threads, modelBytes) {
  const dir = mkdtempSync(join(tmpdir(), 'attnkit-ort-profile-'));
  let session;
  try {
    session = await ort.InferenceSession.create(modelBytes,
      { ...sessionOptions('node', threads), enableProfiling: true, profileFilePrefix: join(dir, 'ort') });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const runTimesMs = () => {
    session.endProfiling();
    const file = readdirSync(dir).find((name) => name.endsWith('.json'));
    const events = file ? JSON.parse(readFileSync(join(dir, file), 'utf8')) : [];
    rmSync(dir, { recursive: true, force: true });
    return events.filter((e) => e.cat === 'Session' && e.name === 'model_run').map((e) => e.dur / 1000);
  };
  return { session, runTimesMs };
}

// Runs a case on ORT. Returns { outputs: { name: { dtype, shape, data } }, timeMs, meanMs } (timeMs: median of
// `repeat` session.run calls after `warmup` untimed ones when repeat > 1; each kind stops early once its calls
// exceed budgetMs, so slow targets on big cases keep `npm start` short), or throws with ORT's message. With
// ownTime (onnxruntime-node only) also ownMs: the median of the same calls as ORT's profiler times them.
export async function runOrt(caseObj,
  { backend = 'node', threads = 1, repeat = 1, warmup = 1, budgetMs = Infinity, ownTime = false } = {}) {
  const c = normalizeCase(caseObj);
  const ort = await loadRuntime(backend, threads);
  if (ownTime && backend !== 'node') throw new Error('runOrt: ownTime needs onnxruntime-node');
  const feeds = {};
  for (const [name, t] of Object.entries(materializeInputs(c))) {
    if (t.dtype === 'bfloat16') throw new Error(`${name}: onnxruntime JS has no bfloat16 tensors`);
    feeds[name] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const timeRuns = async (session) => {
    const times = [];
    let results, warmed = 0;
    for (let warmMs = 0; repeat > 1 && warmed < warmup && warmMs <= budgetMs; warmed++) {
      const t0 = performance.now();
      results = await session.run(feeds);
      warmMs += performance.now() - t0;
    }
    while (times.length < repeat && times.reduce((x, y) => x + y, 0) <= budgetMs) {
      const t0 = performance.now();
      results = await session.run(feeds);
      times.push(performance.now() - t0);
    }
    return { results, times, warmed };
  };
  let run, ownMs;
  if (ownTime) {
    const profiled = await profiledSession(ort, threads, buildModelBytes(c));
    try {
      run = await timeRuns(profiled.session);
    } finally {
      const own = profiled.runTimesMs().slice(run?.warmed);
      await profiled.session.release();
      ownMs = own.length === run?.times.length ? median(own) : undefined;
    }
    if (ownMs === undefined) throw new Error('runOrt: ORT\'s profile does not hold one model_run per call');
  } else {
    run = await timeRuns(await getSession(ort, backend, threads, buildModelBytes(c)));
  }
  const outputs = {};
  for (const [name, t] of Object.entries(run.results)) {
    outputs[name] = { dtype: t.type, shape: Array.from(t.dims, Number), data: t.data };
  }
  // The mean too: a multi-MB output array now and then stalls a call for tens of ms (V8 reclaiming them), which a
  // loop's throughput pays and the median hides.
  const { times } = run;
  const timing = { timeMs: median(times), meanMs: times.reduce((x, y) => x + y, 0) / times.length };
  return { outputs, ...timing, ...(ownTime ? { ownMs } : {}) };
}

function ortTarget(backend, id, label) {
  return {
    id,
    label,
    async available() {
      try {
        await loadRuntime(backend, 1);
        return true;
      } catch (err) {
        return `cannot load ${backend === 'node' ? 'onnxruntime-node' : 'onnxruntime-web'}: ${err.message}`;
      }
    },
    // Why this target's output may diverge from the reference on this host (shown with a divergence), or null.
    divergenceNote(caseObj) {
      return backend === 'node' && ortNodeSaturates(caseObj) ? "ORT's u8 x s8 product saturates on x86 without VNNI" : null;
    },
    // Cases that ORT cannot run say so in their "ort" field.
    skipReason(caseObj) {
      return ortSkipReason(caseObj, 'cpu');
    },
    async run(caseObj, { threads = 1, repeat = 5, budgetMs = 2000 } = {}) {
      try {
        // onnxruntime-node's time is its own run, as attnkit native's is its C++ call (see profiledSession).
        const ownTime = backend === 'node';
        const r = await runOrt(caseObj, { backend, threads, repeat, budgetMs, ownTime });
        return ownTime ? { ...r, timeMs: r.ownMs } : r;
      } catch (err) {
        return { error: String(err.message ?? err).split('\n')[0] };
      }
    },
  };
}

export const ortNodeTarget = ortTarget('node', 'ort-node', `${ORT_NODE} native CPU`);
export const ortWasmTarget = ortTarget('web', 'ort-wasm', `${ORT_WEB} wasm (Node)`);
