#!/usr/bin/env node
// attnkit demo server: serves the repository root with COOP/COEP so pages are cross-origin isolated
// (SharedArrayBuffer, hence the threaded wasm build). `node js/demo/serve.mjs [PORT]`, then open
// http://localhost:PORT/js/demo/ ; --no-isolation serves without the headers (single-thread fallback).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wasm': 'application/wasm', '.css': 'text/css' };

export function startServer({ port = 0, isolation = true } = {}) {
  const server = http.createServer((req, res) => {
    // Inside the repository only: a sibling folder whose name starts with the root's ("attnkit-secrets") is outside
    // too, and a malformed escape is the client's error, not an exception that stops the server.
    let urlPath;
    try {
      urlPath = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      res.writeHead(400).end('bad request');
      return;
    }
    let file = path.join(root, urlPath);
    if (file !== root && !file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    fs.readFile(file, (err, body) => {
      if (err) {
        res.writeHead(404).end('not found');
        return;
      }
      const headers = { 'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'Cache-Control': 'no-store' };
      if (isolation) {
        headers['Cross-Origin-Opener-Policy'] = 'same-origin';
        headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
      }
      res.writeHead(200, headers).end(body);
    });
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const port = Number(args.find((a) => /^\d+$/.test(a)) ?? 8080);
  const server = await startServer({ port, isolation: !args.includes('--no-isolation') });
  console.log(`attnkit demo: http://127.0.0.1:${server.address().port}/js/demo/`);
}
