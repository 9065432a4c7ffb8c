// attnkit: the ORT peer's host-dependent choices (js/targets/ort.js), checked against fixed cpuinfo texts so every
// host tests every branch, not only its own; and its own-time measurement (ORT's profiler), which the benches judge by.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { gqaShapeCase } from '../../bench/js/shapes.mjs';
import { ortNodeSaturatesU8S8, runOrt } from '../../js/targets/ort.js';

const cpuinfo = (flags) => `processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: ${flags}\nbogomips\t: 4890.80\n`;

test('onnxruntime-node u8 x s8 saturates on x86 with AVX2 but no VNNI (Zen 3)', () => {
  assert.equal(ortNodeSaturatesU8S8({ arch: 'x64', cpuinfo: cpuinfo('fpu sse2 ssse3 fma avx2 bmi2') }), true);
});

test('it is exact with AVX512-VNNI or AVX-VNNI', () => {
  assert.equal(ortNodeSaturatesU8S8({ arch: 'x64', cpuinfo: cpuinfo('avx2 avx512f avx512bw avx512_vnni') }), false);
  assert.equal(ortNodeSaturatesU8S8({ arch: 'x64', cpuinfo: cpuinfo('avx2 avx_vnni') }), false);
});

test('it is exact off x86, and unknown flags do not claim saturation', () => {
  assert.equal(ortNodeSaturatesU8S8({ arch: 'arm64', cpuinfo: cpuinfo('avx2') }), false);
  assert.equal(ortNodeSaturatesU8S8({ arch: 'x64', cpuinfo: 'processor\t: 0\n' }), false);
});

test('this host is classified from its own /proc/cpuinfo without throwing', () => {
  assert.equal(typeof ortNodeSaturatesU8S8(), 'boolean');
});

// The profile files go to os.tmpdir(), which follows TMPDIR: a folder of the test's own shows what is left behind.
async function withTmpdir(fn) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-ort-own-'));
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    await fn();
    // (onnxruntime-node itself keeps a `.ses` file there.)
    const left = fs.readdirSync(dir).filter((name) => name.startsWith('attnkit-ort-profile-'));
    assert.deepEqual(left, [], 'profile folders left behind');
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('ownTime: ORT\'s own time of each timed call, within the call from JS, and nothing left behind', async () => {
  const c = gqaShapeCase('decode T=512', { N: 8, Nk: 4, H: 64, S: 1, P: 511 });
  await withTmpdir(async () => {
    const r = await runOrt(c, { repeat: 5, warmup: 2, ownTime: true });
    assert.ok(r.ownMs > 0 && r.ownMs <= r.timeMs, `own ${r.ownMs} ms, from JS ${r.timeMs} ms`);
    const budgeted = await runOrt(c, { repeat: 50, warmup: 0, budgetMs: 0, ownTime: true });
    assert.ok(budgeted.ownMs > 0 && budgeted.ownMs <= budgeted.timeMs);
    // Refused when the session is created (no kernel for int8 queries), and when it runs (heads not divisible).
    const int8Query = { ...c,
      inputs: { ...c.inputs, query: { dtype: 'int8', shape: [1, 1, 512], random: { seed: 1 } } } };
    await assert.rejects(runOrt(int8Query, { ownTime: true }));
    await assert.rejects(runOrt({ ...c, attrs: { ...c.attrs, num_heads: 6 } }, { ownTime: true }));
  });
  await assert.rejects(runOrt(c, { backend: 'web', ownTime: true }), /ownTime needs onnxruntime-node/);
});
