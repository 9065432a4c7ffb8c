#!/usr/bin/env bash
# attnkit: runs every corpus case file through the Linux CLI (build/native/attnkit) and through another build's CLI
# (Windows under Wine, aarch64 under qemu), and requires the same stdout bytes, exit code and error message: one
# kernel table must give the same bits on every platform (NaNs aside: x86 and ARM make different ones). An emulated
# run keeps about one core busy, so one worker per core takes every Nth case.
# Usage: corpus-bits.sh LABEL ISA|default COMMAND...
set -uo pipefail
cd "$(dirname "$0")/.."
label=$1 isa=$2
shift 2
linux_cli=build/native/attnkit
if [ ! -x "$linux_cli" ]; then
  echo "corpus ($label): no $linux_cli (scripts/build.sh builds it)"
  exit 1
fi
options=()
[ "$isa" = default ] || options=(--isa "$isa")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# A hung emulator fails its case (exit 124) instead of the whole test run; the slowest case takes seconds.
run_other() {
  rc_other=0
  timeout 120 "$@" run "$f" "${options[@]}" >"$outputs/other" 2>"$outputs/other.err" || rc_other=$?
}

# An invalid case's message is stderr's one line; Windows ends it in \r\n, and Wine may add lines of its own.
agree() {
  local message
  message=$(head -n 1 "$outputs/linux.err")
  { cmp -s "$outputs/linux" "$outputs/other" || node scripts/same-results.mjs "$outputs/linux" "$outputs/other"; } &&
    [ $rc_linux = $rc_other ] && { [ -z "$message" ] || tr -d '\r' <"$outputs/other.err" | grep -qxF "$message"; }
}

# Checks one case file; its verdict goes to $outputs/verdicts, its story to stdout.
check_case() {
  local ok why
  rc_linux=0
  "$linux_cli" run "$f" "${options[@]}" >"$outputs/linux" 2>"$outputs/linux.err" || rc_linux=$?
  run_other "$@"
  # About one run in 800, Wine itself fails around a program's exit, mostly saying so ("wine client error"), once
  # (thirty-fourth session) silently with exit 1. Such a run is taken again, once, in the open: attnkit never
  # writes a line that starts with "wine", and never fails without a message on stderr.
  ok=0
  agree && ok=1
  why=
  if [ $ok = 0 ]; then
    if wine_line=$(grep -m 1 '^wine' "$outputs/other.err"); then
      why="Wine said: $wine_line"
    elif [ $rc_other != 0 ] && [ ! -s "$outputs/other.err" ]; then
      why="nothing on stderr"
    fi
  fi
  if [ -n "$why" ]; then
    echo "retried: $f (exit $rc_other, $why)"
    run_other "$@"
    agree && ok=1
  fi
  if [ $ok = 1 ]; then
    echo "same $f" >>"$outputs/verdicts"
  else
    echo "differs $f" >>"$outputs/verdicts"
    echo "differs: $f (exit $rc_linux and $rc_other)"
    cmp "$outputs/linux" "$outputs/other"
    head -n 3 "$outputs/linux.err" "$outputs/other.err"
  fi
}

cases=(tests/cases/*/*.json)
workers=$(nproc)  # 49 -> 30 s for qemu on two cores
for ((worker = 0; worker < workers; worker++)); do
  outputs=$scratch/$worker
  mkdir "$outputs" && touch "$outputs/verdicts"
  (
    for ((i = worker; i < ${#cases[@]}; i += workers)); do
      f=${cases[$i]}
      check_case "$@"
    done
  ) >"$outputs/story" &
done
wait
cat "$scratch"/*/story
cat "$scratch"/*/verdicts >"$scratch/verdicts"
same=$(grep -c '^same ' "$scratch/verdicts")
differ=$(awk '$1 == "differs" { printf " %s", $2 }' "$scratch/verdicts")
checked=$(wc -l <"$scratch/verdicts")
echo "corpus ($label, $isa table): ${same} case files give the Linux CLI's bits, $((checked - same)) differ${differ}"
[ "$checked" -eq ${#cases[@]} ] && [ "$same" -eq "$checked" ]
