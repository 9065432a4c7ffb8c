// attnkit JS package: the one error type the package throws.
// Its message is the C ABI's one-line message, which is the same line the native CLI prints, so a
// failing case reads identically on every target.
export class AttnkitError extends Error {
  // code follows the C ABI and the CLI's exit status: 2 invalid input (also for bad arguments caught in
  // JS before the call), 1 internal (out of memory, package not initialised, module failed to load).
  constructor(message, code = 2) {
    super(message);
    this.name = 'AttnkitError';
    this.code = code;
  }
}
