#!/usr/bin/env bash
# attnkit: builds tests/package as an application would and runs it: against build/native's library installed into
# build/install (find_package(attnkit)), and from the sources through add_subdirectory with no build type, so
# without optimization (build/package-subdir), where undefined behaviour that optimized builds happen to hide
# (a misaligned vector store, a reference to a kernel table that does not exist) fails, and with -fno-exceptions
# -fno-rtti. Part of `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake --install build/native --prefix build/install >/dev/null
cmake -S tests/package -B build/package -DCMAKE_PREFIX_PATH="$PWD/build/install" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/package -j "$jobs" >/dev/null
build/package/attnkit_consumer
# That project also builds without exceptions and RTTI, as many embedders do: attnkit keeps its own.
cmake -S tests/package -B build/package-subdir -DATTNKIT_SOURCE_DIR="$PWD" \
  "-DCMAKE_CXX_FLAGS=-fno-exceptions -fno-rtti" >/dev/null
cmake --build build/package-subdir -j "$jobs" >/dev/null
build/package-subdir/attnkit_consumer
