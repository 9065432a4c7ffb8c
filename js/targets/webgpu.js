// attnkit: the browser targets of the cross-target comparison, both in one headless Chromium page served
// cross-origin isolated from 127.0.0.1: 'webgpu-ort' (onnxruntime-web's WebGPU EP on SwiftShader, `subgroups` hidden)
// and 'attnkit-wasm-browser' (the npm package's threaded wasm build). The browser starts on first use and is reused
// for every case; close() (or process exit: Playwright kills Chromium then) shuts it down. The page logic is
// js/targets/browser-page.js.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { materializeInputs, normalizeCase, ortSkipReason } from '../case.js';
import { buildModelBytes, ORT_WEB } from './ort.js';
import { repoRoot } from './native.js';

const PAGE_PATH = '/__attnkit/browser.html';
const PAGE_HTML = `<!doctype html><meta charset="utf-8"><title>attnkit browser targets</title>
<script type="module" src="/js/targets/browser-page.js"></script>`;
const DEFAULT_BUDGET_MS = 2000;

let blobCounter = 0;

// One Chromium page (and its static server), started on first use. exposeSubgroups leaves SwiftShader's subgroup
// features visible to ORT (only the test that shows why they are hidden wants that).
export class BrowserRunner {
  constructor({ exposeSubgroups = false } = {}) {
    this.exposeSubgroups = exposeSubgroups;
    this.sessionPromise = null;
    this.modelsInPage = new Set();
  }

  // The helpers live in tests/browser (not shipped in the npm package), so they are imported lazily and their
  // absence is a reason, not a crash.
  async session() {
    this.sessionPromise ??= (async () => {
      const { startStaticServer } = await import('../../tests/browser/server.mjs');
      const { launchBrowser } = await import('../../tests/browser/browser.mjs');
      const routes = { [PAGE_PATH]: { body: PAGE_HTML } };
      const server = await startStaticServer({ routes });
      let browser;
      try {
        browser = await launchBrowser({ timeoutMs: 120000 });
        await browser.page.goto(server.url(`${PAGE_PATH}${this.exposeSubgroups ? '?expose-subgroups' : ''}`));
        await browser.page.waitForFunction(() => window.attnkitBrowserReady === true, null, { timeout: 30000 });
      } catch (err) {
        await browser?.close();
        await server.close();
        throw err;
      }
      return { server, routes, browser, page: browser.page };
    })();
    try {
      return await this.sessionPromise;
    } catch (err) {
      this.sessionPromise = null;
      throw err;
    }
  }

  async close() {
    const pending = this.sessionPromise;
    this.sessionPromise = null;
    this.modelsInPage.clear();
    if (!pending) return;
    const session = await pending.catch(() => null);
    if (!session) return;
    await session.browser.close();
    await session.server.close();
  }

  async evaluate(fn, arg) {
    const { page } = await this.session();
    return page.evaluate(fn, arg);
  }

  async runInPage(method, tensors, args) {
    const session = await this.session();
    const blob = packTensors(session, tensors);
    try {
      const res = await session.page.evaluate(({ method: m, arg }) => window.attnkitBrowser[m](arg),
        { method, arg: { ...args, blobUrl: blob.url, manifest: blob.manifest } });
      if (res.error !== undefined) return { error: res.error };
      return { outputs: decodeOutputs(res.outputs), timeMs: res.timeMs, info: res.info };
    } finally {
      blob.release();
    }
  }

  // Runs a case on ORT's WebGPU EP in the page. Resolves to { outputs, timeMs } or { error }.
  async runOrtWebgpu(caseObj, { repeat = 5, budgetMs = DEFAULT_BUDGET_MS } = {}) {
    try {
      const c = normalizeCase(caseObj);
      const modelBytes = buildModelBytes(c);
      const modelKey = createHash('sha256').update(modelBytes).digest('hex');
      const inputs = materializeInputs(c);
      for (const [name, t] of Object.entries(inputs)) {
        if (t.dtype === 'bfloat16') return { error: `${name}: onnxruntime JS has no bfloat16 tensors` };
      }
      const hasModel = !this.modelsInPage.has(modelKey);
      const tensors = hasModel ? { __model__: { dtype: 'uint8', shape: [modelBytes.length], data: modelBytes }, ...inputs } : inputs;
      const res = await this.runInPage('runOrtWebgpu', tensors, { modelKey, hasModel, repeat, budgetMs });
      if (res.error !== undefined) return { error: conciseOrtError(res.error) };
      this.modelsInPage.add(modelKey);
      return res;
    } catch (err) {
      return { error: String(err.message ?? err).split('\n')[0] };
    }
  }

  // The adapter features ORT sees in the page, or null without WebGPU.
  async adapterFeatures() {
    return this.evaluate(() => window.attnkitBrowser.adapterFeatures());
  }

  // Runs a case on the attnkit package in the page. maxThreads is the pool size init() gets (0: the page's
  // hardwareConcurrency); threads is this call's count. Resolves to { outputs, timeMs, info } or { error }.
  async runAttnkitWasm(caseObj, { threads = 1, maxThreads = 0, repeat = 5, budgetMs = DEFAULT_BUDGET_MS } = {}) {
    try {
      const c = normalizeCase(caseObj);
      const inputs = materializeInputs(c);
      return await this.runInPage('runAttnkitWasm', inputs,
        { op: c.op, attrs: c.attrs, outputs: c.outputs, threads, maxThreads, repeat, budgetMs });
    } catch (err) {
      return { error: String(err.message ?? err).split('\n')[0] };
    }
  }

  // attnkit's init() result in the page ({ info } or { error }).
  async attnkitInfo(maxThreads = 0) {
    return this.evaluate((threads) => window.attnkitBrowser.attnkitInfo(threads), maxThreads);
  }
}

// Packs tensors into one 8-byte-aligned blob served at a one-shot URL; returns { url, manifest, release }.
function packTensors(session, tensors) {
  const manifest = [];
  let size = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const byteLength = t.data.byteLength;
    manifest.push({ name, dtype: t.dtype, shape: t.shape, offset: size, byteLength });
    size += Math.ceil(byteLength / 8) * 8;
  }
  const blob = Buffer.alloc(size);
  for (const m of manifest) {
    const t = tensors[m.name];
    blob.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), m.offset);
  }
  const path = `/__attnkit/blob/${++blobCounter}`;
  session.routes[path] = { body: blob, type: 'application/octet-stream' };
  return { url: path, manifest, release: () => delete session.routes[path] };
}

const ARRAYS = {
  float32: Float32Array, float16: Uint16Array, bfloat16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
  int32: Int32Array, int64: BigInt64Array, bool: Uint8Array,
};

function decodeOutputs(encoded) {
  const outputs = {};
  for (const [name, t] of Object.entries(encoded)) {
    const bytes = Buffer.from(t.base64, 'base64');
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    const ArrayType = ARRAYS[t.dtype];
    if (!ArrayType) throw new Error(`${name}: unexpected output dtype ${t.dtype}`);
    outputs[name] = { dtype: t.dtype, shape: t.shape, data: new ArrayType(copy.buffer) };
  }
  return outputs;
}

// ORT web's errors wrap the useful part in "failed to call OrtRun(). ERROR_CODE: 1, ERROR_MESSAGE: <build path>.cc:605
// <function> [ONNXRuntimeError] : 1 : FAIL : <message>"; keep the message.
export function conciseOrtError(message) {
  return String(message)
    .replace(/^failed to call OrtRun\(\)\. ERROR_CODE: \d+, ERROR_MESSAGE: /, '')
    .replace(/^\S+\.(cc|h):\d+ .*?\[ONNXRuntimeError\] : \d+ : \w+ : /, '');
}

// The process-wide runner both comparison targets share, and its functions.
const shared = new BrowserRunner();
export const close = () => shared.close();
export const runOrtWebgpu = (caseObj, opts) => shared.runOrtWebgpu(caseObj, opts);
export const adapterFeatures = () => shared.adapterFeatures();
export const runAttnkitWasmInBrowser = (caseObj, opts) => shared.runAttnkitWasm(caseObj, opts);
export const attnkitInfoInBrowser = (maxThreads) => shared.attnkitInfo(maxThreads);

async function browserReason() {
  const where = join(repoRoot, 'tests/browser/browser.mjs');
  if (!existsSync(where)) return `${where} is missing (the browser targets run from a source checkout)`;
  const { browserUnavailableReason } = await import('../../tests/browser/browser.mjs');
  return browserUnavailableReason();
}

export const webgpuOrtTarget = {
  id: 'webgpu-ort',
  label: `${ORT_WEB} WebGPU (Chromium)`,
  timeNote: 'on SwiftShader, a GPU emulated on the CPU: its times say nothing of a real GPU\'s',
  async available() {
    const reason = await browserReason();
    if (reason) return reason;
    try {
      if (!(await adapterFeatures())) return 'Chromium has no WebGPU adapter (needs --enable-unsafe-webgpu and SwiftShader)';
    } catch (err) {
      return `headless Chromium failed: ${String(err.message ?? err).split('\n')[0]}`;
    }
    return true;
  },
  skipReason(caseObj) {
    if (caseObj.op === 'QAttention') return 'ORT WebGPU EP has no QAttention';
    if (caseObj.attrs?.sliding_window_cache === 1) return 'ORT WebGPU EP: sliding_window_cache=1 is not implemented';
    return ortSkipReason(caseObj, 'webgpu');
  },
  async run(caseObj, { repeat = 5 } = {}) {
    return runOrtWebgpu(caseObj, { repeat });
  },
};

const WASM_DIST_FILES = ['attnkit-simd-threaded.js', 'attnkit-simd-threaded.wasm'];

export const attnkitWasmBrowserTarget = {
  id: 'attnkit-wasm-browser',
  label: 'attnkit wasm (Chromium)',
  async available() {
    const missing = WASM_DIST_FILES.filter((f) => !existsSync(join(repoRoot, 'js/dist', f)));
    if (missing.length) return `js/dist/${missing.join(', js/dist/')} not built (npm run build)`;
    const reason = await browserReason();
    if (reason) return reason;
    const res = await attnkitInfoInBrowser().catch((err) => ({ error: String(err.message ?? err).split('\n')[0] }));
    if (res.error) return `attnkit did not load in Chromium: ${res.error}`;
    if (res.info.build !== 'simd-threaded') return `the page loaded the ${res.info.build} build, not simd-threaded: ${res.info.reason}`;
    return true;
  },
  async run(caseObj, { threads = 1, repeat = 5 } = {}) {
    const res = await runAttnkitWasmInBrowser(caseObj, { threads, repeat });
    return res.error === undefined ? { outputs: res.outputs, timeMs: res.timeMs } : res;
  },
};
