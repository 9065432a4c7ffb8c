// attnkit (node:test): the demo server (`node js/demo/serve.mjs`) serves the repository with the isolation headers
// the threaded build needs, and nothing outside it: not a sibling folder whose name starts with the repository's,
// and a malformed escape is a 400, not an exception that stops the server.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { startServer } from '../../js/demo/serve.mjs';

let server;
before(async () => {
  server = await startServer({ port: 0 });
});
after(() => server.close());

const get = (urlPath) => new Promise((resolve, reject) => {
  http.get({ host: '127.0.0.1', port: server.address().port, path: urlPath }, (res) => {
    res.resume();
    res.on('end', () => resolve(res));
  }).on('error', reject);
});

test('the demo page comes with COOP/COEP', async () => {
  const res = await get('/js/demo/');
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['cross-origin-opener-policy'], 'same-origin');
  assert.equal(res.headers['cross-origin-embedder-policy'], 'require-corp');
  assert.equal(res.headers['content-type'], 'text/html');
});

test('paths outside the repository are refused, and a malformed escape does not stop the server', async () => {
  assert.equal((await get('/..%2f..%2fetc%2fpasswd')).statusCode, 403);
  assert.equal((await get('/..%2fmain-sibling%2ffile')).statusCode, 403);
  assert.equal((await get('/%E0%A4%A')).statusCode, 400);
  assert.equal((await get('/js/demo/index.html')).statusCode, 200);
});
