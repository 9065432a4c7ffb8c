#!/usr/bin/env bash
# attnkit: `npm test` — installs what is missing, builds, then runs every suite: GoogleTest through ctest (native),
# then node:test over tests/js (the case corpus against the reference and onnxruntime-node, the JS package).
# Every suite runs even if an earlier one fails; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1
bash scripts/build.sh || exit 1

failed=()

# ---- native: GoogleTest (kernels vs reference per ISA, ops vs reference, validation) ----
echo "== native tests (ctest, build/native)"
if ! ctest --test-dir build/native --output-on-failure -j "$(nproc)"; then failed+=("native ctest"); fi

# ---- JS: node:test (corpus vs reference and ORT, package API) ----
# The timeout turns a hung wasm worker or ORT session into a failure instead of a stuck CI job.
echo "== JS tests (node --test tests/js)"
js_log=$(mktemp)
node --test --test-timeout=600000 tests/js/ 2>&1 | tee "$js_log"
js_status=${PIPESTATUS[0]}
[ "$js_status" -eq 0 ] || failed+=("node:test")

# ---- browser: headless Chromium (demo page, ORT's WebGPU EP vs the reference); skips itself without Chromium ----
echo "== browser tests (node --test tests/browser)"
node --test --test-timeout=600000 tests/browser/ 2>&1 | tee -a "$js_log"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed+=("browser node:test")

echo "== summary"
grep -E '^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms)' "$js_log" | sed 's/^# /  js /'
rm -f "$js_log"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all suites passed"
