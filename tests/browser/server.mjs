// attnkit browser tests: a tiny static HTTP server over the repository root for headless Chromium. It sends
// COOP/COEP (and CORP) on every response so pages are cross-origin isolated (SharedArrayBuffer, hence the threaded
// wasm build and ORT's threaded wasm), and correct MIME types (WebAssembly.instantiateStreaming needs application/wasm).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

// Resolves a URL path inside `root`, or null when it escapes it (../, encoded or not).
function resolveInside(root, urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  const file = path.resolve(root, `.${path.posix.normalize(`/${decoded}`)}`);
  return file === root || file.startsWith(root + path.sep) ? file : null;
}

// Starts the server on 127.0.0.1 (port 0 = an ephemeral one). Resolves to { server, origin, url(relPath), close() }.
// `routes` maps exact URL paths to { body, type } for pages generated in memory (the WebGPU target's page); `headers`
// are added to every response (a CDN's CORS and cross-origin CORP).
export async function startStaticServer({
  root = repoRoot, port = 0, isolation = true, routes = {}, headers: extra = {},
} = {}) {
  const server = http.createServer(async (req, res) => {
    const headers = { 'Cache-Control': 'no-store', ...(isolation ? ISOLATION_HEADERS : {}), ...extra };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...headers, Allow: 'GET, HEAD' }).end();
      return;
    }
    const urlPath = new URL(req.url, 'http://127.0.0.1').pathname;
    const route = routes[urlPath];
    if (route) {
      res.writeHead(200, { ...headers, 'Content-Type': route.type ?? MIME_TYPES['.html'] });
      res.end(req.method === 'HEAD' ? undefined : route.body);
      return;
    }
    let file = resolveInside(root, urlPath);
    if (!file) {
      res.writeHead(403, headers).end('forbidden');
      return;
    }
    try {
      let info = await stat(file);
      if (info.isDirectory()) {
        file = path.join(file, 'index.html');
        info = await stat(file);
      }
      res.writeHead(200, {
        ...headers,
        'Content-Type': MIME_TYPES[path.extname(file)] ?? 'application/octet-stream',
        'Content-Length': info.size,
      });
      if (req.method === 'HEAD') res.end();
      else createReadStream(file).on('error', () => res.destroy()).pipe(res);
    } catch {
      res.writeHead(404, headers).end('not found');
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const origin = `http://127.0.0.1:${server.address().port}`;
  return {
    server,
    origin,
    url: (relPath = '') => `${origin}/${relPath.replace(/^\/+/, '')}`,
    close: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(() => resolve());
    }),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? 0);
  const { origin } = await startStaticServer({ port });
  console.log(`serving ${repoRoot} at ${origin}/ (COOP/COEP on)`);
}
