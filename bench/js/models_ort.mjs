// attnkit bench: GroupQueryAttention at the shapes of shipped models (head sizes 64/96/128/256, 1-7 query heads per
// KV head, rotary, softcap and local window, fp32/fp16/int8/int4 caches, batch 4), attnkit native (the CLI's `bench`)
// next to onnxruntime-node 1.30 in one run: issue 3's N=16/Nk=8/H=128 shapes say little about a Phi-3 or a Gemma 2.
// Usage: node bench/js/models_ort.mjs [--quick] [--threads 1,2] [--iters N] [--rounds R] [--filter SUBSTR] [--cli PATH]
import { flag, hasFlag, nativeVsOrt } from './shapes.mjs';

const rand = (seed, low = -1, high = 1) => ({ random: { seed, low, high } });
const CACHE_DTYPE = { fp32: 'float32', fp16: 'float16', int8: 'int8', int4: 'uint8' };

// One case: B, N, Nk, H; S new tokens after P cached ones; cache fp32 | fp16 (then the query is fp16 too) | int8 |
// int4 (per-channel scales); rotary (split halves), softcap, window.
function modelCase(name, { B = 1, N, Nk, H, S, P, cache = 'fp32', rotary = false, softcap = 0, window = -1 }) {
  const T = P + S;
  const dtype = cache === 'fp16' ? 'float16' : 'float32';
  const inputs = {
    query: { dtype, shape: [B, S, N * H], ...rand(1) },
    key: { dtype, shape: [B, S, Nk * H], ...rand(2) },
    value: { dtype, shape: [B, S, Nk * H], ...rand(3) },
    seqlens_k: { dtype: 'int32', shape: [B], data: Array(B).fill(T - 1) },
    total_sequence_length: { dtype: 'int32', shape: [], data: [T] },
  };
  const attrs = { num_heads: N, kv_num_heads: Nk };
  const quantized = cache === 'int8' || cache === 'int4';
  if (quantized) {
    attrs.k_quant_type = attrs.v_quant_type = 'PER_CHANNEL';
    attrs.kv_cache_bit_width = cache === 'int8' ? 8 : 4;
    inputs.k_scale = { dtype: 'float32', shape: [1, Nk, 1, H], ...rand(4, 0.005, 0.01) };
    inputs.v_scale = { dtype: 'float32', shape: [1, Nk, 1, H], ...rand(5, 0.005, 0.01) };
  }
  if (rotary) {
    attrs.do_rotary = 1;
    inputs.cos_cache = { dtype, shape: [T + 16, H / 2], ...rand(11) };
    inputs.sin_cache = { dtype, shape: [T + 16, H / 2], ...rand(12) };
  }
  if (softcap) attrs.softcap = softcap;
  if (window > 0) attrs.local_window_size = window;
  // A quantized prompt still needs (empty) past tensors of the cache dtype, or ORT cannot bind the cache type.
  if (P > 0 || quantized) {
    const cd = CACHE_DTYPE[cache];
    const row = cache === 'int4' ? H / 2 : H;
    const random = quantized ? { seed: 6 } : rand(6).random;
    inputs.past_key = { dtype: cd, shape: [B, Nk, P, row], random };
    inputs.past_value = { dtype: cd, shape: [B, Nk, P, row], random: { ...random, seed: 7 } };
  }
  return { name, kind: S === 1 ? 'decode' : 'prefill', op: 'GroupQueryAttention', attrs, inputs,
    outputs: ['output', 'present_key', 'present_value'] };
}

const PHI3 = { N: 32, Nk: 32, H: 96, rotary: true };      // Phi-3 mini: multi-head, H = 96
const LLAMA1B = { N: 32, Nk: 8, H: 64, rotary: true };    // Llama 3.2 1B: 4 query heads per KV head
const QWEN05 = { N: 14, Nk: 2, H: 64, rotary: true };     // Qwen2.5 0.5B: 7 per KV head
const GEMMA2 = { N: 8, Nk: 4, H: 256, softcap: 50 };      // Gemma 2 2B: H = 256, logit softcap, local layers
const LLAMA8B = { N: 32, Nk: 8, H: 128, rotary: true };   // Llama 3 8B / Mistral 7B
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
  modelCase('llama8b decode B=4 T=1024', { ...LLAMA8B, B: 4, S: 1, P: 1023 }),
  modelCase('llama8b decode T=2048 fp16', { ...LLAMA8B, S: 1, P: 2047, cache: 'fp16', rotary: false }),
];
const filter = flag('--filter', '');
await nativeVsOrt(cases.filter((c) => c.name.includes(filter)), {
  threadList: flag('--threads', '1,2').split(',').map(Number),
  iters: Number(flag('--iters', quick ? 3 : 5)),
  rounds: Number(flag('--rounds', quick ? 1 : 3)),
  cli: flag('--cli', undefined),
});
