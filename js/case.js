// attnkit: the case format (DESIGN.md "The case format") in plain JS, shared by Node, the browser and the wasm package.
// Materializes tensors from `data`, `base64` or `random` bit-identically to the C++ loader (native/case/case_file.cc:
// splitmix64, doubles rounded to the dtype nearest-even) with the same error messages, and compares results.
// No Node APIs on purpose.
import { shown } from './errors.js';

// No prototype: a dtype named "constructor" or "toString" is unknown, not one of Object's members.
export const DTYPES = Object.assign(Object.create(null), {
  float32: { bytes: 4, array: Float32Array, float: true },
  float16: { bytes: 2, array: Uint16Array, float: true },
  bfloat16: { bytes: 2, array: Uint16Array, float: true },
  int8: { bytes: 1, array: Int8Array, low: -128, high: 127 },
  uint8: { bytes: 1, array: Uint8Array, low: 0, high: 255 },
  int32: { bytes: 4, array: Int32Array, low: -2147483648, high: 2147483647 },
  int64: { bytes: 8, array: BigInt64Array, low: -(2n ** 63n), high: 2n ** 63n - 1n },
  // Reference outputs of the CLI (`--reference`) are float64.
  float64: { bytes: 8, array: Float64Array, float: true },
});

export class CaseError extends Error {}

const CASE_DTYPES = ['float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64'];

function dtypeInfo(dtype) {
  const info = DTYPES[dtype];
  if (!info) throw new CaseError(`unknown dtype "${shown(dtype)}"`);
  return info;
}

function shapeText(shape) {
  return `[${shape.join(', ')}]`;
}

export function elementCount(shape) {
  return shape.reduce((n, d) => n * d, 1);
}

// ---- fp16 / bf16 bit conversion (mirrors core/src/common/half.h exactly) ----
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function floatBits(x) {
  f32[0] = x;
  return u32[0];
}
function bitsFloat(u) {
  u32[0] = u >>> 0;
  return f32[0];
}

export function floatToBf16(x) {
  let u = floatBits(x);
  if ((u & 0x7fffffff) >>> 0 > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  u = (u + 0x7fff + ((u >>> 16) & 1)) >>> 0;
  return u >>> 16;
}
export function bf16ToFloat(h) {
  return bitsFloat((h & 0xffff) << 16);
}

export function floatToF16(x) {
  const u = floatBits(x);
  const sign = (u >>> 16) & 0x8000;
  const abs = (u & 0x7fffffff) >>> 0;
  if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >>> 13) & 0x3ff);
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs < 0x38800000) {
    // Subnormal or zero: integer mantissa in units of 2^-24, rounded to nearest even (float32 steps as in C++).
    const scaled = Math.fround(bitsFloat(abs) * 16777216);
    let m = Math.trunc(scaled);
    const rem = Math.fround(scaled - m);
    if (rem > 0.5 || (rem === 0.5 && (m & 1))) m += 1;
    return sign | m;
  }
  const rounded = (abs + 0x0fff + ((abs >>> 13) & 1)) >>> 0;
  return sign | (((rounded - 0x38000000) >>> 13) & 0xffff);
}
export function f16ToFloat(h) {
  const sign = (h & 0x8000) ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  if (exp === 0) return sign * mant * 5.9604644775390625e-8;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

// float32 nearest to v but rounded to odd, so rounding it again to fp16/bf16 gives v's correctly rounded value
// (float32 keeps more than two extra bits); the C++ loader does the same.
function roundToOddFloat(v) {
  const f = Math.fround(v);
  if (Number.isNaN(v) || f === v) return f;
  let bits = floatBits(f);
  if (Math.abs(f) > Math.abs(v)) bits = (bits - 1) >>> 0;  // one step toward zero
  return bitsFloat((bits | 1) >>> 0);
}

// Converts a double to the stored representation of `dtype`, rounding once to nearest even.
function storeFloat(dtype, x) {
  if (dtype === 'float32') return Math.fround(x);
  if (dtype === 'float64') return x;
  if (dtype === 'float16') return floatToF16(roundToOddFloat(x));
  return floatToBf16(roundToOddFloat(x));
}

// Numbers of a tensor as doubles (fp16/bf16 decoded, int64 as Number), for comparisons and reports.
export function toFloat64(tensor) {
  const { dtype, data } = tensor;
  const out = new Float64Array(data.length);
  if (dtype === 'float16') for (let i = 0; i < data.length; i++) out[i] = f16ToFloat(data[i]);
  else if (dtype === 'bfloat16') for (let i = 0; i < data.length; i++) out[i] = bf16ToFloat(data[i]);
  else if (dtype === 'int64') for (let i = 0; i < data.length; i++) out[i] = Number(data[i]);
  else for (let i = 0; i < data.length; i++) out[i] = data[i];
  return out;
}

// ---- splitmix64 (DESIGN.md) on two 32-bit halves: the BigInt form took ~0.3 us an element, which made building
// a decode case's multi-MB cache the slowest step of a wasm or ORT run ----

// The low 64 bits of (ah:al) * (bh:bl), as [hi, lo]: al * bl exactly through 16-bit pieces, the cross terms mod 2^32.
function mul64(ah, al, bh, bl) {
  const a0 = al & 0xffff, a1 = al >>> 16, b0 = bl & 0xffff, b1 = bl >>> 16;
  const p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const lo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  const carry = a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);  // the high half of al * bl
  return [(carry + Math.imul(al, bh) + Math.imul(ah, bl)) >>> 0, lo];
}

// A splitmix64 stream: next() returns the upper 32 bits of the next output.
function splitmixStream(seed) {
  const s = BigInt.asUintN(64, BigInt(seed));
  let sh = Number(s >> 32n), sl = Number(s & 0xffffffffn);
  return () => {
    const lo = sl + 0x7f4a7c15;
    sl = lo >>> 0;
    sh = (sh + 0x9e3779b9 + (lo > 0xffffffff ? 1 : 0)) >>> 0;
    let [zh, zl] = mul64((sh ^ (sh >>> 30)) >>> 0, (sl ^ ((sl >>> 30) | (sh << 2))) >>> 0, 0xbf58476d, 0x1ce4e5b9);
    [zh, zl] = mul64((zh ^ (zh >>> 27)) >>> 0, (zl ^ ((zl >>> 27) | (zh << 5))) >>> 0, 0x94d049bb, 0x133111eb);
    return (zh ^ (zh >>> 31)) >>> 0;
  };
}

export function* splitmix64(seed) {
  const next = splitmixStream(seed);
  for (;;) yield next();
}

// random.seed as a BigInt: a safe integer, a BigInt, or a string of decimal digits (as the C++ reader takes). A
// JSON number above 2^53 has lost digits by the time JSON.parse returns it, so it is refused, not rounded.
function seedOf(seed, fail) {
  const range = 'random.seed must be an integer in [0, 2^64)';
  if (typeof seed === 'number') {
    if (Number.isSafeInteger(seed) && seed >= 0) return BigInt(seed);
    if (Number.isInteger(seed) && seed > 0 && seed < 2 ** 64) {
      throw fail(`${range}; above 2^53 - 1 a number has lost digits in JavaScript: write it as a decimal string`);
    }
    throw fail(range);
  }
  const digits = typeof seed === 'string' && /^[0-9]{1,20}$/.test(seed);
  const big = typeof seed === 'bigint' ? seed : digits ? BigInt(seed) : -1n;
  if (big < 0n || big >= 1n << 64n) throw fail(range);
  return big;
}

function randomElements(dtype, count, spec, fail) {
  const info = dtypeInfo(dtype);
  if (!spec || typeof spec !== 'object' || Array.isArray(spec)) throw fail('random must be an object {seed, low, high}');
  for (const k of Object.keys(spec)) {
    if (!['seed', 'low', 'high'].includes(k)) throw fail(`random.${k} is not a field of random (seed, low, high)`);
  }
  if (spec.seed === undefined) throw fail('random.seed is required');
  const out = new info.array(count);
  const next = splitmixStream(seedOf(spec.seed, fail));
  if (info.float) {
    if (spec.low !== undefined && typeof spec.low !== 'number') throw fail('random.low must be a number');
    if (spec.high !== undefined && typeof spec.high !== 'number') throw fail('random.high must be a number');
    const low = spec.low ?? -1;
    const high = spec.high ?? 1;
    if (!(low <= high)) throw fail('random.low must be <= random.high');
    for (let i = 0; i < count; i++) {
      out[i] = storeFloat(dtype, low + (high - low) * ((next() >>> 8) / 16777216));
    }
    return out;
  }
  // Exact integer arithmetic: low + u % (high - low + 1); BigInt only for int64, whose ranges pass 2^53.
  if (spec.low !== undefined && !Number.isInteger(spec.low)) throw fail('random.low must be an integer');
  if (spec.high !== undefined && !Number.isInteger(spec.high)) throw fail('random.high must be an integer');
  const low = BigInt(spec.low ?? info.low);
  const high = BigInt(spec.high ?? info.high);
  if (low < BigInt(info.low) || high > BigInt(info.high)) {
    throw fail(`random range [${low}, ${high}] exceeds ${dtype} [${info.low}, ${info.high}]`);
  }
  if (low > high) throw fail('random.low must be <= random.high');
  if (dtype === 'int64') {
    const span = high - low + 1n;
    for (let i = 0; i < count; i++) out[i] = low + (BigInt(next()) % span);
    return out;
  }
  const lowN = Number(low), spanN = Number(high - low + 1n);  // at most 2^32: u % span is exact
  for (let i = 0; i < count; i++) out[i] = lowN + (next() % spanN);
  return out;
}

// ---- base64 without Buffer/atob so the same code runs everywhere ----
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_INDEX = new Int16Array(128).fill(-1);
for (let i = 0; i < 64; i++) B64_INDEX[B64.charCodeAt(i)] = i;

export function bytesToBase64(bytes) {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += B64[n >> 18] + B64[(n >> 12) & 63] + B64[(n >> 6) & 63] + B64[n & 63];
  }
  if (i < bytes.length) {
    const n = (bytes[i] << 16) | ((i + 1 < bytes.length ? bytes[i + 1] : 0) << 8);
    out += B64[n >> 18] + B64[(n >> 12) & 63] + (i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=') + '=';
  }
  return out;
}

// Strict, canonical base64 (as the C++ loader): length a multiple of 4, padding only at the end.
export function base64ToBytes(text) {
  const n = text.length;
  if (n % 4 !== 0) throw new CaseError(`base64 length ${n} is not a multiple of 4`);
  let pad = 0;
  if (n >= 1 && text[n - 1] === '=') pad++;
  if (n >= 2 && text[n - 2] === '=') pad++;
  const out = new Uint8Array((n / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < n; i += 4) {
    const last = i + 4 === n;
    let bits = 0;
    for (let k = 0; k < 4; k++) {
      const c = text.charCodeAt(i + k);
      let v;
      if (text[i + k] === '=' && last && k >= 4 - pad) v = 0;
      else {
        v = c < 128 ? B64_INDEX[c] : -1;
        if (v < 0) throw new CaseError(`invalid base64 character at offset ${i + k}`);
      }
      bits = (bits << 6) | v;
    }
    if (last && pad && (bits & ((1 << (8 * pad)) - 1)) !== 0) throw new CaseError('non-canonical base64 padding');
    const count = last ? 3 - pad : 3;
    for (let k = 0; k < count; k++) out[o++] = (bits >> (16 - 8 * k)) & 255;
  }
  return out;
}

function bytesOf(typed) {
  return new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
}

// ---- tensors ----

const MAX_CASE_TENSOR_BYTES = 2 ** 32;

// Returns { dtype, shape, data: TypedArray } from a case tensor object (data | base64 | random), checking it in
// the C++ loader's order with its messages.
export function materializeTensor(t, what = 'tensor') {
  const fail = (rule) => new CaseError(`${what}: ${rule}`);
  if (!t || typeof t !== 'object' || Array.isArray(t)) throw fail('must be a tensor object {dtype, shape, data|base64|random}');
  for (const k of Object.keys(t)) {
    if (!['dtype', 'shape', 'data', 'base64', 'random'].includes(k)) {
      throw fail(`"${k}" is not a tensor field (dtype, shape, data, base64, random)`);
    }
  }
  if (typeof t.dtype !== 'string') throw fail('dtype is required (a string)');
  const info = DTYPES[t.dtype];
  if (!info || (t.dtype === 'float64' && !ArrayBuffer.isView(t.data) && t.base64 === undefined)) {
    throw fail(`unknown dtype "${t.dtype}" (${CASE_DTYPES.join(', ')})`);
  }
  if (!Array.isArray(t.shape) || !t.shape.every((d) => typeof d === 'number')) throw fail('shape is required (an array of integers)');
  t.shape.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 0) throw fail(`shape[${i}] = ${d} must be a non-negative integer`);
  });
  if (ArrayBuffer.isView(t.data)) return { dtype: t.dtype, shape: t.shape.slice(), data: t.data };
  const count = elementCount(t.shape);
  if (count > MAX_CASE_TENSOR_BYTES || count * info.bytes > MAX_CASE_TENSOR_BYTES) {
    throw fail(`shape ${shapeText(t.shape)} is too large (over 4 GiB of ${t.dtype})`);
  }
  const sources = ['data', 'base64', 'random'].filter((k) => t[k] !== undefined);
  if (sources.length !== 1) throw fail('give the elements in exactly one of data, base64 or random');
  let data;
  if (t.random !== undefined) {
    data = randomElements(t.dtype, count, t.random, fail);
  } else if (t.base64 !== undefined) {
    if (typeof t.base64 !== 'string') throw fail('base64 must be a string');
    let bytes;
    try {
      bytes = base64ToBytes(t.base64);
    } catch (err) {
      throw fail(`bad base64: ${err.message}`);
    }
    if (bytes.length !== count * info.bytes) {
      throw fail(`base64 holds ${bytes.length} bytes but shape ${shapeText(t.shape)} of ${t.dtype} needs ${count * info.bytes}`);
    }
    // Copy into a fresh, aligned buffer so the typed array view is legal for every element size.
    const aligned = new Uint8Array(bytes.length);
    aligned.set(bytes);
    data = new info.array(aligned.buffer);
  } else {
    if (!Array.isArray(t.data) || !t.data.every((v) => typeof v === 'number')) throw fail('data must be an array of numbers');
    if (t.data.length !== count) {
      throw fail(`data has ${t.data.length} values but shape ${shapeText(t.shape)} holds ${count}`);
    }
    data = new info.array(count);
    for (let i = 0; i < count; i++) {
      const v = t.data[i];
      if (info.float) {
        data[i] = storeFloat(t.dtype, v);
        continue;
      }
      if (!Number.isInteger(v)) throw fail(`data[${i}] = ${v} is not an ${t.dtype} integer`);
      if (BigInt(v) < BigInt(info.low) || BigInt(v) > BigInt(info.high)) throw fail(`data[${i}] = ${v} is out of range for ${t.dtype}`);
      data[i] = t.dtype === 'int64' ? BigInt(v) : v;
    }
  }
  return { dtype: t.dtype, shape: t.shape.slice(), data };
}

// The case-format object for a materialized tensor (results are written this way).
export function tensorToJson(tensor) {
  return { dtype: tensor.dtype, shape: tensor.shape.slice(), base64: bytesToBase64(bytesOf(tensor.data)) };
}

// A case's "ort" field says where ORT cannot run it: "skip: reason" on every EP, "skip-cpu: reason" on the CPU
// EP and the wasm EP built from the same kernels, while the WebGPU EP runs it. The reason for `ep` ('cpu' or
// 'webgpu'), or null where that EP runs the case.
export function ortSkipReason(caseObj, ep) {
  const m = typeof caseObj.ort === 'string' ? /^skip(-cpu)?:\s*(.*)$/.exec(caseObj.ort) : null;
  return m && (!m[1] || ep === 'cpu') ? m[2] : null;
}

export const OPS = ['GroupQueryAttention', 'QAttention'];

// "com.microsoft.GroupQueryAttention" -> "GroupQueryAttention"; throws the C++ registry's message otherwise.
export function canonicalOp(op) {
  const name = typeof op === 'string' ? op.replace(/^com\.microsoft\./, '') : op;
  if (!OPS.includes(name)) throw new CaseError(`op: "${op}" is not a supported operator (${OPS.join(', ')})`);
  return name;
}

// The outputs the ops produce when a case lists none (as the C++ op registry decides).
function defaultOutputs(op, inputs) {
  if (op === 'QAttention') return inputs.past ? ['output', 'present'] : ['output'];
  return ['output', 'present_key', 'present_value'];
}

const CASE_FIELDS = [
  'name', 'op', 'attrs', 'inputs', 'outputs', 'expected', 'tolerance', 'expect_error', 'ort', 'note',
];

// As native's JsonValue::type_name: for messages about a value of the wrong kind.
export function jsonTypeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return { boolean: 'a boolean', number: 'a number', string: 'a string', object: 'an object' }[typeof v] ?? typeof v;
}

const isPlainObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// The fields after the tensors (as native's check_case_annotations): a misspelt or mistyped one is refused, so a
// check the writer meant is never silently dropped.
function checkAnnotations(obj, outputs) {
  if (obj.expected !== undefined) {
    if (!isPlainObject(obj.expected)) throw new CaseError('expected: must be an object of named tensors');
    for (const name of Object.keys(obj.expected)) {
      if (!outputs.includes(name)) {
        throw new CaseError(`expected.${name}: not an output this case produces (${outputs.join(', ')})`);
      }
    }
  }
  if (obj.tolerance !== undefined) {
    if (!isPlainObject(obj.tolerance)) throw new CaseError('tolerance: must be an object {atol, rtol}');
    for (const [key, v] of Object.entries(obj.tolerance)) {
      if (key !== 'atol' && key !== 'rtol') {
        throw new CaseError(`tolerance.${key}: not a field of tolerance (atol, rtol)`);
      }
      if (typeof v !== 'number' || !(v >= 0) || !Number.isFinite(v)) {
        throw new CaseError(`tolerance.${key}: must be a non-negative number`);
      }
    }
  }
  for (const field of ['expect_error', 'note']) {
    if (obj[field] !== undefined && typeof obj[field] !== 'string') throw new CaseError(`${field}: must be a string`);
  }
  if (obj.ort !== undefined && !(typeof obj.ort === 'string' && /^skip(-cpu)?:/.test(obj.ort))) {
    throw new CaseError('ort: must be "skip: why" or "skip-cpu: why"');
  }
}

// Validates the envelope of a case (as native/case/case_file.cc does, same messages) and fills defaults;
// tensors stay lazy until materializeInputs().
export function normalizeCase(obj, index = 0) {
  if (!isPlainObject(obj)) throw new CaseError(`case #${index}: must be an object, got ${jsonTypeName(obj)}`);
  const unknown = Object.keys(obj).find((k) => !CASE_FIELDS.includes(k));
  if (unknown !== undefined) throw new CaseError(`"${unknown}" is not a field of a case (${CASE_FIELDS.join(', ')})`);
  if (obj.name !== undefined && typeof obj.name !== 'string') throw new CaseError('name: must be a string');
  if (typeof obj.op !== 'string') throw new CaseError('op: required (a string such as "GroupQueryAttention")');
  const op = canonicalOp(obj.op);
  if (obj.attrs !== undefined && (typeof obj.attrs !== 'object' || obj.attrs === null || Array.isArray(obj.attrs))) {
    throw new CaseError('attrs: must be an object');
  }
  if (!obj.inputs || typeof obj.inputs !== 'object' || Array.isArray(obj.inputs)) {
    throw new CaseError('inputs: required (an object of named tensors)');
  }
  if (obj.outputs !== undefined && (!Array.isArray(obj.outputs) || !obj.outputs.every((o) => typeof o === 'string'))) {
    throw new CaseError('outputs: must be an array of output names');
  }
  // An empty list asks for the defaults, as in the op call.
  const outputs = (obj.outputs?.length ? obj.outputs : defaultOutputs(op, obj.inputs)).slice();
  checkAnnotations(obj, outputs);
  const attrs = { ...(obj.attrs ?? {}) };
  return { ...obj, name: obj.name ?? `#${index}`, op, attrs, inputs: { ...obj.inputs }, outputs };
}

// A case file's text read as native's parser (core/src/common/json.cc) reads it, with its messages: JSON.parse, which
// keeps the last of two equal keys (a case naming "tolerance" twice would silently lose one), and then the rules
// JSON.parse lacks: no duplicate key, nesting at most 512 deep, no lone surrogate in a \u escape. A UTF-8 BOM is
// skipped. Positions are native's: line, and column in bytes.
export function parseCaseJson(text) {
  const doc = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  const fail = (at, what) => {
    const lineStart = text.lastIndexOf('\n', at - 1) + 1;
    const line = text.slice(0, lineStart).split('\n').length;
    const column = new TextEncoder().encode(text.slice(lineStart, at)).length + 1;
    return new CaseError(`JSON line ${line}, column ${column}: ${what}`);
  };
  const hex4 = (at) => (/^[0-9a-fA-F]{4}$/.test(text.slice(at, at + 4)) ? parseInt(text.slice(at, at + 4), 16) : -1);
  const open = [];  // per enclosing object the Set of its keys so far, per enclosing array null
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '{' || ch === '[') {
      if (open.length === 512) throw fail(i, 'nesting deeper than 512');
      open.push(ch === '{' ? new Set() : null);
    } else if (ch === '}' || ch === ']') {
      open.pop();
    } else if (ch === '"') {
      const start = i;
      for (i++; text[i] !== '"'; i++) {
        if (text[i] !== '\\') continue;
        const esc = i++;
        if (text[i] !== 'u') continue;
        const cp = hex4(i + 1);
        i += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) throw fail(esc, 'lone low surrogate in \\u escape');
        if (cp < 0xd800 || cp > 0xdbff) continue;
        if (text.slice(i + 1, i + 3) !== '\\u') throw fail(esc, 'lone high surrogate in \\u escape');
        const low = hex4(i + 3);
        if (low < 0xdc00 || low > 0xdfff) throw fail(esc, 'invalid surrogate pair');
        i += 6;
      }
      const keys = open[open.length - 1];
      let next = i + 1;
      while (' \t\r\n'.includes(text[next])) next++;
      if (!keys || text[next] !== ':') continue;  // a string value, not a key
      const key = JSON.parse(text.slice(start, i + 1));
      if (keys.has(key)) throw fail(start, `duplicate key "${key}"`);
      keys.add(key);
    }
  }
  return doc;
}

// The case objects of a parsed file, as native's list_cases: the document itself, or its array's elements.
export function listCases(doc) {
  if (isPlainObject(doc)) return [doc];
  if (!Array.isArray(doc)) {
    throw new CaseError(`case file: must hold a case object or an array of them, got ${jsonTypeName(doc)}`);
  }
  doc.forEach((c, i) => {
    if (!isPlainObject(c)) throw new CaseError(`case #${i}: must be an object, got ${jsonTypeName(c)}`);
  });
  return doc;
}

export function materializeInputs(caseObj) {
  const out = {};
  for (const [name, t] of Object.entries(caseObj.inputs)) out[name] = materializeTensor(t, name);
  return out;
}

// ---- comparison ----

// max abs / max rel difference, the count of unequal elements, and an allclose-style verdict: |a - e| <= atol + rtol * |e| for every compared
// element. `include(flatIndex)` restricts the comparison (e.g. output_qk columns that hold defined values).
// maxRel divides by max(|e|, relFloor), relFloor defaulting to 1e-3 of the tensor's largest |e|: outputs that cancel
// to ~0 would otherwise turn a tiny absolute error into a huge "relative" one in reports.
export function compareTensors(actual, expected, { atol = 0, rtol = 0, include = null, relFloor = null } = {}) {
  const result = { maxAbs: 0, maxRel: 0, ok: true, worstIndex: -1, compared: 0, mismatches: 0, reason: '' };
  const sameShape = actual.shape.length === expected.shape.length && actual.shape.every((d, i) => d === expected.shape[i]);
  if (!sameShape) {
    return { ...result, ok: false, maxAbs: Infinity, maxRel: Infinity,
      reason: `shape [${actual.shape}] != expected [${expected.shape}]` };
  }
  const a = toFloat64(actual);
  const e = toFloat64(expected);
  if (relFloor === null) {
    let peak = 0;
    for (let i = 0; i < e.length; i++) {
      if (Math.abs(e[i]) > peak && Number.isFinite(e[i]) && (!include || include(i))) peak = Math.abs(e[i]);
    }
    relFloor = Math.max(1e-3 * peak, Number.MIN_VALUE);
  }
  let worstExcess = -Infinity;
  for (let i = 0; i < e.length; i++) {
    if (include && !include(i)) continue;
    result.compared++;
    const ai = a[i];
    const ei = e[i];
    if (!Number.isFinite(ai) || !Number.isFinite(ei)) {
      // NaN matches NaN (Object.is) and an infinity only itself: no tolerance spans an infinite difference.
      if (Object.is(ai, ei)) continue;
      result.mismatches++;
      result.ok = false;
      result.maxAbs = Infinity;
      result.maxRel = Infinity;
      result.worstIndex = i;
      worstExcess = Infinity;
      continue;
    }
    const diff = ai === ei ? 0 : Math.abs(ai - ei);
    if (diff > 0) result.mismatches++;
    const rel = diff / Math.max(Math.abs(ei), relFloor);
    if (diff > result.maxAbs) result.maxAbs = diff;
    if (rel > result.maxRel) result.maxRel = rel;
    const excess = diff - (atol + rtol * Math.abs(ei));
    if (excess > worstExcess) {
      worstExcess = excess;
      result.worstIndex = i;
    }
    if (excess > 0) result.ok = false;
  }
  if (!result.ok && !result.reason && result.worstIndex >= 0) {
    const i = result.worstIndex;
    result.reason = `element ${i}: got ${a[i]}, expected ${e[i]} (atol ${atol}, rtol ${rtol})`;
  }
  return result;
}

// For present_key/present_value (B, Nk, C, row) of a sliding_window_cache case: each entry holds its latest
// L(T_b) tokens in rows [0, L(T_b)) (spec §2.9); ORT leaves the rows after them unwritten once it has evicted.
export function windowCacheHeldRows(shape, seqlensK, window) {
  const [, kvHeads, capacity, rowLength] = shape;
  const evict = capacity - window + 1;
  const held = Array.from(seqlensK, (v) => {
    const t = Number(v) + 1;
    return t <= capacity ? t : t - evict * Math.ceil((t - capacity) / evict);
  });
  return (i) => {
    const row = Math.floor(i / rowLength);
    return row % capacity < held[Math.floor(row / (kvHeads * capacity))];
  };
}

// For output_qk (B, N, S, T): ORT leaves columns >= T_b unwritten, so only columns below T_b = seqlens_k[b] + 1
// carry defined values.
export function qkDefinedColumns(shape, seqlensK) {
  const [, heads, rows, cols] = shape;
  const perBatch = heads * rows * cols;
  return (i) => {
    const b = Math.floor(i / perBatch);
    return i % cols < Number(seqlensK[b]) + 1;
  };
}
