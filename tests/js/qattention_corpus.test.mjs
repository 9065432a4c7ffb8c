// attnkit: the QAttention case corpus (tests/cases/qattention) through the native CLI, checked against the fp64
// reference (`attnkit run --reference`) and against onnxruntime-node (the version package.json pins) built from
// each case at test time (its wasm EP for int8 weights where the native EP's u8 x s8 product saturates: see
// ortNodeSaturates).
// Validation cases must exit 2 with one stderr line holding the expected message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { normalizeCase } from '../../js/case.js';
import { compareOutputs, describeFailures } from '../../js/compare.js';
import { cliAvailable, defaultCli, repoRoot, runNative } from '../../js/targets/native.js';
import { ORT_NODE, ortNodeSaturates, runOrt } from '../../js/targets/ort.js';
import { qattentionReferenceTolerance } from '../../js/tolerance.js';

const caseDir = join(repoRoot, 'tests/cases/qattention');
const corpus = readdirSync(caseDir).filter((f) => f.endsWith('.json')).sort()
  .map((f) => ({ file: join(caseDir, f), case: normalizeCase(JSON.parse(readFileSync(join(caseDir, f), 'utf8'))) }));

function testName(c) {
  if (c.expect_error) return `${c.name} rejects with exit 2 ("${c.expect_error}")`;
  return `${c.name} vs reference and ${ORT_NODE}`;
}

// Every ISA the CLI runs here (the default one with 2 threads, so the work split is exercised too).
function cliVariants() {
  const variants = [{ threads: 2 }];
  if (!cliAvailable()) return variants;
  const info = JSON.parse(execFileSync(defaultCli, ['info'], { encoding: 'utf8' }));
  for (const isa of info.available_isas ?? []) if (isa !== info.isa) variants.push({ isa, threads: 1 });
  return variants;
}
const variants = cliVariants();
const variantName = (v) => Object.entries(v).map(([k, x]) => `--${k} ${x}`).join(' ');

function requireCli() {
  assert.ok(cliAvailable(), `${defaultCli} is missing: build it first (bash scripts/build.sh, which npm test runs)`);
}

test('corpus holds at least 40 valid cases and the validation cases of every rule', () => {
  assert.ok(corpus.filter((e) => !e.case.expect_error).length >= 40, 'fewer than 40 valid cases');
  const names = new Set(corpus.filter((e) => e.case.expect_error).map((e) => e.case.name));
  for (const rule of ['do-rotary', 'past-present-share-buffer', 'past-without-present', 'mask-negative-end',
    'mask-4d-megatron', 'mask-1d-3b-plus-2', 'input-int8', 'weight-float']) {
    assert.ok(names.has(`qattention/invalid/${rule}`), `no validation case ${rule}`);
  }
});

for (const { file, case: c } of corpus) {
  test(testName(c), async () => {
    requireCli();
    if (c.expect_error) {
      const run = await runNative(file);
      assert.equal(run.error !== undefined, true, 'attnkit accepted an invalid case');
      assert.equal(run.exitCode, 2, `exit code ${run.exitCode}, stderr: ${run.stderr}`);
      const lines = run.stderr.trim().split('\n');
      assert.equal(lines.length, 1, `stderr must be one line, got:\n${run.stderr}`);
      assert.ok(lines[0].includes(c.expect_error), `message "${lines[0]}" lacks "${c.expect_error}"`);
      return;
    }
    const ref = await runNative(file, { reference: true });
    assert.equal(ref.error, undefined, `attnkit --reference failed (exit ${ref.exitCode}): ${ref.error}`);
    // Where onnxruntime-node's u8 x s8 product saturates (x86 without VNNI), ORT's exact wasm EP is the ORT compared.
    const ortBackend = ortNodeSaturates(c) ? 'web' : 'node';
    const ort = await runOrt(c, { backend: ortBackend });
    for (const variant of variants) {
      const run = await runNative(file, variant);
      const where = `attnkit ${variantName(variant)}`;
      assert.equal(run.error, undefined, `${where} failed (exit ${run.exitCode}): ${run.error}`);
      for (const name of c.outputs) assert.ok(run.outputs[name], `${where} did not produce ${name}`);
      const vsRef = compareOutputs(c, run.outputs, ref.outputs, qattentionReferenceTolerance(c));
      assert.ok(vsRef.ok, `${where} vs reference:\n${describeFailures(vsRef)}`);
      const vsOrt = compareOutputs(c, run.outputs, ort.outputs, c.tolerance);
      assert.ok(vsOrt.ok, `${where} vs ${ORT_NODE} (${ortBackend}):\n${describeFailures(vsOrt)}`);
    }
  });
}
