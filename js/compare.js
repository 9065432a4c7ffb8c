// attnkit: compares the outputs of one target with those of another (or with the fp64 reference) for one case,
// applying the per-output rules every comparison needs: output_qk only where ORT defines it, a window cache's
// presents only in the rows holding tokens, INT4 caches unpacked to their signed values. Pure JS, shared by the
// node:test corpus test, `npm start` and the browser page.
import { compareTensors, materializeInputs, qkDefinedColumns, windowCacheHeldRows } from './case.js';

// INT4 caches are uint8 bytes holding two nibbles (even channel low, +8 bias): compare the signed values, since a
// one-step difference in a high nibble would otherwise read as 16.
function unpackInt4(tensor) {
  const out = new Int8Array(tensor.data.length * 2);
  for (let i = 0; i < tensor.data.length; i++) {
    out[2 * i] = (tensor.data[i] & 15) - 8;
    out[2 * i + 1] = (tensor.data[i] >> 4) - 8;
  }
  const shape = tensor.shape.slice();
  shape[shape.length - 1] *= 2;
  return { dtype: 'int8', shape, data: out };
}

function isInt4Cache(caseObj, name) {
  return caseObj.op === 'GroupQueryAttention' && (name === 'present_key' || name === 'present_value')
    && (caseObj.attrs.kv_cache_bit_width ?? 0) === 4;
}

const isWindowCache = (caseObj, name) => caseObj.op === 'GroupQueryAttention'
  && (name === 'present_key' || name === 'present_value') && caseObj.attrs.sliding_window_cache === 1;

const isIntegerTensor = (t) => t.dtype === 'int8' || t.dtype === 'uint8';

// Quantized caches hold integers. ORT quantizes with rint(x * (1/scale)) in float; a fp64 reference or another
// rounding step may land differently only where x * (1/scale) sits on a tie, which random data hits rarely: allow
// one quantization step on at most 0.1% of the elements (at least one), and nothing more.
const QUANT_STEP_TOLERANCE = { atol: 1, rtol: 0 };
const QUANT_MISMATCH_FRACTION = 1e-3;

// Compares every output named in `expected` that the case asks for. Returns { ok, maxAbs, maxRel, outputs:
// { name: result }, missing: [names] }. `tolerance(name, expectedTensor)` gives { atol, rtol } per output.
export function compareOutputs(caseObj, actual, expected, tolerance) {
  const summary = { ok: true, maxAbs: 0, maxRel: 0, outputs: {}, missing: [] };
  let seqlensK = null;
  for (const name of caseObj.outputs) {
    const e = expected[name];
    if (!e) continue;
    let a = actual[name];
    if (!a) {
      summary.missing.push(name);
      summary.ok = false;
      continue;
    }
    let exp = e;
    let include = null;
    if (name === 'output_qk') {
      seqlensK ??= materializeInputs(caseObj).seqlens_k.data;
      include = qkDefinedColumns(e.shape, seqlensK);
    }
    if (isInt4Cache(caseObj, name)) {
      if (a.dtype === 'uint8') a = unpackInt4(a);
      if (exp.dtype === 'uint8') exp = unpackInt4(exp);
    }
    if (isWindowCache(caseObj, name)) {
      seqlensK ??= materializeInputs(caseObj).seqlens_k.data;
      include = windowCacheHeldRows(exp.shape, seqlensK, caseObj.attrs.local_window_size);
    }
    const integer = isIntegerTensor(e);
    const tol = integer ? QUANT_STEP_TOLERANCE : typeof tolerance === 'function' ? tolerance(name, e) : tolerance;
    const r = compareTensors(a, exp, { ...tol, include });
    if (integer && r.mismatches > Math.max(1, QUANT_MISMATCH_FRACTION * r.compared)) {
      r.ok = false;
      r.reason ||= `${r.mismatches} of ${r.compared} quantized values differ (at most one step on 0.1% allowed)`;
    }
    summary.outputs[name] = r;
    summary.ok &&= r.ok;
    summary.maxAbs = Math.max(summary.maxAbs, r.maxAbs);
    summary.maxRel = Math.max(summary.maxRel, r.maxRel);
  }
  return summary;
}

// One line per failing output, for assertion messages and reports.
export function describeFailures(summary) {
  const lines = summary.missing.map((n) => `${n}: missing`);
  for (const [n, r] of Object.entries(summary.outputs)) {
    if (!r.ok) lines.push(`${n}: max abs ${r.maxAbs.toExponential(3)}, max rel ${r.maxRel.toExponential(3)}; ${r.reason}`);
  }
  return lines.join('\n');
}
