// attnkit: the native target, driven through the `attnkit` CLI (build/native/attnkit) so the tests and the comparison
// exercise exactly what users run. Returns outputs in the same { name: { dtype, shape, data } } form as the ORT target.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { materializeTensor } from '../case.js';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const defaultCli = process.env.ATTNKIT_CLI ?? join(repoRoot, 'build/native/attnkit');

export function cliAvailable(cli = defaultCli) {
  return existsSync(cli);
}

function execCli(cli, args) {
  return new Promise((resolve) => {
    execFile(cli, args, { maxBuffer: 1 << 30, encoding: 'utf8' }, (err, stdout, stderr) => {
      // A signal (crash) leaves err.code null; report it as such instead of a fake exit code.
      const exitCode = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ exitCode, signal: err?.signal ?? null, stdout, stderr, spawnError: err && typeof err.code === 'string' ? err : null });
    });
  });
}

// A case given as an object is written to a temporary file; a string is taken as the path of a case file.
async function withCaseFile(caseOrPath, fn) {
  if (typeof caseOrPath === 'string') return fn(caseOrPath);
  const dir = await mkdtemp(join(tmpdir(), 'attnkit-case-'));
  const file = join(dir, 'case.json');
  try {
    await writeFile(file, JSON.stringify(caseOrPath));
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function optionArgs({ threads, isa, path } = {}) {
  const args = [];
  if (threads !== undefined) args.push('--threads', String(threads));
  if (isa) args.push('--isa', isa);
  if (path) args.push('--path', path);
  return args;
}

function failure(res) {
  const message = res.spawnError ? res.spawnError.message
    : res.signal ? `attnkit killed by ${res.signal}: ${res.stderr.trim()}`
      : res.stderr.trim() || `attnkit exited ${res.exitCode} with nothing on stderr`;
  return { error: message, exitCode: res.exitCode, stderr: res.stderr };
}

// `attnkit run` (or `run --reference`). Resolves to { outputs, timeMs } or { error, exitCode, stderr }.
export async function runNative(caseOrPath, { cli = defaultCli, reference = false, ...opts } = {}) {
  return withCaseFile(caseOrPath, async (file) => {
    const args = ['run', file, ...optionArgs(opts)];
    if (reference) args.push('--reference');
    const t0 = performance.now();
    const res = await execCli(cli, args);
    const timeMs = performance.now() - t0;
    if (res.exitCode !== 0) return failure(res);
    let parsed;
    try {
      parsed = JSON.parse(res.stdout);
    } catch (err) {
      return { error: `attnkit printed invalid JSON: ${err.message}`, exitCode: res.exitCode, stderr: res.stderr };
    }
    const outputs = {};
    for (const [name, t] of Object.entries(parsed.outputs ?? {})) outputs[name] = materializeTensor(t, name);
    return { outputs, timeMs, name: parsed.name };
  });
}

// `attnkit bench`: the parsed JSON line (median_us, min_us, iters, isa, threads, peak_scratch_bytes), or { error }.
export async function benchNative(caseOrPath, { cli = defaultCli, iters = 5, warmup = 1, ...opts } = {}) {
  return withCaseFile(caseOrPath, async (file) => {
    const res = await execCli(cli, ['bench', file, '--iters', String(iters), '--warmup', String(warmup), ...optionArgs(opts)]);
    if (res.exitCode !== 0) return failure(res);
    const line = res.stdout.trim().split('\n').pop();
    try {
      return JSON.parse(line);
    } catch (err) {
      return { error: `attnkit bench printed invalid JSON: ${err.message}`, exitCode: res.exitCode };
    }
  });
}

// The cross-target comparison's view of this target: outputs from `run`, time from `bench` (median of `repeat`).
export const attnkitNativeTarget = {
  id: 'attnkit-native',
  label: 'attnkit native',
  async available() {
    return cliAvailable() ? true : `${defaultCli} is not built`;
  },
  async run(caseObj, { file, threads = 1, repeat = 5 } = {}) {
    const source = file ?? caseObj;
    const result = await runNative(source, { threads });
    if (result.error !== undefined) return result;
    const bench = await benchNative(source, { threads, iters: repeat });
    return { outputs: result.outputs, timeMs: bench.error === undefined ? bench.median_us / 1000 : null };
  },
};
