// attnkit tests: how far an fp32/fp16/bf16 result may sit from the fp64 reference (`attnkit run --reference`), per op.
// Shared by the corpus tests and the seeded fuzz test, so every case, hand-written or generated, meets one rule.

export function peakOf(tensor) {
  let peak = 0;
  for (const v of tensor.data) peak = Math.max(peak, Math.abs(Number(v)));
  return peak;
}

// GroupQueryAttention:
// - float32: the bound, 2e-6 relative. Attention outputs are convex combinations of V rows, so their rounding
//   error scales with max|V| (and max|output|), not with the element itself: where an output cancels to ~0 a purely
//   elementwise relative bound is meaningless, so the absolute floor is 2e-6 times the tensor's largest magnitude.
// - float16 / bfloat16: the spec's accuracy anchors (§5: fp16 rtol = atol = 1e-2; bf16 rtol 5e-2, atol 1e-2); both
//   cover the single output rounding (2^-11 resp. 2^-8 relative) plus the rounding of cached K/V.
// - quantized caches: the integers themselves are checked by js/compare.js (one step on ties only); the float
//   outputs follow the query dtype's rule above, since the reference dequantizes the very same integers.
export function gqaReferenceTolerance(c) {
  return (name, expected) => {
    const dtype = c.inputs.query.dtype;
    if (dtype === 'float16') return { atol: 1e-2, rtol: 1e-2 };
    if (dtype === 'bfloat16') return { atol: 1e-2, rtol: 5e-2 };
    return { atol: 2e-6 * peakOf(expected), rtol: 2e-6 };
  };
}

// QAttention: the projection is exact in both, then fp32 dequantization (2^-24 relative), fp32 scores over H <= 80
// terms, the shared exp polynomial (< 2 ulp) and a convex combination of V rows, so the error scales with the
// tensor's largest magnitude: 1e-5 relative with an absolute floor of 1e-5 * max|expected|. present holds past rows
// bit for bit and fp32 projections (<= 2 roundings of O(1) terms), far inside the same bound. Cases with a fully
// masked row carry their own wider tolerance (see scripts/gen-qattention-cases.mjs): the reference models ORT's fp32
// mask addition, but a 1-ulp score difference can still pick the neighbouring 2^-10 grid point.
export function qattentionReferenceTolerance(c) {
  return (name, expected) => {
    const peak = peakOf(expected);
    const base = { atol: 1e-5 * peak, rtol: 1e-5 };
    return c.tolerance && c.tolerance.atol > 1e-4 ? { atol: c.tolerance.atol * Math.max(peak, 1), rtol: 1e-5 } : base;
  };
}

// Against ORT: the case's anchor (the spec's 1e-5 for fp32), with its absolute part scaled by the tensor's largest
// magnitude once that exceeds 1. Both sides round in fp32 and every output is a convex combination of V rows, so
// their difference grows with max|V| as the reference bounds above do: QAttention over uncentred activations
// projects V rows of magnitude 10+, where ORT sat 1.6e-5 and attnkit 1.1e-5 from the fp64 reference (fuzz seed
// 1102, case 68, peak 13.2).
export function ortTolerance(c) {
  return (name, expected) => ({ ...c.tolerance, atol: c.tolerance.atol * Math.max(1, peakOf(expected)) });
}
