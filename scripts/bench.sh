#!/usr/bin/env bash
# attnkit: `npm run bench` — the headline benchmarks side by side in one run: this host's FMA peak and read
# bandwidth, the kernels, GQA, QAttention, attnkit vs onnxruntime-node and wasm vs onnxruntime-web, then issue 3's
# targets judged on this run's figures. The host is shared: read the ratios, not the absolute times.
# Usage: npm run bench [-- --quick]
set -euo pipefail
cd "$(dirname "$0")/.."
usage="Usage: npm run bench [-- --quick]"
quick=""
case "$#:${1:-}" in
  0:) ;;
  1:--quick) quick="--quick" ;;
  1:-h | 1:--help) echo "$usage"; exit 0 ;;
  *) printf 'unexpected arguments: %s\n%s\n' "$*" "$usage" >&2; exit 2 ;;
esac
bash scripts/setup.sh
bash scripts/build.sh
min_time=0.3
[ -n "$quick" ] && min_time=0.05
# Each part writes its results here too, for the target summary at the end (bench/js/targets.mjs).
out=report/bench
rm -rf "$out" && mkdir -p "$out"
json() { echo "--benchmark_out=$out/$1.json --benchmark_out_format=json"; }

echo "== kernels (Google Benchmark)"
build/native/bench/kernels_bench --benchmark_min_time=$min_time $(json kernels) \
  --benchmark_filter='FmaPeak|ReadBandwidth|QKGemm/.*/(f32|s8|s4|s8_approx_vnni)/M:1/N:512/K:128|SVGemm/.*/(f32|s8|s4)/M:1/N:512/K:128|QKPacked|FromDram'
echo "== GroupQueryAttention (Google Benchmark)"
gqa_filter='host_limits|Prefill/T:(512|2048)/|Prefill/T:4096/cache:0/threads:1/|Decode_16x8/T:4096/|FlashDecoding'
[ -n "$quick" ] && gqa_filter='host_limits|Prefill/T:512/cache:0/|Decode_16x8/T:4096/cache:(0|1)/'
build/native/bench/gqa_bench --benchmark_min_time=$min_time --benchmark_filter="$gqa_filter" $(json gqa)
echo "== QAttention (Google Benchmark)"
build/native/bench/qattention_bench --benchmark_min_time=$min_time
echo "== a decode step between a host pool's spinning ops, on attnkit's pool and on the host's (Google Benchmark)"
build/native/bench/host_pool_bench --benchmark_min_time=$min_time
echo "== attnkit native vs onnxruntime-node"
node bench/js/gqa_ort.mjs $quick --json "$out/gqa_ort.json"
node bench/js/qattention_ort.mjs $quick
if [ -z "$quick" ]; then node bench/js/models_ort.mjs; fi  # shipped models' shapes
echo "== attnkit wasm vs onnxruntime-web (and vs attnkit native)"
node bench/js/wasm_vs_ort.mjs $quick
echo "== issue 3's targets against this run's limits and peers (issue 5's: the wasm section's last lines)"
node bench/js/targets.mjs "$out"
