// attnkit: exits 0 when two CLI result files (`attnkit run` output) hold the same tensors bit for bit, but for the
// bits of NaNs: an invalid operation's NaN is 0xffc00000 on x86 and 0x7fc00000 on ARM. corpus-bits.sh asks it
// when the bytes differ.
import fs from 'node:fs';

const [a, b] = process.argv.slice(2).map((file) => {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    console.error(`same-results: ${file} holds no CLI result (empty or cut short)`);
    process.exit(1);
  }
  return Array.isArray(doc) ? doc : [doc];
});
const bitsArray = { float32: Uint32Array, float16: Uint16Array, bfloat16: Uint16Array };
const isNanBits = { float32: (x) => (x & 0x7fffffff) > 0x7f800000, float16: (x) => (x & 0x7fff) > 0x7c00,
  bfloat16: (x) => (x & 0x7fff) > 0x7f80 };

function sameTensor(x, y) {
  if (x.dtype !== y.dtype || JSON.stringify(x.shape) !== JSON.stringify(y.shape)) return false;
  const bx = Buffer.from(x.base64, 'base64'), by = Buffer.from(y.base64, 'base64');
  if (bx.equals(by)) return true;
  const Bits = bitsArray[x.dtype];
  if (!Bits || bx.length !== by.length) return false;
  const vx = new Bits(bx.buffer, bx.byteOffset, bx.length / Bits.BYTES_PER_ELEMENT);
  const vy = new Bits(by.buffer, by.byteOffset, by.length / Bits.BYTES_PER_ELEMENT);
  return vx.every((v, i) => v === vy[i] || (isNanBits[x.dtype](v) && isNanBits[x.dtype](vy[i])));
}

const same = a.length === b.length && a.every((r, i) => r.name === b[i].name &&
  JSON.stringify(Object.keys(r.outputs)) === JSON.stringify(Object.keys(b[i].outputs)) &&
  Object.keys(r.outputs).every((k) => sameTensor(r.outputs[k], b[i].outputs[k])));
process.exit(same ? 0 : 1);
