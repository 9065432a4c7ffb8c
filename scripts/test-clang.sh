#!/usr/bin/env bash
# attnkit: builds the GoogleTest suite with clang into build/native-clang, as a project built with -ffast-math would
# (its CMAKE_CXX_FLAGS; attnkit's own options must restore IEEE semantics), and runs it (part of `npm test`).
# C++ users on clang (macOS, Android's NDK) compile the same intrinsics, CPU-feature probes and SIMDe emulation
# through another front end, which once refused two of them and once left the x87 stack in MMX state.
set -euo pipefail
cd "$(dirname "$0")/.."
# The link keeps -fno-fast-math last: otherwise clang links crtfastmath.o, which flushes subnormals for the whole
# process, and the wasm128 table (SIMDe on x86; no wasm engine flushes) loses fp16 subnormals.
CC=clang CXX=clang++ cmake -S . -B build/native-clang -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-ffast-math \
  -DCMAKE_EXE_LINKER_FLAGS=-fno-fast-math -DATTNKIT_BUILD_BENCH=OFF -DATTNKIT_BUILD_CLI=OFF >/dev/null
cmake --build build/native-clang -j "${ATTNKIT_BUILD_JOBS:-$(nproc)}" --target attnkit_tests attnkit_fuzz_replays
ctest --test-dir build/native-clang --output-on-failure -V
