// attnkit browser tests: launches Debian's headless Chromium through playwright-core (no downloaded browser: this
// machine has no network) with WebGPU on SwiftShader enabled, in a fresh throw-away profile. Returns { page, context,
// close }. Flags: --no-sandbox because CI runs as root; the background-networking ones because a closed network
// otherwise makes Chromium retry connections at every start (see /work/.library/env/machines/cpp.md).
import { existsSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

// The real binary, not the /usr/bin/chromium wrapper script (which Playwright cannot drive reliably).
export const CHROMIUM_CANDIDATES = [process.env.ATTNKIT_CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium']
  .filter(Boolean);

export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--no-sandbox',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
];

export class BrowserUnavailableError extends Error {
  name = 'BrowserUnavailableError';
}

export function findChromium() {
  return CHROMIUM_CANDIDATES.find((p) => existsSync(p)) ?? null;
}

// Why a browser cannot be launched here (a string), or null when it can. Tests skip with this reason.
export async function browserUnavailableReason() {
  if (!findChromium()) {
    return `Chromium not found (looked at ${CHROMIUM_CANDIDATES.join(', ')}); install Debian's chromium package `
      + '(apt-get install -y chromium) or set ATTNKIT_CHROMIUM';
  }
  try {
    await import('playwright-core');
  } catch (err) {
    return `playwright-core is not installed (npm install): ${err.message}`;
  }
  return null;
}

// Launches Chromium and opens one page. `onConsole(msg)` receives the page's console lines (debugging aid).
export async function launchBrowser({ onConsole = null, timeoutMs = 30000 } = {}) {
  const reason = await browserUnavailableReason();
  if (reason) throw new BrowserUnavailableError(reason);
  const { chromium } = await import('playwright-core');
  const profileDir = await mkdtemp(path.join(tmpdir(), 'attnkit-chromium-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: findChromium(),
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: timeoutMs,
    });
  } catch (err) {
    await rm(profileDir, { recursive: true, force: true });
    throw new BrowserUnavailableError(`Chromium at ${findChromium()} failed to start: ${err.message.split('\n')[0]}`);
  }
  // A caller that exits without close() (compare.mjs ends with process.exit) still gets Chromium killed by
  // Playwright's own exit hook; this removes the profile it leaves behind.
  const removeProfile = () => rmSync(profileDir, { recursive: true, force: true, maxRetries: 2 });
  process.once('exit', removeProfile);
  const page = context.pages()[0] ?? await context.newPage();
  page.setDefaultTimeout(timeoutMs);
  if (onConsole) page.on('console', (msg) => onConsole(`${msg.type()}: ${msg.text()}`));
  let closed = false;
  return {
    context,
    page,
    async close() {
      if (closed) return;
      closed = true;
      await context.close().catch(() => {});
      await rm(profileDir, { recursive: true, force: true });
      process.removeListener('exit', removeProfile);
    },
  };
}
