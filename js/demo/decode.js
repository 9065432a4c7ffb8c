// attnkit demo: the decode timer, run in a module worker (decode_worker.js) as an application runs attnkit: there the
// threaded build's waits block, where a page's main thread can only spin. One attention layer of a model through a
// KV cache, the first step checked against the stateless op.

// Deterministic filler (an LCG): float inputs in [-1, 1), cache bytes over their whole range.
function filled(Type, length, seed) {
  const out = new Type(length);
  let state = seed >>> 0;
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    out[i] = Type === Float32Array ? state / 2147483648 - 1 : state >>> 24;
  }
  return out;
}

function sameBits(a, b) {
  const [x, y] = [a, b].map((f) => new Uint32Array(f.buffer, f.byteOffset, f.length));
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

export const DECODE_WARMUP = 8, DECODE_STEPS = 64;
const CACHE_ARRAYS = { float32: Float32Array, int8: Int8Array, uint8: Uint8Array };

// One attention layer: a cache loaded with `context` tokens (random: the time does not depend on the values), one
// step checked against the stateless op over the same past, then DECODE_STEPS timed steps (after DECODE_WARMUP
// untimed ones) into a reused array.
export async function runDecode(attnkit, { N, Nk, H, layers, dtype, context }) {
  const bits = dtype === 'int8' ? 8 : dtype === 'uint8' ? 4 : 0;
  const attrs = { num_heads: N, kv_num_heads: Nk };
  if (bits) {
    Object.assign(attrs, { k_quant_type: 'PER_CHANNEL', v_quant_type: 'PER_CHANNEL', kv_cache_bit_width: bits });
  }
  const row = bits === 4 ? H / 2 : H;
  const tensor = (data, shape) => ({ data, shape });
  const pastShape = [1, Nk, context, row];
  const past = {
    past_key: tensor(filled(CACHE_ARRAYS[dtype], Nk * context * row, 1), pastShape),
    past_value: tensor(filled(CACHE_ARRAYS[dtype], Nk * context * row, 2), pastShape),
  };
  const scale = tensor(new Float32Array(Nk * H).fill(bits === 4 ? 0.1 : 0.01), [Nk * H]);
  const scales = bits ? { k_scale: scale, v_scale: scale } : {};
  const token = (seed) => ({
    query: tensor(filled(Float32Array, N * H, seed), [1, 1, N * H]),
    key: tensor(filled(Float32Array, Nk * H, seed + 1), [1, 1, Nk * H]),
    value: tensor(filled(Float32Array, Nk * H, seed + 2), [1, 1, Nk * H]),
    ...scales,
  });
  const capacity = context + 1 + DECODE_WARMUP + DECODE_STEPS;
  const cache = attnkit.createKvCache({ kvHeads: Nk, headSize: H, capacity, dtype });
  try {
    cache.load(past);
    const first = token(10);
    const stepped = cache.step(first, attrs).output.data;
    const stateless = await attnkit.groupQueryAttention({
      ...first, ...past,
      seqlens_k: tensor(new Int32Array([context]), [1]),
      total_sequence_length: tensor(new Int32Array([context + 1]), [1]),
    }, attrs, { outputs: ['output'] });
    const tokens = Array.from({ length: DECODE_WARMUP + DECODE_STEPS }, (_, i) => token(20 + 3 * i));
    const into = { output: new Float32Array(N * H) };
    for (const t of tokens.splice(0, DECODE_WARMUP)) cache.step(t, attrs, { into });
    const times = tokens.map((t) => {
      const start = performance.now();
      cache.step(t, attrs, { into });
      return performance.now() - start;
    }).sort((a, b) => a - b);
    const msPerStep = times[DECODE_STEPS >> 1];
    return { msPerStep, fastest: times[0], slowest: times[DECODE_STEPS - 1], layers, msPerToken: msPerStep * layers,
      matchesStateless: sameBits(stepped, stateless.output.data) };
  } finally {
    cache.dispose();
  }
}
