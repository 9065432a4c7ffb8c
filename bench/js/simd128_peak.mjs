// attnkit bench: the fp32 rate of this engine's WebAssembly SIMD128 on one thread, beside the prompts it bounds. No
// FMA there (relaxed SIMD's differs by engine), so 12 independent f32x4 multiply-then-add chains, as many as x86's 16
// vector registers hold (V8 here: 8 chains 30, 10: 36, 12: 41, 13: 40 GFLOP/s). The module is assembled byte by
// byte so that no compiler folds a chain away (LLVM folded five of twelve whose first step was a fixed point).
const CHAINS = 12;

function leb(n) { // unsigned LEB128
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}
const f32x4 = (x) => [0xfd, 0x0c, ...new Uint8Array(new Float32Array([x, x, x, x]).buffer)];
const MUL = [0xfd, ...leb(0xe6)], ADD = [0xfd, ...leb(0xe4)];
const get = (i) => [0x20, i], set = (i) => [0x21, i];

// (func (param $n i32) (result f32)): locals 1..12 the chains, 13 the factor, 14 the addend.
function moduleBytes() {
  const M = CHAINS + 1, C = CHAINS + 2;
  const body = [1, CHAINS + 2, 0x7b]; // one run of 14 v128 locals
  for (let a = 1; a <= CHAINS; a++) body.push(...f32x4(1 + a / 10), ...set(a));
  body.push(...f32x4(0.9999999), ...set(M), ...f32x4(1e-7), ...set(C));
  body.push(0x02, 0x40, 0x03, 0x40, ...get(0), 0x45, 0x0d, 1); // block, loop, br_if $n == 0 out
  for (let a = 1; a <= CHAINS; a++) body.push(...get(a), ...get(M), ...MUL, ...get(C), ...ADD, ...set(a));
  body.push(...get(0), 0x41, 1, 0x6b, ...set(0), 0x0c, 0, 0x0b, 0x0b); // $n -= 1, br loop, end, end
  body.push(...get(1));
  for (let a = 2; a <= CHAINS; a++) body.push(...get(a), ...ADD);
  body.push(0xfd, 0x1f, 0, 0x0b); // f32x4.extract_lane 0: the result keeps the chains alive
  const section = (id, bytes) => [id, ...leb(bytes.length), ...bytes];
  return new Uint8Array([0x00, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    ...section(1, [1, 0x60, 1, 0x7f, 1, 0x7d]), ...section(3, [1, 0]),
    ...section(7, [1, 4, ...new TextEncoder().encode('peak'), 0, 0]),
    ...section(10, [1, ...leb(body.length), ...body])]);
}

// GFLOP/s (a multiply and an add per lane and step): the best of `rounds` runs of `iters` steps.
export async function simd128PeakGflops({ iters = 10_000_000, rounds = 5 } = {}) {
  const { instance } = await WebAssembly.instantiate(moduleBytes());
  const { peak } = instance.exports;
  peak(iters / 10); // past V8's baseline tier
  let best = Infinity;
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    peak(iters);
    best = Math.min(best, performance.now() - t0);
  }
  return (iters * CHAINS * 4 * 2) / (best * 1e6);
}
