// attnkit: the targets `npm start` compares, in report order. A target is a module object with id, label,
// available() (true, or a reason string), optional skipReason(case), optional timeNote (what its times stand for,
// where not what they seem), and run(case, { file, threads, repeat }) resolving to { outputs, timeMs } or { error }.
// Adding a target (attnkit wasm, WebGPU) is one line here.
import { attnkitNativeTarget } from './native.js';
import { ortNodeTarget, ortWasmTarget } from './ort.js';
import { attnkitWasmTarget } from './wasm.js';
import { attnkitWasmBrowserTarget, webgpuOrtTarget } from './webgpu.js';

export const TARGETS = [
  attnkitNativeTarget,
  ortNodeTarget,
  ortWasmTarget,
  attnkitWasmTarget,
  attnkitWasmBrowserTarget,
  webgpuOrtTarget,
];
