#!/usr/bin/env bash
# attnkit: builds the GoogleTest suite with clang into build/native-clang and runs it (part of `npm test`). The
# library is built with g++ elsewhere; C++ users on clang (macOS, Android's NDK, many Linux setups) compile the same
# intrinsics, CPU-feature probes and SIMDe emulation through another front end, which once refused two of them.
set -euo pipefail
cd "$(dirname "$0")/.."
CC=clang CXX=clang++ cmake -S . -B build/native-clang -DCMAKE_BUILD_TYPE=Release -DATTNKIT_BUILD_BENCH=OFF \
  -DATTNKIT_BUILD_CLI=OFF >/dev/null
cmake --build build/native-clang -j "${ATTNKIT_BUILD_JOBS:-$(nproc)}" --target attnkit_tests
ctest --test-dir build/native-clang --output-on-failure -V
