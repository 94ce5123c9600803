#!/usr/bin/env bash
# Issue 16's lever "branch widths the engine's kernels like": the fixtures
# planned on the host profile with branch channel counts in multiples of 8
# (the default), 16 and 32 (`stretch stretch --width-multiple M`), then
# each branched file benched against the same original, invocations
# interleaved (every model and multiple once per round). Prints per
# invocation, from `stretch bench --json`, the plan's MACs ratio, the
# branched model's sequential p50 on one core over the original's on tract
# (the engine's efficiency on the branched shapes) and over onnxruntime's
# original with 2 threads (no 1-thread original is timed), its
# two-processor p50 over tract's original on one core and onnxruntime's
# original with 2 threads, and over its ideal. Never while something builds.
#
#   MULTIPLES="8 16 32" ROUNDS=2 RUNS=30 scripts/benchmarks/width_multiple.sh [MODEL...]
#   (default models: resnet18 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
read -r -a multiples <<< "${MULTIPLES:-8 16 32}"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 mobilenet_v2)
for m in "${models[@]}"; do
  "$S" convert "fixtures/models/$m.onnx" --random-weights 1 -o "$out/$m.onnx" > /dev/null
  for k in "${multiples[@]}"; do
    echo "== $m, widths in multiples of $k"
    "$S" stretch "fixtures/models/$m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 \
      --width-multiple "$k" --random-weights 1 --plan-out "$out/$m.w$k.plan.json" -o "$out/$m.w$k.onnx" | tail -2
  done
done
printf '%-14s %-5s %-4s %6s %10s %10s %10s %10s %10s %10s %10s %10s\n' model round mult MACs "tract p50" "ort p50" \
  "seq/orig" "seq/orig" "1c/tract" "2thr/ort" "tract/idl" "ort/idl"
printf '%-14s %-5s %-4s %6s %10s %10s %10s %10s %10s %10s %10s %10s\n' "" "" "" "" "" "" "tract" "ort 2thr" "" "" "" ""
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in "${models[@]}"; do
    for k in "${multiples[@]}"; do
      "$S" bench "$out/$m.w$k.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" --json 2> /dev/null \
      | python3 -c '
import json, sys
d = json.load(sys.stdin)
plan = json.load(open(sys.argv[4]))
p50 = {c["name"]: c["p50_ms"] for c in d["configurations"]}
ideal = {i["configuration"]: i["p50_over_ideal"] for i in d["ideals"]}
t, o = "branched, 2 processors", "branched, 2 processors, ort"
ts, os_ = "branched, 1 core (sequential)", "branched, 1 core (sequential), ort"
print("%-14s %-5s %-4s %5.2fx %7.2f ms %7.2f ms %9.3fx %9.3fx %9.2fx %9.2fx %9.2fx %9.2fx" % (sys.argv[1], sys.argv[2], sys.argv[3],
      plan["totals"]["work_ratio"], p50[t], p50[o], p50[ts] / p50["original, 1 core"],
      p50[os_] / p50["original, onnxruntime 2 threads"],
      p50["original, 1 core"] / p50[t], p50["original, onnxruntime 2 threads"] / p50[o], ideal[t], ideal[o]))' \
        "$m" "$r" "$k" "$out/$m.w$k.plan.json"
    done
  done
done
