// attnkit: `npm run bench`'s summary of issue 3's targets (bench/js/targets.mjs). The benchmarks it reads must still
// exist under the names it looks up (a renamed one would turn a verdict into "not run" without anyone noticing), and
// its percentages and verdicts must follow from the rows it is given.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { GQA_ROWS, KERNEL_ROWS, benchmarkRows, issue3Targets } from '../../bench/js/targets.mjs';

const benchDir = fileURLToPath(new URL('../../build/native/bench/', import.meta.url));
const listed = (binary) => execFileSync(`${benchDir}${binary}`, ['--benchmark_list_tests'], { encoding: 'utf8' })
  .split('\n');

test('targets.mjs reads benchmarks that gqa_bench and kernels_bench register', () => {
  const gqa = new Set(listed('gqa_bench'));
  for (const name of GQA_ROWS) assert.ok(gqa.has(name), `gqa_bench has no ${name}`);
  const kernels = listed('kernels_bench');
  for (const pattern of KERNEL_ROWS) assert.ok(kernels.some((n) => pattern.test(n)), `kernels_bench has no ${pattern}`);
});

test('targets.mjs: percentages of this run\'s limits, ratios to ORT, and what did not run', () => {
  const g = (name, counters) => ({ name, run_type: 'iteration', ...counters });
  const gqaJson = { benchmarks: [
    g('BM_GQA_Decode_16x8/T:4096/cache:0/threads:2/mode:3/real_time', { KV_GBs: 30, read_GBs: 40 }),
    g('BM_GQA_Decode_16x8/T:4096/cache:2/threads:2/mode:3/real_time', { KV_GBs: 20, read_GBs: 40 }),
    g('BM_GQA_Decode_16x8/T:4096/cache:0/threads:1/mode:3/real_time', { KV_GBs: 20 }),  // no bandwidth beside it
    g('BM_GQA_Prefill/T:2048/cache:0/threads:1/flash:1/real_time', { GFLOPs: 150, fma_peak_GFLOPs: 200 }),
    g('BM_GQA_Prefill/T:2048/cache:0/threads:2/flash:1/real_time', { GFLOPs: 260, fma_peak_GFLOPs: 400 }),
    g('BM_GQA_Prefill/T:4096/cache:0/threads:1/flash:0/real_time', { scratch_MiB: 136 }),
    g('BM_GQA_Prefill/T:4096/cache:0/threads:1/flash:1/real_time', { scratch_MiB: 0.82 }),
    { ...g('BM_GQA_Decode_16x8/T:4096/cache:1/threads:2/mode:3/real_time', { KV_GBs: 39, read_GBs: 40 }),
      run_type: 'aggregate' },
  ] };
  const kernelsJson = { benchmarks: [
    g('BM_QKGemm/avx2/s8/M:1/N:512/K:128', { 'GFLOP/s': 60e9 }),
    g('BM_QKGemm/avx512/s8/M:1/N:512/K:128', { 'GFLOP/s': 120e9 }),
    g('BM_QKGemm/avx512/s8_approx_vnni/M:1/N:512/K:128', { 'GFLOP/s': 190e9 }),  // not the exact contract
    g('BM_FmaPeak/avx512', { 'GFLOP/s': 200e9 }),
    g('BM_FmaPeak/avx2', { 'GFLOP/s': 100e9 }),
  ] };
  const ort = [
    { name: 'gqa/prefill T=2048 fp32', threads: 1, ratio: 1.4, spread: [1.3, 1.6], attnkitMs: 100, ortJsMs: 150 },
    { name: 'gqa/decode T=4096 int8', threads: 2, ratio: 3.5, spread: [3.1, 3.9] },
    { name: 'gqa/decode T=2048 int8', threads: 2, ratio: 1.0, spread: [1, 1] },  // no target at T=2048
  ];
  const rows = issue3Targets({ kernels: benchmarkRows(kernelsJson), gqa: benchmarkRows(gqaJson), ort });
  const byWhat = Object.fromEntries(rows.map((r) => [r.what, r]));
  const check = (what, shown, ok) => {
    assert.ok(byWhat[what], `no row "${what}"`);
    assert.deepEqual([byWhat[what].shown, byWhat[what].ok], [shown, ok], what);
  };
  check('exact fp32 x int8 QK, M=1 N=512 K=128: % of one core\'s FMA peak', '60%', true);
  check('decode T=4096 fp32, 2 thread(s): % of the read bandwidth', '75%', true);
  check('decode T=4096 int4, 2 thread(s): % of the read bandwidth', '50%', false);
  check('decode T=4096 int8, 2 thread(s): % of the read bandwidth', 'not run', null);  // only an aggregate row
  check('decode T=4096 fp32, 1 thread(s): % of the read bandwidth', 'not run', null);
  check('prefill fp32 S=T=2048, 1 thread(s): % of the FMA peak', '75%', true);
  check('prefill fp32 S=T=2048, 2 thread(s): % of the FMA peak', '65%', false);
  check('flash peak scratch at S=T=4096 / the naive path\'s', '1/166', true);
  check('prefill T=2048 fp32, 1 thread(s): ORT / attnkit', '1.40x', false);
  assert.equal(byWhat['prefill T=2048 fp32, 1 thread(s): ORT / attnkit'].detail, 'rounds 1.30-1.60; session.run 1.50x');
  check('decode T=4096 int8, 2 thread(s): ORT / attnkit', '3.50x', true);
  check('decode T=4096 int4, 1 thread(s): ORT / attnkit', 'not run', null);
  assert.equal(rows.length, 18);  // QK, six decode, two prefill, scratch, eight against ORT
});
