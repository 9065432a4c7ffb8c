// attnkit: how far an fp32/fp16/bf16 result may sit from the fp64 reference (`attnkit run --reference`): attnkit's
// own bound per op, and the spec's accuracy anchors for a peer (ORT). Shared by the corpus and fuzz tests and by
// `npm start`, so every case, hand-written or generated, meets one rule wherever it runs.
import { materializeTensor, toFloat64 } from './case.js';

// The largest finite |value| (fp16/bf16 decoded, not their bit patterns; a NaN or inf would make every bound NaN).
export function peakOf(tensor) {
  let peak = 0;
  for (const v of toFloat64(tensor)) if (Math.abs(v) > peak && Number.isFinite(v)) peak = Math.abs(v);
  return peak;
}

// GroupQueryAttention:
// - float32: the bound, 2e-6 relative. Attention outputs are convex combinations of V rows, so their rounding
//   error scales with max|V|, not with the element itself: where an output cancels to ~0 a purely elementwise
//   relative bound is meaningless, so the absolute floor is 2e-6 times the largest |v| the output combines (or the
//   output's own largest magnitude, where larger). Over long contexts random values cancel to outputs far below
//   max|V|: fuzz seed 2183, case 64 (T=5717, H=8, values in [-1, 1]) had outputs of at most 0.028, and the naive
//   path sat 1.0e-7 from the reference, 1.0e-7 of max|V| but 3.7e-6 of max|output|. Other outputs (presents, QK)
//   scale with their own largest magnitude.
// - float16 / bfloat16: the spec's accuracy anchors (§5: fp16 rtol = atol = 1e-2; bf16 rtol 5e-2, atol 1e-2); both
//   cover the single output rounding (2^-11 resp. 2^-8 relative) plus the rounding of cached K/V.
// - quantized caches: the integers themselves are checked by js/compare.js (one step on ties only); the float
//   outputs follow the query dtype's rule above, since the reference dequantizes the very same integers.
// - an explicit scale a multiplies every score, and with it the absolute rounding error of the fp32 dot products
//   that the softmax turns into relative error of the probabilities: by a*sqrt(H) against the default 1/sqrt(H), so
//   the fp32 bound grows by that factor where it exceeds 1 (fuzz seed 1104, case 114: scale 1 at H=256, where the
//   scalar kernel's sequential sums sat 4.1e-6 relative from the reference).
export function gqaReferenceTolerance(c) {
  const { num_heads: N, kv_num_heads: Nk, scale } = c.attrs;
  const packed = !c.inputs.key;
  const H = c.inputs.query.shape[2] / (packed ? N + 2 * Nk : N);
  const conditioning = scale && H > 0 ? Math.max(1, Math.abs(scale) * Math.sqrt(H)) : 1;
  let values;
  return (name, expected) => {
    if (['float16', 'bfloat16'].includes(c.inputs.query.dtype)) return anchorTolerance(c);
    const bound = 2e-6 * conditioning;
    let peak = peakOf(expected);
    if (name === 'output') peak = Math.max(peak, (values ??= valuePeak(c, packed)));
    return { atol: bound * peak, rtol: bound };
  };
}

// The largest |v| among a GQA case's fp32 value rows: value and past_value, or with packed QKV the query input that
// holds them. A quantized cache's integers are left out (its outputs keep their own scale).
function valuePeak(c, packed) {
  let peak = 0;
  for (const name of packed ? ['query', 'past_value'] : ['value', 'past_value']) {
    const t = c.inputs[name];
    if (t?.dtype === 'float32') peak = Math.max(peak, peakOf(materializeTensor(t, name)));
  }
  return peak;
}

// QAttention: the projection is exact in both, then fp32 dequantization (2^-24 relative), fp32 scores over H <= 80
// terms, the shared exp polynomial (< 2 ulp) and a convex combination of V rows, so the error scales with the
// tensor's largest magnitude: 1e-5 relative with an absolute floor of 1e-5 * max|expected|. present holds past rows
// bit for bit and fp32 projections (<= 2 roundings of O(1) terms), far inside the same bound. Cases with a fully
// masked row carry their own wider tolerance (see scripts/gen-qattention-cases.mjs): the reference models ORT's fp32
// mask addition, but a 1-ulp score difference can still pick the neighbouring 2^-10 grid point.
// A float16 call (bias, scales, past and outputs float16) runs through float32 and rounds once: its output sits
// within half a float16 step (2^-11 relative) of the fp32 result, and its present, rounded from an fp32 value the
// reference rounds too, within one step of the reference's (2^-10), on top of the fp32 bound.
export function qattentionReferenceTolerance(c) {
  if (c.inputs.bias?.dtype === 'float16') {
    return (name, expected) => ({ atol: 1e-5 * peakOf(expected), rtol: 1e-5 + 2 ** -10 });
  }
  return (name, expected) => {
    const peak = peakOf(expected);
    const base = { atol: 1e-5 * peak, rtol: 1e-5 };
    return c.tolerance && c.tolerance.atol > 1e-4 ? { atol: c.tolerance.atol * Math.max(peak, 1), rtol: 1e-5 } : base;
  };
}

// attnkit's bound for a case of either op.
export function attnkitTolerance(c) {
  return c.op === 'QAttention' ? qattentionReferenceTolerance(c) : gqaReferenceTolerance(c);
}

// The spec's accuracy anchors (§5) by the dtype of the float inputs and outputs (QAttention's activations are
// uint8): fp32 rtol = atol = 1e-5, fp16 rtol = atol = 1e-2, bf16 rtol 5e-2 / atol 1e-2. A case without a tolerance
// of its own is judged by these.
export function anchorTolerance(c) {
  const dtype = (c.op === 'QAttention' ? c.inputs.bias : c.inputs.query)?.dtype;
  if (dtype === 'float16') return { atol: 1e-2, rtol: 1e-2 };
  if (dtype === 'bfloat16') return { atol: 1e-2, rtol: 5e-2 };
  return { atol: 1e-5, rtol: 1e-5 };
}

// Against ORT: the case's tolerance (or the anchor), with its absolute part scaled by the tensor's largest
// magnitude once that exceeds 1. Both sides round in fp32 and every output is a convex combination of V rows, so
// their difference grows with max|V| as the reference bounds above do: QAttention over uncentred activations
// projects V rows of magnitude 10+, where ORT sat 1.6e-5 and attnkit 1.1e-5 from the fp64 reference (fuzz seed
// 1102, case 68, peak 13.2).
export function ortTolerance(c) {
  const { atol = 0, rtol = 0 } = c.tolerance ?? anchorTolerance(c);
  return (name, expected) => ({ atol: atol * Math.max(1, peakOf(expected)), rtol });
}
