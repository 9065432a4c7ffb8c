// attnkit bench: writes the cases and single-op ONNX models that bench/manycore/run.py times on a machine with more
// cores than this project's 2-core host (attnkit's CLI beside ORT's Python package, 1 to 16 threads), where
// Node and npm may be missing: everything Node builds is made here, and the inputs are the cases' `random` specs,
// which run.py expands with the same generator as the CLI.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildModelBytes } from '../../js/targets/ort.js';
import { benchKind, checkArgs, flag, gqaCase, gqaShapeCase, qattentionCase } from '../js/shapes.mjs';

checkArgs('node bench/manycore/prepare.mjs [--out DIR]');
const out = flag('--out', '.manycore');

// Issue 3's shapes (N=16, Nk=8, H=128), its flash-decoding shape (N=4, Nk=4: fewer heads than threads), two small
// models' decode steps (Qwen2.5-0.5B: 2 KV heads; Llama 3.2 1B: 8) and issue 4's QAttention.
const model = (name, shape) => gqaShapeCase(`gqa/${name}`, { ...shape, S: 1 });
const cases = [
  gqaCase('prefill', 512, 0, 'fp32'),
  gqaCase('prefill', 2048, 0, 'fp32'),
  gqaCase('prefill', 512, 0, 'int8'),
  gqaCase('prefill', 512, 0, 'int4'),
  ...['fp32', 'int8', 'int4'].flatMap((cache) => [gqaCase('decode', 1, 511, cache), gqaCase('decode', 1, 4095, cache)]),
  ...['fp32', 'int8', 'int4'].map((cache) => model(`flash-decoding T=4096 ${cache}`,
    { N: 4, Nk: 4, H: 128, P: 4095, cache })),
  model('Qwen2.5-0.5B decode T=2048 fp32', { N: 14, Nk: 2, H: 64, P: 2047, rotary: true }),
  model('Qwen2.5-0.5B decode T=2048 int8', { N: 14, Nk: 2, H: 64, P: 2047, rotary: true, cache: 'int8' }),
  model('Llama-3.2-1B decode T=2048 int4', { N: 32, Nk: 8, H: 64, P: 2047, rotary: true, cache: 'int4' }),
  qattentionCase(128, 0),
  qattentionCase(512, 0),
  qattentionCase(1, 511),
];

mkdirSync(out, { recursive: true });
const list = cases.map((c, i) => {
  const id = String(i).padStart(2, '0');
  writeFileSync(join(out, `${id}.json`), JSON.stringify(c));
  writeFileSync(join(out, `${id}.onnx`), buildModelBytes(c));
  return { id, name: c.name, kind: benchKind(c) };
});
writeFileSync(join(out, 'list.json'), JSON.stringify(list, null, 1));
console.log(`${list.length} cases in ${out}`);
