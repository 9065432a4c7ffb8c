// attnkit benches: runs the native CLI's `bench` for another process, over its IPC channel. Spawning the CLI forks
// the process that spawns it, write-protecting all of its pages for copy-on-write: a bench that measured ORT node or
// attnkit wasm in that process then paid a page fault on every page they wrote next (a wasm prompt's next call ran
// 2x slower). Started once, before any large allocation, this process spawns the CLI instead (startNativeRunner in
// shapes.mjs).
import { benchNative } from '../../js/targets/native.js';

process.on('message', async ({ id, caseObject, options }) => {
  let result;
  try {
    result = await benchNative(caseObject, options);
  } catch (err) {
    result = { error: String(err.message ?? err) };
  }
  process.send({ id, result });
});
