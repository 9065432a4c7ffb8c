// attnkit bench: GroupQueryAttention at the shapes of shipped models (head sizes 64/96/128/256, 1-7 query heads per
// KV head, rotary, softcap and local window, window-sized caches, QK norm, fp32/fp16/int8/int4 caches, batch 4,
// speculative decoding's check of drafted tokens),
// attnkit native (the CLI's `bench`) next to onnxruntime-node in one run: issue 3's N=16/Nk=8/H=128 shapes say
// little about a Phi-3 or a Gemma 2.
import { checkArgs, flag, gqaShapeCase as modelCase, hasFlag, nativeVsOrt } from './shapes.mjs';

checkArgs('node bench/js/models_ort.mjs [--quick] [--threads 1,2] [--iters N] [--rounds R] [--filter SUBSTR] ' +
  '[--cli PATH]');

const PHI3 = { N: 32, Nk: 32, H: 96, rotary: true };      // Phi-3 mini: multi-head, H = 96
const LLAMA1B = { N: 32, Nk: 8, H: 64, rotary: true };    // Llama 3.2 1B: 4 query heads per KV head
const QWEN05 = { N: 14, Nk: 2, H: 64, rotary: true };     // Qwen2.5 0.5B: 7 per KV head
const GEMMA2 = { N: 8, Nk: 4, H: 256, softcap: 50 };      // Gemma 2 2B: H = 256, logit softcap, local layers
const LLAMA8B = { N: 32, Nk: 8, H: 128, rotary: true };   // Llama 3 8B / Mistral 7B
// Qwen3 0.6B: the QK RMSNorm fused into the op (q/k_norm_weight; ORT's CPU EP refuses it and is timed without it).
const QWEN3 = { N: 16, Nk: 8, H: 128, rotary: true, qkNorm: true };
// Gemma 3 1B-style local layer: a 1024-token window in a window-sized cache (sliding_window_cache = 1).
const GEMMA3_LOCAL = { N: 4, Nk: 1, H: 256, rotary: true, window: 1024, windowCache: 1024 };
const quick = hasFlag('--quick');
const cases = [
  modelCase('phi3 decode T=2048 fp32', { ...PHI3, S: 1, P: 2047 }),
  modelCase('phi3 decode T=2048 int4', { ...PHI3, S: 1, P: 2047, cache: 'int4' }),
  modelCase('phi3 prefill S=512 fp32', { ...PHI3, S: 512, P: 0 }),
  modelCase('llama1b decode T=2048 int4', { ...LLAMA1B, S: 1, P: 2047, cache: 'int4' }),
  modelCase('llama1b prefill S=512 fp32', { ...LLAMA1B, S: 512, P: 0 }),
  modelCase('qwen0.5b decode T=4096 fp32', { ...QWEN05, S: 1, P: 4095 }),
  modelCase('qwen0.5b decode T=4096 int8', { ...QWEN05, S: 1, P: 4095, cache: 'int8' }),
  modelCase('gemma2 decode T=2048 window', { ...GEMMA2, S: 1, P: 2047, window: 1024 }),
  modelCase('gemma2 prefill S=512', { ...GEMMA2, S: 512, P: 0 }),
  modelCase('llama8b decode T=4096 int8', { ...LLAMA8B, S: 1, P: 4095, cache: 'int8' }),
  modelCase('llama8b chunk S=128 P=1024', { ...LLAMA8B, S: 128, P: 1024 }),
  // Speculative decoding: the target model checks 4 drafted tokens in one call.
  modelCase('llama8b verify S=4 T=4096', { ...LLAMA8B, S: 4, P: 4092 }),
  modelCase('llama8b verify S=4 T=4096 int4', { ...LLAMA8B, S: 4, P: 4092, cache: 'int4' }),
  modelCase('llama8b decode B=4 T=1024', { ...LLAMA8B, B: 4, S: 1, P: 1023 }),
  modelCase('llama8b decode T=2048 fp16', { ...LLAMA8B, S: 1, P: 2047, cache: 'fp16', rotary: false }),
  modelCase('qwen3 decode T=4096 qk-norm int8', { ...QWEN3, S: 1, P: 4095, cache: 'int8' }),
  modelCase('qwen3 prefill S=512 qk-norm', { ...QWEN3, S: 512, P: 0 }),
  modelCase('gemma3 local decode T=8192 window cache fp32', { ...GEMMA3_LOCAL, S: 1, P: 8191 }),
  modelCase('gemma3 local decode T=8192 window cache int8', { ...GEMMA3_LOCAL, S: 1, P: 8191, cache: 'int8' }),
  modelCase('gemma3 local chunk S=256 T=8192 window cache', { ...GEMMA3_LOCAL, S: 256, P: 7936 }),
];
const filter = flag('--filter', '');
await nativeVsOrt(cases.filter((c) => c.name.includes(filter)), {
  threadList: flag('--threads', '1,2').split(',').map(Number),
  iters: Number(flag('--iters', quick ? 3 : 5)),
  rounds: Number(flag('--rounds', quick ? 1 : 3)),
  cli: flag('--cli', undefined),
});
