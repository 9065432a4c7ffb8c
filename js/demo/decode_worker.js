// attnkit demo: the module worker that runs the decode timer (decode.js), as an application runs attnkit off its
// page's main thread. A message { init, settings } answers { info, result } or { error }.
import * as attnkit from '../index.js';
import { runDecode } from './decode.js';

self.onmessage = async ({ data }) => {
  try {
    const info = await attnkit.init(data.init);
    self.postMessage({ info, result: await runDecode(attnkit, data.settings) });
  } catch (e) {
    self.postMessage({ error: `${e.name}: ${e.message}` });
  }
};
