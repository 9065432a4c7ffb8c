// attnkit: writes the QAttention case corpus, tests/cases/qattention/*.json (run: node scripts/gen-qattention-cases.mjs).
// The JSON files are the artifact every target reads; this script documents how each case was chosen and keeps them
// reproducible. Inputs are `random` (splitmix64, DESIGN.md). Every valid case was run on onnxruntime-node 1.30;
// every invalid one breaks exactly one rule and names the message attnkit must print (exit 2).
import { mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';

const dir = new URL('../tests/cases/qattention/', import.meta.url).pathname;
let seed = 4000;
const rnd = (dtype, shape, low, high) => ({ dtype, shape, random: low === undefined ? { seed: seed++ } : { seed: seed++, low, high } });
const dat = (dtype, shape, data) => ({ dtype, shape, data });
// vs ORT: the aim, 1e-5 relative, with an absolute floor of 1e-5 (outputs are O(1) convex combinations
// of V rows, so an element that cancels to ~0 is held to the scale of its neighbours, not to itself).
const TOL = { atol: 1e-5, rtol: 1e-5 };
// A fully masked row: every logit sits near mask_filter_value (-10000) where the fp32 grid is 2^-10 ~ 1e-3; attnkit
// and ORT both add the mask in fp32, but their scores may differ in the last bit and land on neighbouring grid
// points, which moves the softmax by up to ~1e-3 * max|V|.
const TOL_FULLY_MASKED = { atol: 2e-3, rtol: 1e-5 };
const cases = [];

// One case from a compact description: B, S, N, H, Di (default N*H: pruned when larger), P (past length; absent: no
// past), w ('int8' | 'uint8'), perColumn, izp, wzp, mask (a tensor), attrs, outputs, tol, note, mutate(case).
function qa(o) {
  const { name, B = 1, S = 4, N = 2, H = 8, w = 'int8' } = o;
  const D = N * H;
  const Di = o.Di ?? D;
  const C = 3 * D;
  // Scales keep projected values O(1): |a - za| ~ 128, |b - zb| ~ 74, summed over Di terms.
  const wmag = 1 / (74 * Math.sqrt(Di));
  const inputs = {
    input: rnd('uint8', [B, S, Di]),
    weight: rnd(w, [Di, C]),
    bias: rnd('float32', [C], -0.5, 0.5),
    input_scale: dat('float32', [], [1 / 128]),
    weight_scale: o.perColumn
      ? rnd('float32', [C], (o.negativeScales ? -1.5 : 0.5) * wmag, 1.5 * wmag)
      : dat('float32', [1], [wmag]),
  };
  if (o.mask) inputs.mask_index = o.mask;
  if (o.izp) inputs.input_zero_point = o.izp === true ? dat('uint8', [], [128]) : o.izp;
  if (o.wzp) {
    const [lo, hi] = w === 'int8' ? [-20, 20] : [108, 148];
    inputs.weight_zero_point = o.perColumn ? rnd(w, [C], lo, hi) : dat(w, [], [w === 'int8' ? 3 : 128]);
  }
  if (o.P !== undefined) inputs.past = rnd('float32', [2, B, N, o.P, H], -1, 1);
  const c = {
    name: `qattention/${name}`,
    op: 'QAttention',
    attrs: { num_heads: N, ...(o.attrs ?? {}) },
    inputs,
    outputs: o.outputs ?? (o.P !== undefined ? ['output', 'present'] : ['output']),
  };
  if (o.mutate) o.mutate(c);
  if (o.expectError) c.expect_error = o.expectError;
  else c.tolerance = o.tol ?? TOL;
  if (o.note) c.note = o.note;
  cases.push(c);
}
const i32 = (shape, data) => dat('int32', shape, data);

// ---- ORT's own test shapes (quantize_attention_op_test.cc): B=1/2, S=2, D=4, N=2, scale 0.1-ish, zp 128 / 1 ----
qa({ name: 'ort-test/no-mask', B: 1, S: 2, N: 2, H: 2, izp: true, wzp: true });
qa({ name: 'ort-test/mask-end-2', B: 1, S: 2, N: 2, H: 2, mask: i32([1], [2]) });
qa({ name: 'ort-test/mask-end-1-partial', B: 1, S: 2, N: 2, H: 2, mask: i32([1], [1]) });
qa({ name: 'ort-test/mask-end-3-beyond-sequence', B: 1, S: 2, N: 2, H: 2, mask: i32([1], [3]) });
qa({ name: 'ort-test/batch2-u8u8', B: 2, S: 2, N: 2, H: 2, w: 'uint8', izp: true, wzp: true });
qa({ name: 'ort-test/unidirectional-u8s8', B: 1, S: 2, N: 2, H: 2, attrs: { unidirectional: 1 } });
qa({ name: 'ort-test/unidirectional-u8u8', B: 1, S: 2, N: 2, H: 2, w: 'uint8', wzp: true, attrs: { unidirectional: 1 } });
qa({ name: 'ort-test/pruned-6-to-4', B: 1, S: 2, N: 2, H: 2, Di: 6, izp: true });
for (const w of ['uint8', 'int8']) {
  for (const perColumn of [false, true]) {
    qa({ name: `ort-test/past-state-${w === 'uint8' ? 'u8u8' : 'u8s8'}-${perColumn ? 'per-column' : 'per-tensor'}`,
      B: 2, S: 5, P: 15, N: 12, H: 64, w, perColumn, izp: true, wzp: true, attrs: { unidirectional: 1 } });
  }
}

// ---- projection: dtypes, zero points, per-column scales (incl. negative), pruned inputs ----
qa({ name: 'proj/s8-per-tensor-no-zp', B: 2, S: 5, N: 2, H: 16 });
qa({ name: 'proj/s8-per-column-zp', B: 2, S: 5, N: 2, H: 16, perColumn: true, izp: true, wzp: true });
qa({ name: 'proj/u8-per-tensor-zp', B: 2, S: 5, N: 2, H: 16, w: 'uint8', izp: true, wzp: true });
qa({ name: 'proj/u8-per-column-zp', B: 1, S: 7, N: 3, H: 8, w: 'uint8', perColumn: true, izp: true, wzp: true });
qa({ name: 'proj/u8-per-column-no-izp', B: 1, S: 7, N: 3, H: 8, w: 'uint8', perColumn: true, wzp: true });
qa({ name: 'proj/negative-weight-scales', B: 2, S: 3, N: 2, H: 16, perColumn: true, negativeScales: true, wzp: true });
qa({ name: 'proj/pruned-di-75-d-64', B: 2, S: 4, N: 4, H: 16, Di: 75, perColumn: true, izp: true, wzp: true });
qa({ name: 'proj/izp-random', B: 1, S: 3, N: 2, H: 8, izp: dat('uint8', [1], [77]), wzp: true });
qa({ name: 'proj/k-not-multiple-of-4', B: 1, S: 3, N: 1, H: 5, Di: 7, w: 'uint8', izp: true, wzp: true,
  note: 'D_i = 7 and head_size 5: tails of every kernel granule' });

// ---- head sizes (the attention kernels take multiples of 8: others are padded) ----
for (const H of [4, 12, 64, 80]) qa({ name: `heads/h${H}`, B: 2, S: 6, N: 2, H, perColumn: true, wzp: true });
qa({ name: 'heads/n12-h64-s64', B: 1, S: 64, N: 12, H: 64, perColumn: true, izp: true, wzp: true });

// ---- past / present ----
qa({ name: 'past/p15-s5-n2', B: 2, S: 5, P: 15, N: 2, H: 16, izp: true, wzp: true });
qa({ name: 'past/decode-p31', B: 2, S: 1, P: 31, N: 4, H: 32, perColumn: true, wzp: true });
qa({ name: 'past/decode-p31-unidirectional-no-op', B: 2, S: 1, P: 31, N: 4, H: 32, attrs: { unidirectional: 1 },
  note: 'a single query token is never restricted' });
qa({ name: 'past/empty-past', B: 2, S: 3, P: 0, N: 2, H: 8 });
qa({ name: 'past/present-not-requested-without-past', B: 1, S: 3, N: 2, H: 8, outputs: ['output'] });

// ---- every mask spelling ----
qa({ name: 'mask/end-positions', B: 3, S: 4, P: 3, N: 2, H: 8, mask: i32([3], [2, 7, 5]) });
qa({ name: 'mask/end-beyond-total-clamped', B: 2, S: 4, N: 2, H: 8, mask: i32([2], [100, 3]) });
qa({ name: 'mask/end-zero-fully-masked-row', B: 2, S: 3, N: 2, H: 8, mask: i32([2], [0, 2]), tol: TOL_FULLY_MASKED,
  note: 'batch 0 masks every key: the finite mask value makes it the unmasked softmax up to fp32 rounding' });
qa({ name: 'mask/end-start', B: 2, S: 4, P: 3, N: 2, H: 8, mask: i32([4], [6, 7, 2, 1]) });
qa({ name: 'mask/end-start-negative-start', B: 2, S: 4, N: 2, H: 8, mask: i32([4], [4, 3, -5, 1]) });
qa({ name: 'mask/end-start-start-beyond-total', B: 2, S: 3, P: 2, N: 2, H: 8, mask: i32([4], [5, 4, 20, 1]),
  tol: TOL_FULLY_MASKED, note: 'start clamped to T: batch 0 masks every key' });
qa({ name: 'mask/key-mask-2d', B: 2, S: 3, P: 4, N: 2, H: 8, mask: i32([2, 7], [1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 2, -1, 1]),
  note: 'values > 0 keep, <= 0 mask' });
qa({ name: 'mask/query-key-mask-3d', B: 1, S: 3, P: 1, N: 2, H: 8, mask: i32([1, 3, 4], [1, 0, 1, 1, 1, 1, 0, 1, 0, 0, 1, 1]) });
qa({ name: 'mask/dummy-b-1-ignored', B: 2, S: 3, N: 2, H: 8, mask: i32([2, 1], [0, 0]) });
qa({ name: 'mask/dummy-1-1-ignored', B: 2, S: 3, N: 2, H: 8, mask: i32([1, 1], [0]) });
qa({ name: 'mask/filter-value-minus-1', B: 2, S: 4, N: 2, H: 8, mask: i32([2], [2, 3]), attrs: { mask_filter_value: -1 },
  note: 'a small filter value leaves masked keys visible, so the value itself is tested' });
qa({ name: 'mask/filter-value-minus-1e30-fully-masked', B: 2, S: 3, N: 2, H: 8, mask: i32([2], [0, 2]),
  attrs: { mask_filter_value: -1e30 }, note: 'all logits round to -1e30: a uniform softmax over every key' });

// ---- unidirectional ----
qa({ name: 'uni/prompt-s6', B: 2, S: 6, N: 2, H: 16, attrs: { unidirectional: 1 } });
qa({ name: 'uni/past-p4-s6', B: 2, S: 6, P: 4, N: 2, H: 16, attrs: { unidirectional: 1 } });
qa({ name: 'uni/with-end-mask', B: 2, S: 3, P: 2, N: 2, H: 8, mask: i32([2], [1, 5]), attrs: { unidirectional: 1 } });
qa({ name: 'uni/mask-filter-value-ignored-for-causal', B: 2, S: 3, P: 2, N: 2, H: 8, mask: i32([2], [1, 5]),
  attrs: { unidirectional: 1, mask_filter_value: -5 }, note: 'the causal part is -FLT_MAX whatever mask_filter_value is' });
qa({ name: 'uni/3d-mask', B: 1, S: 3, P: 1, N: 2, H: 8, mask: i32([1, 3, 4], [1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1]),
  attrs: { unidirectional: 1 } });

// ---- scale ----
qa({ name: 'scale/explicit-0.3', B: 2, S: 3, N: 2, H: 8, attrs: { scale: 0.3 } });
qa({ name: 'scale/negative', B: 2, S: 3, N: 2, H: 8, attrs: { scale: -0.5 } });
qa({ name: 'scale/zero-means-default', B: 2, S: 3, N: 2, H: 8, attrs: { scale: 0 } });

// ---- validation: each breaks one rule ----
const bad = (name, expectError, mutate, extra = {}) =>
  qa({ name: `invalid/${name}`, B: 2, S: 3, N: 2, H: 4, expectError, mutate, ...extra });
bad('num-heads-missing', 'num_heads: required attribute', (c) => { delete c.attrs.num_heads; });
bad('num-heads-zero', 'num_heads: must be positive', (c) => { c.attrs.num_heads = 0; });
bad('hidden-not-divisible-by-heads', 'num_heads: hidden_size 8 must be divisible by num_heads 3', (c) => { c.attrs.num_heads = 3; });
bad('do-rotary', 'do_rotary: only 0 is supported', (c) => { c.attrs.do_rotary = 1; });
bad('past-present-share-buffer', 'past_present_share_buffer: only 0 is supported', (c) => { c.attrs.past_present_share_buffer = 1; });
bad('unidirectional-2', 'unidirectional: must be 0 or 1', (c) => { c.attrs.unidirectional = 2; });
bad('unknown-attribute', 'causal', (c) => { c.attrs.causal = 1; });
bad('input-int8', 'input: must be uint8, got int8', (c) => { c.inputs.input.dtype = 'int8'; });
bad('input-rank-2', 'input: must have rank 3', (c) => { c.inputs.input.shape = [6, 8]; });
bad('weight-missing', 'weight: required input is missing', (c) => { delete c.inputs.weight; });
bad('weight-float', 'weight: must be int8 or uint8', (c) => { c.inputs.weight.dtype = 'float32'; });
bad('weight-rows-mismatch', 'weight: dim 0 must equal input_hidden_size', (c) => { c.inputs.weight.shape = [7, 24]; });
bad('weight-columns-not-3d', 'weight: dim 1 must be 3 * hidden_size', (c) => { c.inputs.weight.shape = [8, 25]; c.inputs.bias.shape = [25]; });
bad('bias-length', 'bias: must be (3 * hidden_size)', (c) => { c.inputs.bias.shape = [23]; });
bad('bias-bfloat16', 'bias: must be float32 or float16, got bfloat16', (c) => { c.inputs.bias.dtype = 'bfloat16'; });
bad('input-scale-two-elements', 'input_scale: must be a scalar or one element', (c) => { c.inputs.input_scale = dat('float32', [2], [0.1, 0.1]); });
bad('weight-scale-wrong-length', 'weight_scale: must be a scalar, one element or (3 * hidden_size)', (c) => { c.inputs.weight_scale = rnd('float32', [8]); });
bad('input-zero-point-int8', 'input_zero_point: must be uint8', (c) => { c.inputs.input_zero_point = dat('int8', [], [1]); });
bad('weight-zero-point-dtype', 'weight_zero_point: must be int8', (c) => { c.inputs.weight_zero_point = dat('uint8', [], [1]); });
bad('weight-zero-point-shape', 'weight_zero_point: must be a scalar, one element or (3 * hidden_size)', (c) => { c.inputs.weight_zero_point = rnd('int8', [2, 12]); });
bad('past-wrong-heads', 'past: must be (2, batch=2, num_heads=2', (c) => { c.inputs.past = rnd('float32', [2, 2, 3, 3, 4]); c.outputs = ['output', 'present']; });
bad('past-without-present', 'present: must be requested when past is given', (c) => { c.inputs.past = rnd('float32', [2, 2, 2, 3, 4]); c.outputs = ['output']; });
bad('mask-int64', 'mask_index: must be int32', (c) => { c.inputs.mask_index = dat('int64', [2], [1, 1]); });
bad('mask-1d-length-3', 'mask_index: 1D mask must have batch_size', (c) => { c.inputs.mask_index = i32([3], [1, 1, 1]); });
bad('mask-1d-3b-plus-2', 'mask_index: 1D mask must have batch_size', (c) => { c.inputs.mask_index = i32([8], [1, 2, 3, 0, 0, 0, 0, 0]); },
  { note: 'ORT 1.30 CPU accepts this CUDA-only (cumulative lengths) spelling with undocumented results; the kernel card rejects it' });
bad('mask-negative-end', 'mask_index: end position -1 at index 0 is negative', (c) => { c.inputs.mask_index = i32([2], [-1, 2]); });
bad('mask-2d-wrong-total', 'mask_index: 2D mask must be (batch_size, total_sequence_length)', (c) => { c.inputs.mask_index = i32([2, 4], [1, 1, 1, 1, 1, 1, 1, 1]); });
bad('mask-2d-one-row-for-batch2', 'mask_index: 2D mask must be (batch_size, total_sequence_length)', (c) => { c.inputs.mask_index = i32([1, 3], [1, 0, 1]); });
bad('mask-3d-wrong', 'mask_index: 3D mask must be (batch_size, sequence_length, total_sequence_length)', (c) => { c.inputs.mask_index = rnd('int32', [1, 3, 3], 0, 1); });
bad('mask-4d-megatron', 'mask_index: 4D (Megatron) masks are not supported', (c) => { c.inputs.mask_index = rnd('int32', [2, 1, 3, 3], 0, 1); });
bad('mask-scalar', 'mask_index: must be 1D (B) or (2B), 2D (B, T) or 3D (B, S, T)', (c) => { c.inputs.mask_index = i32([], [1]); });
bad('unknown-input', 'attention_bias: not an input of QAttention', (c) => { c.inputs.attention_bias = rnd('float32', [1]); });

// mask_filter_value = -inf, spelled "-Infinity" (JSON has no infinities; appended last so earlier cases keep their seeds):
// masked keys get probability 0 exactly.
qa({ name: 'mask/filter-value-minus-infinity', B: 2, S: 4, N: 2, H: 8, mask: i32([2], [2, 3]),
  attrs: { mask_filter_value: '-Infinity' }, note: 'masked keys weigh exactly 0' });
qa({ name: 'mask/filter-value-minus-infinity-fully-masked', B: 2, S: 3, N: 2, H: 8, mask: i32([2], [0, 2]),
  attrs: { mask_filter_value: '-Infinity' } });
// A (B, 1) mask over a total of 1 token is the (B, T) mask, not the placeholder: ORT masks batch 0's one key (its
// row is NaN under a -inf filter value).
qa({ name: 'mask/b-1-is-the-mask-when-the-total-is-1', B: 2, S: 1, N: 2, H: 8, mask: i32([2, 1], [0, 1]),
  attrs: { mask_filter_value: '-Infinity' } });

// float16 bias, scales and past (appended last): ORT's CPU EP runs its float32 kernel between casts, and so does
// attnkit, so both round the same float32 results; those differ by at most 1e-5 relative (TOL), so the float16
// outputs land at most one float16 step (2^-10 relative) apart.
const TOL_FLOAT16 = { atol: 1e-3, rtol: 1e-3 };
const toFloat16 = (c) => {
  for (const k of ['bias', 'input_scale', 'weight_scale', 'past']) if (c.inputs[k]) c.inputs[k].dtype = 'float16';
};
qa({ name: 'float16/prompt', B: 2, S: 5, N: 2, H: 16, izp: true, tol: TOL_FLOAT16, mutate: toFloat16 });
qa({ name: 'float16/past-mask-unidirectional-per-column', B: 2, S: 3, P: 5, N: 2, H: 8, perColumn: true, wzp: true,
  mask: i32([2], [8, 6]), attrs: { unidirectional: 1 }, tol: TOL_FLOAT16, mutate: toFloat16 });
bad('float16-scale-unlike-bias', 'input_scale: must be float16, got float32 (like bias)', (c) => { c.inputs.bias.dtype = 'float16'; });

mkdirSync(dir, { recursive: true });
for (const f of readdirSync(dir)) if (f.endsWith('.json')) unlinkSync(`${dir}${f}`);
for (const c of cases) {
  const file = `${c.name.replace(/^qattention\//, '').replace(/\//g, '--')}.json`;
  writeFileSync(`${dir}${file}`, `${JSON.stringify(c, null, 1)}\n`);
}
console.log(`wrote ${cases.length} cases (${cases.filter((c) => !c.expect_error).length} valid) to ${dir}`);
