#!/usr/bin/env bash
# attnkit: builds the two WebAssembly flavours with Emscripten into build/wasm-threaded and build/wasm-st
# and copies their modules into js/dist (the npm package's payload). Incremental: make rebuilds only what
# changed, and an unchanged module is not copied again. ATTNKIT_WASM_TESTS=1 also builds the GoogleTest
# suite for wasm and runs it under Node through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v emcmake >/dev/null 2>&1; then
  echo "build-wasm: emcmake not found (run scripts/setup.sh to install emscripten)" >&2
  exit 1
fi
# Debian's emcc needs its JS dependencies (acorn, ...) from the system node_modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

tests=${ATTNKIT_WASM_TESTS:-0}
tests_flag=OFF
[ "$tests" = 1 ] && tests_flag=ON
jobs=${ATTNKIT_BUILD_JOBS:-$(nproc)}
mkdir -p js/dist

build_flavour() {
  local dir=$1 threads=$2 name=$3
  # emcmake's default ctest emulator passes a flag Node 20 rejects; fetch() cannot read file paths in Node 20.
  emcmake cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DATTNKIT_WASM_THREADS="$threads" \
    -DATTNKIT_BUILD_TESTS="$tests_flag" -DATTNKIT_BUILD_BENCH=OFF -DATTNKIT_BUILD_CLI=OFF \
    "-DCMAKE_CROSSCOMPILING_EMULATOR=/usr/bin/node;--no-experimental-fetch" > /dev/null 2> >(grep -v "^configure:" >&2)
  local targets=(--target attnkit_wasm)
  [ "$tests" = 1 ] && targets+=(--target attnkit_tests)
  cmake --build "$dir" -j "$jobs" "${targets[@]}"
  for f in "$dir"/dist/attnkit-"$name".*; do
    cp -u "$f" js/dist/
  done
  if [ "$tests" = 1 ]; then
    (cd "$dir" && ctest --output-on-failure ${ATTNKIT_CTEST_ARGS:-})
  fi
}

build_flavour build/wasm-threaded ON simd-threaded
build_flavour build/wasm-st OFF simd
# The emitted loaders are CommonJS inside an ESM package.
echo '{"type": "commonjs"}' > js/dist/package.json
echo "build-wasm: js/dist: $(cd js/dist && ls attnkit-* | tr '\n' ' ')"
