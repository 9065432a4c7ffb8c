// attnkit's TypeScript declarations (js/index.d.ts) against what the package does: tests/types/decode.ts, a decode
// loop written as a TypeScript user would, must compile under --strict (its @ts-expect-error lines staying errors)
// and then run; and index.d.ts must declare exactly what js/index.js exports.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import * as attnkit from '../../js/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('a strict TypeScript consumer compiles against the declarations and runs', () => {
  // Debian's node-typescript (scripts/setup.sh installs it); the output lands in build/types, inside the package,
  // so that `import 'attnkit'` resolves to this checkout by the package's own name, as it does for tsc.
  const compiled = spawnSync('tsc', ['-p', 'tests/types/tsconfig.json'], { cwd: root, encoding: 'utf8' });
  assert.equal(compiled.error, undefined, 'tsc did not start (npm run setup installs node-typescript)');
  assert.equal(compiled.status, 0, `tsc:\n${compiled.stdout}${compiled.stderr}`);
  const ran = spawnSync(process.execPath, ['build/types/decode.js'], { cwd: root, encoding: 'utf8' });
  assert.equal(ran.status, 0, `${ran.stdout}${ran.stderr}`);
  assert.match(ran.stdout, /typed consumer: ok/);
});

test('index.d.ts declares every export of index.js, and nothing else', () => {
  const declarations = fs.readFileSync(path.join(root, 'js/index.d.ts'), 'utf8');
  // Values only: interfaces and types have no runtime counterpart.
  const declared = [...declarations.matchAll(/^export (?:declare )?(?:async )?(?:function|class|const|let) (\w+)/gm)]
    .map((m) => m[1]);
  assert.deepEqual([...new Set(declared)].sort(), Object.keys(attnkit).sort());
});
