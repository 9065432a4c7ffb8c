// attnkit browser tests: where the wasm files are served from, as bundlers and CDNs place them. The threaded build's
// worker script is located as its other files are (a wasmPaths map of each file's URL), one on another origin (a
// CDN) runs from a blob, since a browser refuses a cross-origin worker script, and one that does not load makes the
// default choice fall back to the single-thread build, or an asked-for threaded build fail, instead of hanging;
// one that does not instantiate leaves no worker behind.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { browserUnavailableReason, launchBrowser } from './browser.mjs';
import { repoRoot, startStaticServer } from './server.mjs';

const browserReason = await browserUnavailableReason();

describe('attnkit wasm served from elsewhere', () => {
  // npm test installs Chromium: a missing one is a failure, not a skip.
  before(() => assert.ok(!browserReason, browserReason));
  let site;
  let cdn;
  let browser;
  before(async () => {
    // As a bundler emits them: each file renamed with a hash, the worker script in a folder of its own.
    const file = (name, type) => ({ body: readFileSync(join(repoRoot, 'js/dist', name)), type });
    site = await startStaticServer({
      routes: {
        '/blank.html': { body: '<!doctype html><title>attnkit</title>' },
        '/assets/main-3f2a.js': file('attnkit-simd-threaded.js', 'text/javascript'),
        '/assets/main-3f2a.wasm': file('attnkit-simd-threaded.wasm', 'application/wasm'),
        '/workers/w-91c0.js': file('attnkit-simd-threaded.worker.js', 'text/javascript'),
        '/assets/wrong.wasm': file('attnkit-simd.wasm', 'application/wasm'),  // does not link as the threaded one
      },
    });
    // Another port is another origin; a CDN answers CORS and lets isolated pages embed what it serves.
    cdn = await startStaticServer({
      isolation: false,
      headers: { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' },
    });
    browser = await launchBrowser();
    await browser.page.goto(site.url('blank.html'));
  });
  after(async () => {
    await browser?.close();
    await site?.close();
    await cdn?.close();
  });

  // init() with these options and one small call on a fresh default instance; { build, reason, output } or
  // { error }. Bounded, so that a hang fails the test rather than the suite.
  async function initAndRun(options) {
    return browser.page.evaluate(async (options) => {
      const attnkit = await import('/js/index.js');
      attnkit.dispose();
      const timeout = new Promise((resolve) => setTimeout(() => resolve({ error: 'init() hung' }), 20000));
      const run = (async () => {
        const info = await attnkit.init(options);
        const x = { data: Float32Array.from({ length: 48 }, (_, i) => Math.sin(i)), shape: [1, 3, 16] };
        const { output } = await attnkit.groupQueryAttention({
          query: x, key: x, value: x,
          seqlens_k: { data: new Int32Array([2]), shape: [1] },
          total_sequence_length: { data: new Int32Array([3]), shape: [1] },
        }, { num_heads: 1, kv_num_heads: 1 });
        return { build: info.build, reason: info.reason, output: Array.from(output.data) };
      })().catch((e) => ({ error: `${e.name}: ${e.message}` }));
      return Promise.race([run, timeout]);
    }, options);
  }

  test('each file at its own URL (a bundler\'s hashed names): the threaded build runs', async () => {
    // The worker script used to be looked for beside the main script, whatever the map said, and init() hung.
    const map = {
      'attnkit-simd-threaded.js': site.url('assets/main-3f2a.js'),
      'attnkit-simd-threaded.wasm': site.url('assets/main-3f2a.wasm'),
      'attnkit-simd-threaded.worker.js': site.url('workers/w-91c0.js'),
    };
    const plain = await initAndRun({ threads: 2 });
    const mapped = await initAndRun({ threads: 2, wasmPaths: map });
    assert.equal(plain.error, undefined, plain.error);
    assert.equal(mapped.error, undefined, mapped.error);
    assert.equal(mapped.build, 'simd-threaded', mapped.reason);
    assert.deepEqual(mapped.output, plain.output);
  });

  test('a CDN on another origin: the threaded build runs, its worker from a blob', async () => {
    const r = await initAndRun({ threads: 2, wasmPaths: cdn.url('js/dist/') });
    assert.equal(r.error, undefined, r.error);
    assert.equal(r.build, 'simd-threaded', r.reason);
  });

  test('a worker that does not load: the single-thread build, or an error if threads were asked for', async () => {
    const map = { 'attnkit-simd-threaded.worker.js': site.url('js/dist/no-such-worker.js') };
    const fallback = await initAndRun({ threads: 2, wasmPaths: map });
    assert.equal(fallback.error, undefined, fallback.error);
    assert.equal(fallback.build, 'simd');
    const missing = 'attnkit: cannot load .*no-such-worker\\.js: HTTP 404';
    assert.match(fallback.reason, new RegExp(`^the threaded build did not load \\(${missing}`));
    const asked = await initAndRun({ threads: 2, build: 'simd-threaded', wasmPaths: map });
    assert.match(asked.error ?? '', new RegExp(`^AttnkitError: ${missing}`));
  });

  test('a threaded module that does not instantiate: the single-thread build, and no worker left running', async () => {
    // The pool's workers start before the module is instantiated; they used to stay, idle, for the page's life.
    // A terminated worker leaves page.workers() when its close event arrives.
    const workersLeft = async () => {
      for (const deadline = Date.now() + 5000; browser.page.workers().length > 0 && Date.now() < deadline;) {
        await new Promise((ok) => setTimeout(ok, 50));
      }
      return browser.page.workers().length;
    };
    await browser.page.evaluate(async () => (await import('/js/index.js')).dispose());
    assert.equal(await workersLeft(), 0);
    const wrong = { 'attnkit-simd-threaded.wasm': site.url('assets/wrong.wasm') };
    const r = await initAndRun({ threads: 2, wasmPaths: wrong });
    assert.equal(r.error, undefined, r.error);
    assert.equal(r.build, 'simd');
    assert.match(r.reason, /^the threaded build did not load \(attnkit: loading the simd-threaded build failed: /);
    assert.equal(await workersLeft(), 0);
  });
});
