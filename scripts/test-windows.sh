#!/usr/bin/env bash
# attnkit: cross-builds the GoogleTest suite and the CLI for 64-bit Windows (mingw-w64 g++) into build/mingw and
# runs them under Wine (part of `npm test`). Windows is where many ORT users ship: another C runtime, another
# calling convention (LLP64, callee-saved xmm6-15), text-mode stdio and no Linux interfaces.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/mingw -DCMAKE_TOOLCHAIN_FILE=cmake/x86_64-w64-mingw32.cmake -DCMAKE_BUILD_TYPE=Release \
  -DATTNKIT_BUILD_BENCH=OFF >/dev/null
cmake --build build/mingw -j "${ATTNKIT_BUILD_JOBS:-$(nproc)}" --target attnkit_tests attnkit
# Wine makes its Windows tree on first use (about 10 s); it lives in the build folder, not in $HOME. A persistent
# server saves each program's start-up (1.5 s -> 0.25 s); it is stopped at the end. Booting it here, away from
# ctest's pipes, keeps its service processes from holding them open (ctest would wait for them forever).
export WINEPREFIX="$PWD/build/mingw/wine" WINEDEBUG=-all
wine=/usr/lib/wine  # Debian's wine64 package keeps its programs here
"$wine/wineserver" -p || true  # fails only where one already runs
trap '"$wine/wineserver" -k 2>/dev/null || true' EXIT
"$wine/wine64" wineboot </dev/null >/dev/null 2>&1 || echo "wineboot failed (exit $?); the runs below will say more"
status=0
# The suite takes about 20 s; a hung Wine fails at its TIMEOUT (tests/native) instead of stalling CI.
ctest_log=build/mingw/ctest.log
ctest --test-dir build/mingw --output-on-failure -V >"$ctest_log" 2>&1 || status=$?
# Wine's own failure around an exit (corpus-bits.sh says more) is retried once, in the open; only the retry's output
# is shown whole, so npm test counts each test once.
if [ $status -ne 0 ] && wine_line=$(grep -m 1 -E '^([0-9]+: )?wine' "$ctest_log"); then
  echo "retrying the suite once: it failed (exit $status) and Wine said \"$wine_line\" (its log: $ctest_log)"
  status=0
  ctest --test-dir build/mingw --output-on-failure -V || status=$?
else
  cat "$ctest_log"
fi

# The whole corpus through the Windows CLI, against the Linux CLI. Until the thirty-first session a decode differed:
# the online softmax took std::exp, and Windows' expf differs from glibc's.
bash scripts/corpus-bits.sh Windows default "$wine/wine64" build/mingw/attnkit.exe || status=1
exit $status
