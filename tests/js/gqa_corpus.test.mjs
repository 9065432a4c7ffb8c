// attnkit: the GroupQueryAttention case corpus (tests/cases/gqa) through the native CLI, checked against the fp64
// reference (`attnkit run --reference`) and against onnxruntime-node (the version package.json pins) built from
// each case at test time.
// Validation cases must exit 2 with one stderr line holding the expected message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { normalizeCase, ortSkipReason } from '../../js/case.js';
import { compareOutputs, describeFailures } from '../../js/compare.js';
import { cliAvailable, defaultCli, repoRoot, runNative } from '../../js/targets/native.js';
import { ORT_NODE, runOrt } from '../../js/targets/ort.js';
import { gqaReferenceTolerance } from '../../js/tolerance.js';

const caseDir = join(repoRoot, 'tests/cases/gqa');
// Every case as { file, case }: `file` is the case's own file, or the case object itself when its file holds
// several (the CLI then gets it alone). Validation cases stay raw: some do not even load.
const corpus = [];
for (const f of readdirSync(caseDir).filter((n) => n.endsWith('.json')).sort()) {
  const doc = JSON.parse(readFileSync(join(caseDir, f), 'utf8'));
  (Array.isArray(doc) ? doc : [doc]).forEach((raw, index) => {
    const c = raw.expect_error ? raw : normalizeCase(raw, index);
    corpus.push({ file: Array.isArray(doc) ? raw : join(caseDir, f), case: c });
  });
}

function testName(c) {
  const skip = ortSkipReason(c, 'cpu');
  if (c.expect_error) return `${c.name} rejects with exit 2 ("${c.expect_error}")`;
  if (skip) return `${c.name} vs reference only (${ORT_NODE}: ${skip})`;
  return `${c.name} vs reference and ${ORT_NODE}`;
}

// The variants every valid case runs on: both attention paths (flash with two threads, so the work split is
// exercised too) and every other ISA the CLI can run on this host, each checked against the reference and ORT.
function cliVariants() {
  const variants = [{ path: 'naive' }, { path: 'flash', threads: 2 }];
  if (!cliAvailable()) return variants;
  const info = JSON.parse(execFileSync(defaultCli, ['info'], { encoding: 'utf8' }));
  for (const isa of info.available_isas ?? []) if (isa !== info.isa) variants.push({ isa });
  return variants;
}
const variants = cliVariants();
const variantName = (v) => Object.entries(v).map(([k, x]) => `--${k} ${x}`).join(' ');

function requireCli() {
  assert.ok(cliAvailable(), `${defaultCli} is missing: build it first (bash scripts/build.sh, which npm test runs)`);
}

// Spec §8's rules, each of which must keep its own validation case in the corpus.
const SPEC_RULE_CASES = ['seqlens-negative', 'seqlens-beyond-present', 'seqlens-too-small-for-chunk',
  'past-too-short-for-seqlens', 'total-length-zero', 'seqlens-scalar', 'seqlens-wrong-length', 'seqlens-2x2-for-batch4',
  'chunked-prefill-batch2', 'head-size-not-multiple-of-8', 'rotary-head-size-not-multiple-of-16',
  'k-scale-count-mismatch', 'bit-width-without-quantization'];

test('corpus holds at least 60 valid cases and a validation case for every spec §8 rule', () => {
  assert.ok(corpus.filter((e) => !e.case.expect_error).length >= 60, 'fewer than 60 valid cases');
  const names = new Set(corpus.filter((e) => e.case.expect_error).map((e) => e.case.name));
  for (const rule of SPEC_RULE_CASES) assert.ok(names.has(`gqa/invalid/${rule}`), `no validation case ${rule}`);
});

for (const { file, case: c } of corpus) {
  test(testName(c), async (t) => {
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

    const first = await runNative(file, variants[0]);
    const ref = await runNative(file, { reference: true });
    assert.equal(ref.error, undefined, `attnkit --reference failed (exit ${ref.exitCode}): ${ref.error}`);
    const ort = ortSkipReason(c, 'cpu') ? null : await runOrt(c, { backend: 'node' });
    const tolerance = gqaReferenceTolerance(c);  // one per case: it measures the case's values once

    for (const [i, variant] of variants.entries()) {
      const run = i === 0 ? first : await runNative(file, variant);
      const where = `attnkit ${variantName(variant)}`;
      assert.equal(run.error, undefined, `${where} failed (exit ${run.exitCode}): ${run.error}`);
      for (const name of c.outputs) assert.ok(run.outputs[name], `${where} did not produce ${name}`);
      const vsRef = compareOutputs(c, run.outputs, ref.outputs, tolerance);
      assert.ok(vsRef.ok, `${where} vs reference:\n${describeFailures(vsRef)}`);
      if (!ort) continue;
      const vsOrt = compareOutputs(c, run.outputs, ort.outputs, c.tolerance);
      assert.ok(vsOrt.ok, `${where} vs ${ORT_NODE}:\n${describeFailures(vsOrt)}`);
    }
  });
}
