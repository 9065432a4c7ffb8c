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

// A caller's value as message text. A template literal throws on a Symbol (and on an object with no primitive
// value), which would turn a refused argument into a TypeError.
export function shown(value) {
  try {
    return String(value);
  } catch {
    return typeof value;
  }
}

// The first line of what was thrown, for a one-line message.
export function thrownLine(e) {
  return shown(e?.message ?? e).split('\n')[0];
}

// Refuses a key of a caller's object that is none of `names` (keys set to undefined count as absent): a misspelt
// option would otherwise be ignored without a word, where a misspelt attribute or input name is refused.
export function checkNames(what, object, names, noun = 'an option') {
  if (object == null || typeof object !== 'object') return;
  for (const key of Object.keys(object)) {
    if (object[key] !== undefined && !names.includes(key)) {
      throw new AttnkitError(`${what}: "${key}" is not ${noun} (${names.join(', ')})`);
    }
  }
}
