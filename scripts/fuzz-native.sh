#!/usr/bin/env bash
# attnkit: coverage-guided fuzzing of the C ABI with libFuzzer, AddressSanitizer and UBSan (clang), into
# build/fuzz. Usage: scripts/fuzz-native.sh [SECONDS per target, default 300] [TARGET, default all].
# New inputs that reach new code land in build/fuzz/corpus/<target>; a crash is saved as build/fuzz/crash-*,
# and belongs in tests/fuzz/corpus/<target>/ once fixed, where every ctest run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
targets=${2:-gqa_c_api qattention_c_api kv_cache_c_api qattention_cache_c_api}
if ! command -v clang++ >/dev/null; then
  echo "fuzz-native: clang++ is needed (apt-get install clang)" >&2
  exit 2
fi
# Coverage counters in the library too (fuzzer-no-link): without them libFuzzer sees only the harness's branches.
sanitize="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTNKIT_LIBFUZZER=ON \
  -DATTNKIT_BUILD_BENCH=OFF -DATTNKIT_BUILD_CLI=OFF -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" >/dev/null
# A KV cache may be as large as 16 GiB (its pages are taken as tokens arrive): one malloc that size is no leak, so
# the malloc limit sits above it while the resident limit stays at 4 GiB.
for target in $targets; do
  cmake --build build/fuzz -j "$(nproc)" --target "attnkit_${target}_fuzz"
  mkdir -p "build/fuzz/corpus/$target"
  echo "fuzz-native: $target for $seconds s"
  (cd build/fuzz && "./tests/fuzz/attnkit_${target}_fuzz" -max_total_time="$seconds" -max_len=256 -timeout=60 \
    -rss_limit_mb=4096 -malloc_limit_mb=17000 -print_final_stats=1 "corpus/$target" "../../tests/fuzz/corpus/$target")
done
