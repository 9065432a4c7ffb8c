// attnkit bench: GroupQueryAttention on attnkit native (the CLI's `bench`) next to onnxruntime-node,
// same cases, same thread counts, in one run, printed as ratios. Shapes are issue 3's (N=16, Nk=8, H=128).
import { writeFileSync } from 'node:fs';
import { checkArgs, flag, gqaCase, hasFlag, nativeVsOrt } from './shapes.mjs';

checkArgs('node bench/js/gqa_ort.mjs [--quick] [--threads 1,2] [--iters N] [--rounds R] [--cli PATH] [--json FILE]');

const quick = hasFlag('--quick');
const cases = [];
for (const T of quick ? [512] : [512, 2048]) for (const cache of ['fp32', 'int8', 'int4']) cases.push(gqaCase('prefill', T, 0, cache));
for (const T of quick ? [2048] : [512, 2048, 4096]) for (const cache of ['fp32', 'int8', 'int4']) cases.push(gqaCase('decode', 1, T - 1, cache));
const rows = await nativeVsOrt(cases, {
  threadList: flag('--threads', '1,2').split(',').map(Number),
  iters: Number(flag('--iters', quick ? 3 : 10)),
  rounds: Number(flag('--rounds', quick ? 1 : 3)),
  cli: flag('--cli', undefined),
});
const jsonOut = flag('--json', null);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(rows, null, 1));  // bench/js/targets.mjs reads it
