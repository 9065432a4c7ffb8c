#!/usr/bin/env bash
# attnkit: `npm test` — installs what is missing, builds, then runs every suite:
#   GoogleTest natively (every ISA this CPU runs or SIMDe emulates), built with g++ and again with clang; a program
#   built against the installed C++ package and, unoptimized, through add_subdirectory; GoogleTest cross-built for
#   aarch64 under qemu (real NEON) and for Windows under Wine (with the CLI), and built for wasm under Node through
#   ctest (threaded and single-thread); node:test over tests/js (the case corpus against the reference and
#   onnxruntime-node, the JS package on both wasm builds); and the browser suite in headless Chromium. Every suite
#   runs even if an earlier one fails; the last line sums them up.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1
bash scripts/build.sh || exit 1
echo "== setup and build: ${SECONDS} s"

failed=()
failed_logs=()
logs=$(mktemp -d)
log=$logs/all
trap 'rm -rf "$logs"' EXIT
export GTEST_BRIEF=1  # GoogleTest prints failures and its summary only

# Runs one suite, teeing its output into its own log and into the one the final count is read from.
suite() {
  local name=$1 own start=$SECONDS status
  own=$(mktemp "$logs/suite.XXXX")
  shift
  echo "== $name"
  "$@" 2>&1 | tee "$own" | tee -a "$log"
  status=${PIPESTATUS[0]}
  echo "== $name: $([ "$status" -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s"
  [ "$status" -eq 0 ] && return
  failed+=("$name")
  failed_logs+=("$own")
  return 1
}

suite "native GoogleTest (ctest, build/native)" ctest --test-dir build/native --output-on-failure -V
suite "C++ package (cmake --install, find_package(attnkit), tests/package)" bash scripts/test-package.sh
suite "native GoogleTest built with clang (ctest, build/native-clang)" bash scripts/test-clang.sh
if suite "aarch64 cross-build (build/aarch64)" bash scripts/build-aarch64.sh; then
  # qemu runs a process on about one core; the build split the suite into shards, one per core at a time.
  suite "aarch64 GoogleTest under qemu (ctest, build/aarch64)" \
    ctest --test-dir build/aarch64 --output-on-failure -V -j "$(nproc)"
  # -cpu max has the dot-product extension; a core without it (Cortex-A72) takes the fp32-conversion QK for
  # int8/int4 and the widening projection, which only these two families' tests tell apart.
  suite "aarch64 QK and projection kernels under qemu without sdot (-cpu cortex-a72)" env ATTNKIT_TEST_ISAS=neon \
    qemu-aarch64 -cpu cortex-a72 build/aarch64/tests/native/attnkit_tests --gtest_filter='KernelQkGemm.*:GemmU8X8*'
  # x86 tests the NEON table through SIMDe; it must compute what ARM computes.
  suite "aarch64 CLI under qemu: the corpus on the NEON table, x86's bits" \
    bash scripts/corpus-bits.sh aarch64 neon qemu-aarch64 -cpu max build/aarch64/attnkit
fi
suite "Windows GoogleTest and CLI under Wine (ctest, build/mingw)" bash scripts/test-windows.sh
# Both wasm flavours again with the GoogleTest suite, run under Node by ctest.
suite "wasm GoogleTest under Node (ctest, build/wasm-*)" env ATTNKIT_WASM_TESTS=1 ATTNKIT_CTEST_ARGS=-V bash scripts/build-wasm.sh
# The timeout turns a hung wasm worker or ORT session into a failure instead of a stuck CI job. These tests make
# many multi-MB typed arrays; in 4 KB pages each is faulted in and later unmapped, and V8's reclaiming them stalled
# calls for up to 140 ms. glibc (2.35+) asks for 2 MB pages when told to: 180 -> 137 s here (README, Performance).
# Node runs one file less than there are cores by default, one at a time on two cores; the files keep about 1.3
# cores busy, so one file per core is faster (178 -> 142 s on two cores).
huge_pages="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
suite "JS tests (node --test tests/js)" env GLIBC_TUNABLES="$huge_pages" \
  node --test --test-concurrency="$(nproc)" --test-timeout=600000 tests/js/
suite "browser tests (node --test tests/browser)" node --test --test-timeout=600000 tests/browser/

# One closing line over every runner: GoogleTest's "[  PASSED  ] N tests." / "[  FAILED  ] N tests," and
# node:test's "# pass N" / "# fail N".
# (ctest -V prefixes each line of a test's output with "N: ".)
count() {
  awk -v what="$1" '{ sub(/^[0-9]+: /, "") }
    what == "pass" && /^\[  PASSED  \] [0-9]+ test/ { s += $4 }
    what == "fail" && /^\[  FAILED  \] [0-9]+ test/ { s += $4 }
    $1 == "#" && $2 == what && $3 ~ /^[0-9]+$/ { s += $3 }
    END { print s + 0 }' "$log"
}
passed=$(count pass)
failures=$(count fail)
# CI keeps only the end of this output: each failed suite's telling lines come last, just before the sums.
telling='\[  FAILED  \]|^ *not ok|differs|Failed|\*\*\*|[Ee]rror:|[Tt]imeout|Segmentation|Abort'
for i in "${!failed[@]}"; do
  echo "-- why \"${failed[$i]}\" failed (its failure lines, then its last lines):"
  grep -E "$telling" "${failed_logs[$i]}" | tail -n 12
  tail -n 6 "${failed_logs[$i]}"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED suites: ${failed[*]}"
  [ "$failures" -gt 0 ] || failures=${#failed[@]}
fi
echo "${passed} passed, ${failures} failed, in $((SECONDS / 60)) min $((SECONDS % 60)) s"
[ ${#failed[@]} -eq 0 ]
