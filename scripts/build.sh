#!/usr/bin/env bash
# attnkit: builds the native library, CLI, tests and benches into build/native (and, when wasm/ is set
# up, the wasm builds into js/dist). Incremental: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$jobs"
if [ -x scripts/build-wasm.sh ]; then scripts/build-wasm.sh; fi
