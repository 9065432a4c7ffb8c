// attnkit bench: QAttention on attnkit native (the CLI's `bench`) next to onnxruntime-node, same cases, same
// thread counts, in one run, printed as ratios. Issue 4's shapes: B=1, D=768, N=12, u8 x s8 per-column, prefill
// S in {128, 512} and a decode step S=1 with P=511. ORT times are its own run (its profiler), as in gqa_ort.mjs.
import { checkArgs, flag, hasFlag, nativeVsOrt, qattentionCase } from './shapes.mjs';

checkArgs('node bench/js/qattention_ort.mjs [--quick] [--threads 1,2] [--iters N] [--rounds R] [--cli PATH]');
const quick = hasFlag('--quick');

await nativeVsOrt([qattentionCase(128, 0), qattentionCase(512, 0), qattentionCase(1, 511)], {
  threadList: flag('--threads', '1,2').split(',').map(Number),
  iters: Number(flag('--iters', quick ? 3 : 10)),
  rounds: Number(flag('--rounds', quick ? 1 : 5)),
  cli: flag('--cli', undefined),
});
