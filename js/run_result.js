// attnkit: `attnkit run`'s result document ({name, outputs: {name: {dtype, shape, base64}}}, or an array of them),
// written by the JS CLI and read by the native target (Node only: it uses Buffer). Both move each tensor's base64 a
// slice at a time: as one string, the present of an fp32 cache of 131,072 rows at N_k = 8, H = 128 (716 MB of base64)
// passes V8's longest string (512 MiB), and building or reading it so crashed the caller.
import { DTYPES, elementCount } from './case.js';

// Writes results (each { name, outputs: { name: { dtype, shape, data } } }) through put(text), as JSON.stringify of
// the document with tensorToJson's tensors would read: one result, or with `many` an array of them.
export function writeRunResults(put, results, many, sliceBytes = 3 << 20) {
  const slice = sliceBytes - (sliceBytes % 3);
  if (many) put('[');
  results.forEach(({ name, outputs }, i) => {
    put(`${i ? ',' : ''}{"name":${JSON.stringify(name)},"outputs":{`);
    Object.entries(outputs).forEach(([key, t], j) => {
      const head = `"dtype":${JSON.stringify(t.dtype)},"shape":${JSON.stringify(t.shape)}`;
      put(`${j ? ',' : ''}${JSON.stringify(key)}:{${head},"base64":"`);
      const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      for (let a = 0; a < bytes.length; a += slice) put(bytes.toString('base64', a, Math.min(bytes.length, a + slice)));
      put('"}');
    });
    put('}}');
  });
  put(many ? ']\n' : '\n');
}

// One result's { name, outputs: { name: { dtype, shape, data } } } from the document's bytes.
export function parseRunOutput(bytes, sliceChars = 64 << 20) {
  const key = Buffer.from('"base64":"');  // a string's own quotes are escaped, so this only opens a base64 value
  const payloads = [];
  let skeleton = '', at = 0;
  for (let k = bytes.indexOf(key); k >= 0; k = bytes.indexOf(key, at)) {
    const start = k + key.length, end = bytes.indexOf('"', start);
    if (end < 0) throw new Error('a base64 string is not closed');
    skeleton += `${bytes.toString('utf8', at, k)}"base64":${payloads.length}`;
    payloads.push(decodeBase64(bytes, start, end, sliceChars - (sliceChars % 4)));
    at = end + 1;
  }
  const parsed = JSON.parse(skeleton + bytes.toString('utf8', at));
  const outputs = {};
  for (const [name, t] of Object.entries(parsed.outputs ?? {})) {
    const info = DTYPES[t.dtype], bytesOfData = payloads[t.base64];
    if (!info || !Array.isArray(t.shape) || bytesOfData === undefined) {
      throw new Error(`output ${name} is not a tensor`);
    }
    const count = elementCount(t.shape);
    if (bytesOfData.length !== count * info.bytes) {
      throw new Error(`output ${name} holds ${bytesOfData.length} bytes, not the ${count * info.bytes} of its shape`);
    }
    outputs[name] = { dtype: t.dtype, shape: t.shape, data: new info.array(bytesOfData.buffer, 0, count) };
  }
  return { name: parsed.name, outputs };
}

// bytes[start, end) as base64, decoded in slices of `slice` characters (a multiple of 4) into one aligned buffer.
function decodeBase64(bytes, start, end, slice) {
  const text = (a, b) => bytes.toString('latin1', a, b);
  if ((end - start) % 4 !== 0) throw new Error(`a base64 length of ${end - start} is not a multiple of 4`);
  const padding = end - start >= 4 ? (text(end - 2, end).match(/=+$/)?.[0].length ?? 0) : 0;
  const out = Buffer.from(new ArrayBuffer(((end - start) / 4) * 3 - padding));
  let written = 0;
  for (let a = start; a < end; a += slice) {
    written += Buffer.from(text(a, Math.min(end, a + slice)), 'base64').copy(out, written);
  }
  if (written !== out.length) throw new Error('invalid base64');
  return out;
}
