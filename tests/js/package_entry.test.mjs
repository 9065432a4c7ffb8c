// attnkit npm package tests (node:test): the package's default instance (init, its build choice, dispose and
// overlapping calls) and the JS CLI on the wasm target, whose output and errors match the native CLI's.
// Needs js/dist (npm run build); the native comparisons need build/native/attnkit (or ATTNKIT_CLI).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import os from 'node:os';
import path from 'node:path';

import * as attnkit from '../../js/index.js';
import { AttnkitError, createInstance } from '../../js/index.js';
import { materializeTensor } from '../../js/case.js';
import { assertMatchesNative, cli, corpus, haveCli, nativeRun, root, smallGqa } from './wasm_test_support.mjs';

describe('package entry (default instance)', () => {
  after(() => attnkit.dispose());

  test('calls before init() throw AttnkitError', async () => {
    attnkit.dispose();
    await assert.rejects(attnkit.groupQueryAttention({}, {}), (e) => e instanceof AttnkitError && /init\(\)/.test(e.message));
    assert.throws(() => attnkit.info(), AttnkitError);
  });

  test('init() picks the threaded build in Node and runs both ops and runCase', async () => {
    const info = await attnkit.init({ threads: 2 });
    assert.equal(info.build, 'simd-threaded');
    assert.match(info.reason, /Node/);
    const { inputs, attrs } = smallGqa();
    const r = await attnkit.groupQueryAttention(inputs, attrs);
    assert.deepEqual(r.output.shape, [1, 5, 64]);
    const c = corpus.find((e) => !e.caseObject.expect_error);
    if (c) assert.ok(Object.keys((await attnkit.runCase(c.caseObject)).outputs).length > 0);
    await assert.rejects(attnkit.qAttention({}, {}), AttnkitError);
  });

  test('one thread takes the single-thread build unless the threaded one is asked for', async () => {
    const one = await attnkit.init({ threads: 1 });
    assert.equal(one.build, 'simd');
    assert.match(one.reason, /one thread requested/);
    assert.equal(one.threads, 1);
    const { inputs, attrs } = smallGqa();
    const single = await attnkit.groupQueryAttention(inputs, attrs);
    const asked = await attnkit.init({ threads: 1, build: 'simd-threaded' });
    assert.equal(asked.build, 'simd-threaded');
    assert.equal(asked.threads, 1);
    const pooled = await attnkit.groupQueryAttention(inputs, attrs, { threads: 2 });
    assert.deepEqual(pooled.output.data, single.output.data);
  });

  test('threads are clamped to the pthread pool', async () => {
    const info = await attnkit.init({ threads: 64 });
    assert.equal(info.threads, info.maxThreads);
  });

  test('the threaded build starts a worker per thread; calls asking for more use those', async () => {
    const three = await createInstance({ build: 'simd-threaded', threads: 3 });
    try {
      assert.equal(three.info().maxThreads, 3);
      const { PThread } = three.Module;
      assert.equal(PThread.unusedWorkers.length + PThread.runningWorkers.length, 3);
      const { inputs, attrs } = smallGqa();
      const one = three.groupQueryAttention(inputs, attrs, { threads: 1 });
      assert.deepEqual(three.groupQueryAttention(inputs, attrs, { threads: 8 }), one);  // 3 threads, not a hang
    } finally {
      three.dispose();
    }
    attnkit.dispose();
    await attnkit.init({ threads: 2 });
    const cache = attnkit.createKvCache({ kvHeads: 2, headSize: 16, capacity: 8 });
    assert.equal((await attnkit.init({ threads: 4 })).maxThreads, 4);  // more workers: a fresh module
    assert.throws(() => cache.length, /replaced when init\(\) loaded the simd-threaded build/);
  });

  test('a refused init() leaves the current instance working', async () => {
    await attnkit.init({ threads: 1 });
    const { inputs, attrs } = smallGqa();
    const before = await attnkit.groupQueryAttention(inputs, attrs);
    for (const [options, pattern] of [[5, /^init: options must be an object$/],
      [{ wasmPaths: 5 }, /^init: wasmPaths must/],
      [{ build: 'toString' }, /^init: build must be auto, simd-threaded or simd, got "toString"$/]]) {
      await assert.rejects(attnkit.init(options),
        (e) => e instanceof AttnkitError && e.code === 2 && pattern.test(e.message));
    }
    assert.deepEqual((await attnkit.groupQueryAttention(inputs, attrs)).output.data, before.output.data);
  });

  test('dispose() terminates the workers so Node exits', () => {
    // A child process that runs threaded calls and disposes must end by itself. Several init/dispose cycles:
    // terminating a worker that was still starting or spinning once trapped in ~1 of 10 disposes.
    const script = `import * as a from ${JSON.stringify(path.join(root, 'js/index.js'))};
      ${smallGqa.toString()}
      const { inputs, attrs } = smallGqa();
      for (let cycle = 0; cycle < 8; cycle++) {
        await a.init({ threads: 2 });
        await a.groupQueryAttention(inputs, attrs);
        a.dispose();
      }`;
    const header = `import { materializeTensor } from ${JSON.stringify(path.join(root, 'js/case.js'))};\n`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', header + script], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.signal, null, 'the child did not exit by itself');
    assert.equal(r.status, 0, r.stderr);
  });

  test('a script that never calls dispose() still ends', () => {
    const script = `import * as a from ${JSON.stringify(path.join(root, 'js/index.js'))};
      ${smallGqa.toString()}
      const { inputs, attrs } = smallGqa();
      await a.init({ threads: 2 });
      await a.groupQueryAttention(inputs, attrs);
      a.createKvCache({ kvHeads: 2, headSize: 16, capacity: 8 });`;
    const header = `import { materializeTensor } from ${JSON.stringify(path.join(root, 'js/case.js'))};\n`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', header + script], { encoding: 'utf8', timeout: 30000 });
    assert.equal(r.signal, null, 'the child did not exit by itself');
    assert.equal(r.status, 0, r.stderr);
  });

  test('init() again for the same build keeps the caches made so far; another build replaces them', async () => {
    attnkit.dispose();
    await attnkit.init({ threads: 3 });
    const cache = attnkit.createKvCache({ kvHeads: 2, headSize: 16, capacity: 8 });
    const info = await attnkit.init({ threads: 2 });
    assert.deepEqual([info.build, info.threads, info.maxThreads], ['simd-threaded', 2, 3]);
    assert.equal(cache.length, 0);
    await attnkit.init({ threads: 1 });  // the single-thread build
    const replaced = 'attnkit: this instance was replaced when init() loaded the simd build; make caches and pins again '
      + 'from it';
    assert.throws(() => cache.length, (e) => e instanceof AttnkitError && e.message === replaced);
  });

  test('overlapping init() calls act in the order made; a dispose() meanwhile disposes what they load', async () => {
    const [first, second] = await Promise.all([attnkit.init({ threads: 4 }), attnkit.init({ threads: 1 })]);
    assert.deepEqual([first.build, second.build], ['simd-threaded', 'simd']);
    assert.deepEqual([attnkit.info().build, attnkit.info().threads], ['simd', 1]);
    const loading = attnkit.init({ threads: 2 });
    attnkit.dispose();
    assert.equal((await loading).build, 'simd-threaded');
    assert.throws(() => attnkit.info(), (e) => e instanceof AttnkitError && /init\(\)/.test(e.message));
  });
});

// A bundler for the web resolves every module name it can read in the package: esbuild stopped at the loader's
// literal import of node:fs (and five more). Node's modules are asked for by a name it does not read (nodeBuiltin).
test('the modules index.js reaches import none of Node\'s by a name a bundler reads', () => {
  const seen = new Set();
  const queue = ['js/index.js'];
  while (queue.length) {
    const file = queue.pop();
    if (seen.has(file)) continue;
    seen.add(file);
    const source = fs.readFileSync(path.join(root, file), 'utf8');
    for (const [, name] of source.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      assert.ok(!name.startsWith('node:') && !builtinModules.includes(name), `${file} imports ${name}`);
      if (name.startsWith('.')) queue.push(path.join(path.dirname(file), name));
    }
  }
  assert.ok(seen.has('js/loader.js') && seen.has('js/marshal.js'), [...seen].join());
});

describe('CLI: node js/bin/attnkit.mjs --target wasm', () => {
  const bin = path.join(root, 'js/bin/attnkit.mjs');
  const valid = corpus.find((e) => !e.caseObject.expect_error && !Array.isArray(JSON.parse(fs.readFileSync(e.file, 'utf8'))));
  // An op-level rule (invalid--*), so this checks the CLI's plumbing; case-loader messages are checked per case above.
  const invalid = corpus.find((e) => e.caseObject.expect_error && path.basename(e.file).startsWith('invalid--') &&
    !Array.isArray(JSON.parse(fs.readFileSync(e.file, 'utf8'))));

  test('run writes the native output format', () => {
    assert.ok(valid, 'no valid single-case file in the corpus');
    const out = path.join(os.tmpdir(), `attnkit-wasm-cli-${process.pid}.json`);
    const r = spawnSync(process.execPath, [bin, 'run', valid.file, '--target', 'wasm', '--threads', '2', '--out', out], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const doc = JSON.parse(fs.readFileSync(out, 'utf8'));
    fs.rmSync(out, { force: true });
    assert.equal(doc.name, valid.caseObject.name);
    for (const t of Object.values(doc.outputs)) assert.deepEqual(Object.keys(t).sort(), ['base64', 'dtype', 'shape']);
    if (haveCli) {
      const native = nativeRun(valid.file, 0);
      for (const [name, t] of Object.entries(native.outputs)) assertMatchesNative(name, materializeTensor(doc.outputs[name], name), t);
    }
  });

  test('an invalid case exits 2 with one line on stderr', () => {
    assert.ok(invalid, 'no invalid single-case file in the corpus');
    const r = spawnSync(process.execPath, [bin, 'run', invalid.file, '--target', 'wasm'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.ok(r.stderr.includes(invalid.caseObject.expect_error));
    if (haveCli) assert.equal(r.stderr.trim(), nativeRun(invalid.file, 0).error);
  });

  test('a case file that cannot be read exits 1 with one line naming it, as the native CLI does', () => {
    const clis = [[process.execPath, [bin]], ...(haveCli ? [[cli, []]] : [])];
    for (const [command, prefix] of clis) {
      for (const file of [os.tmpdir(), path.join(os.tmpdir(), `attnkit-missing-${process.pid}.json`)]) {
        const r = spawnSync(command, [...prefix, 'run', file], { encoding: 'utf8' });
        assert.equal(r.status, 1, `${command} ${file}: ${r.stderr}`);
        assert.equal(r.stdout, '');
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
        assert.ok(r.stderr.startsWith(`${file}: `), r.stderr);
      }
    }
  });

  test('an unknown command, or another command\'s option, exits 2 with the native CLI\'s line', () => {
    for (const [args, line] of [[['frob'], 'unknown command "frob" (run, bench or info)'],
      [['run', valid.file, '--iters', '3'], '--iters: not an option of run'],
      [['info', '--iters', '3'], '--iters: not an option of info']]) {
      const r = spawnSync(process.execPath, [bin, ...args, '--target', 'wasm'], { encoding: 'utf8' });
      assert.equal(r.status, 2, r.stderr);
      assert.ok(r.stderr.startsWith(line) && r.stderr.trim().split('\n').length === 1, r.stderr);
      if (haveCli) assert.ok(spawnSync(cli, args, { encoding: 'utf8' }).stderr.startsWith(line), args.join(' '));
    }
  });

  test('a count out of range exits 2 with the native CLI\'s line', () => {
    for (const args of [['--iters', '99999999999'], ['--warmup', '-1'], ['--threads', '1e3']]) {
      const r = spawnSync(process.execPath, [bin, 'bench', valid.file, '--target', 'wasm', ...args], { encoding: 'utf8' });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr.trim(), /^--(iters|warmup|threads): must be an integer in \[[01], 1000000\]$/);
      if (haveCli) assert.equal(spawnSync(cli, ['bench', valid.file, ...args], { encoding: 'utf8' }).stderr, r.stderr);
    }
  });

  test('a case file\'s problems read the same on both CLIs; --reference is refused with where to find it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'attnkit-cli-files-'));
    const good = JSON.parse(fs.readFileSync(valid.file, 'utf8'));
    const broken = { ...good.inputs, query: { dtype: 'float32', shape: [-1] } };
    const named = { ...good, name: 'user/broken', inputs: broken };
    const files = {
      'not-object.json': [good, 'x'], 'named.json': [good, named], 'number.json': 5, 'numbers.json': [1],
    };
    const expected = {
      'not-object.json': 'case #1: must be an object, got a string',
      'named.json': 'case user/broken: query: shape[0] = -1 must be a non-negative integer',
      'number.json': 'case file: must hold a case object or an array of them, got a number',
      'numbers.json': 'case #0: must be an object, got a number',
    };
    try {
      for (const [file, doc] of Object.entries(files)) {
        const full = path.join(dir, file);
        fs.writeFileSync(full, JSON.stringify(doc));
        const r = spawnSync(process.execPath, [bin, 'run', full, '--target', 'wasm'], { encoding: 'utf8' });
        assert.equal(r.status, 2, `${file}: ${r.stderr}`);
        assert.equal(r.stderr, `${expected[file]}\n`, file);
        if (haveCli) assert.equal(spawnSync(cli, ['run', full], { encoding: 'utf8' }).stderr, r.stderr, file);
      }
      // JSON.parse alone would keep the second note and run the case.
      const duplicate = path.join(dir, 'duplicate.json');
      fs.writeFileSync(duplicate, JSON.stringify(good).replace('{', '{"note": "a",\n "note": "b", '));
      const r = spawnSync(process.execPath, [bin, 'run', duplicate, '--target', 'wasm'], { encoding: 'utf8' });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /^\S+duplicate\.json: JSON line 2, column 2: duplicate key "note"\n$/);
      if (haveCli) assert.equal(spawnSync(cli, ['run', duplicate], { encoding: 'utf8' }).stderr, r.stderr);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const r = spawnSync(process.execPath, [bin, 'run', valid.file, '--reference'], { encoding: 'utf8' });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^--reference: the fp64 reference runs natively only \(build\/native\/attnkit run/);
  });

  test('help prints the usage on stdout and exits 0', () => {
    for (const args of [['--help'], ['help'], ['run', 'case.json', '-h']]) {
      const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.stdout.startsWith('usage: attnkit.mjs run CASE.json'), r.stdout);
      assert.equal(r.stderr, '');
    }
  });

  test('bench prints one JSON line with the timing fields', () => {
    assert.ok(valid, 'no valid single-case file in the corpus');
    const r = spawnSync(process.execPath, [bin, 'bench', valid.file, '--target', 'wasm', '--iters', '3', '--warmup', '1'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const line = JSON.parse(r.stdout);
    for (const key of ['median_us', 'min_us', 'iters', 'isa', 'threads', 'peak_scratch_bytes']) {
      assert.ok(key in line, key);
    }
    assert.ok(line.min_us > 0 && line.min_us <= line.median_us);
    assert.ok(Number.isInteger(line.peak_scratch_bytes) && line.peak_scratch_bytes > 0, `${line.peak_scratch_bytes}`);
    assert.equal(line.iters, 3);
  });
});
