// attnkit wasm vs onnxruntime-web's wasm EP (node:test): every corpus case ORT can run, through the package
// (threaded build) and through ORT's wasm build of its CPU kernels in the same Node process, compared within the
// case's tolerance — the browser-side peer, checked as the native one is in gqa_corpus.test.mjs.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import * as attnkit from '../../js/index.js';
import { normalizeCase, ortSkipReason } from '../../js/case.js';
import { compareOutputs, describeFailures } from '../../js/compare.js';
import { repoRoot } from '../../js/targets/native.js';
import { runOrt } from '../../js/targets/ort.js';

const cases = [];
for (const dir of ['gqa', 'qattention']) {
  const folder = join(repoRoot, 'tests/cases', dir);
  for (const f of readdirSync(folder).filter((n) => n.endsWith('.json')).sort()) {
    const doc = JSON.parse(readFileSync(join(folder, f), 'utf8'));
    for (const raw of Array.isArray(doc) ? doc : [doc]) {
      if (raw.expect_error) continue;
      if (ortSkipReason(raw, 'cpu')) continue;
      const c = normalizeCase(raw);
      // The perf-sized prompts take seconds on ORT's wasm build; the native corpus test covers them.
      if (c.name.includes('/perf/')) continue;
      cases.push(c);
    }
  }
}

before(async () => {
  await attnkit.init({ threads: 2 });
});
after(() => attnkit.dispose());

test('attnkit wasm matches onnxruntime-web (wasm EP) on the corpus', async (t) => {
  assert.ok(cases.length >= 100, `only ${cases.length} comparable cases`);
  for (const c of cases) {
    await t.test(c.name, async () => {
      const ours = await attnkit.runCase(c);
      const ort = await runOrt(c, { backend: 'web', threads: 1 });
      const r = compareOutputs(c, ours.outputs, ort.outputs, c.tolerance);
      assert.ok(r.ok, `attnkit wasm vs ORT web:\n${describeFailures(r)}`);
    });
  }
});
