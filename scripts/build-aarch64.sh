#!/usr/bin/env bash
# attnkit: cross-compiles the GoogleTest suite and the CLI for aarch64 (real NEON, +dotprod) into build/aarch64;
# `ctest --test-dir build/aarch64` then runs the suite under qemu-aarch64, and scripts/corpus-bits.sh the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  -DATTNKIT_BUILD_BENCH=OFF -DATTNKIT_BUILD_CLI=ON -DATTNKIT_TEST_SHARDS=$(($(nproc) * 4)) >/dev/null
cmake --build build/aarch64 -j "$(nproc)" --target attnkit_tests attnkit
