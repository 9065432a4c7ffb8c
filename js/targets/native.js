// attnkit: the native target, driven through the `attnkit` CLI (build/native/attnkit) so the tests and the comparison
// exercise exactly what users run. Returns outputs in the same { name: { dtype, shape, data } } form as the ORT target.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseRunOutput } from '../run_result.js';

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

// fn(case file, a temporary folder): a case given as an object is written there; a string is the path of a case file.
async function withCaseFile(caseOrPath, fn) {
  const dir = await mkdtemp(join(tmpdir(), 'attnkit-case-'));
  try {
    if (typeof caseOrPath === 'string') return await fn(caseOrPath, dir);
    const file = join(dir, 'case.json');
    await writeFile(file, JSON.stringify(caseOrPath));
    return await fn(file, dir);
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
  return withCaseFile(caseOrPath, async (file, dir) => {
    const out = join(dir, 'out.json');
    const args = ['run', file, '--out', out, ...optionArgs(opts)];
    if (reference) args.push('--reference');
    const t0 = performance.now();
    const res = await execCli(cli, args);
    const timeMs = performance.now() - t0;
    if (res.exitCode !== 0) return failure(res);
    try {
      const { name, outputs } = parseRunOutput(await readFile(out));
      return { outputs, timeMs, name };
    } catch (err) {
      const error = `attnkit wrote an unreadable result: ${err.message}`;
      return { error, exitCode: res.exitCode, stderr: res.stderr };
    }
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
