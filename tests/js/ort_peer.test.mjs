// attnkit: the ORT peer's host-dependent choices (js/targets/ort.js), checked against fixed cpuinfo texts so every
// host tests every branch, not only its own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ortNodeSaturatesU8S8 } from '../../js/targets/ort.js';

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
