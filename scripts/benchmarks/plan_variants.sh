#!/usr/bin/env bash
# Branched files planned in several ways, each benched against the same
# original, invocations interleaved (every model and variant once per
# round). A variant is LABEL=ARGS: ARGS are added to `stretch stretch
# FIXTURE --processors cpu0,cpu1 --random-weights 1` (a `--device` among
# them replaces the default configs/devices/host.toml). Prints per
# invocation, from `stretch bench --json`, the plan's MACs ratio, the
# branched model's sequential p50 on one core over the original's on tract
# (the engine's efficiency on the branched shapes) and over onnxruntime's
# original with 2 threads, its two-processor p50 over tract's original on
# one core and onnxruntime's original with 2 threads, and over its ideal.
# Never while something builds.
#
#   VARIANTS="w8=--width-multiple=8 w16=--width-multiple=16" ROUNDS=2 RUNS=30 scripts/benchmarks/plan_variants.sh [MODEL...]
#   (ARGS: flags after `=`, separated by commas, each as `--flag=value`;
#   default models: resnet18 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
read -r -a variants <<< "${VARIANTS:?VARIANTS=\"LABEL=ARGS ...\" is required}"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 mobilenet_v2)
for m in "${models[@]}"; do
  "$S" convert "fixtures/models/$m.onnx" --random-weights 1 -o "$out/$m.onnx" > /dev/null
  for v in "${variants[@]}"; do
    label="${v%%=*}"
    read -r -a args <<< "$(tr ',' ' ' <<< "${v#*=}")"
    device=(--device configs/devices/host.toml)
    for a in "${args[@]}"; do [[ "$a" == --device=* ]] && device=(); done
    echo "== $m, $label: ${args[*]}"
    "$S" stretch "fixtures/models/$m.onnx" "${device[@]}" --processors cpu0,cpu1 "${args[@]}" \
      --random-weights 1 --plan-out "$out/$m.$label.plan.json" -o "$out/$m.$label.onnx" | tail -2
  done
done
printf '%-14s %-5s %-8s %6s %10s %10s %10s %10s %10s %10s %10s %10s\n' model round variant MACs "tract p50" "ort p50" \
  "seq/orig" "seq/orig" "1c/tract" "2thr/ort" "tract/idl" "ort/idl"
printf '%-14s %-5s %-8s %6s %10s %10s %10s %10s %10s %10s %10s %10s\n' "" "" "" "" "" "" "tract" "ort 2thr" "" "" "" ""
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in "${models[@]}"; do
    for v in "${variants[@]}"; do
      label="${v%%=*}"
      "$S" bench "$out/$m.$label.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" --json 2> /dev/null \
      | python3 -c '
import json, sys
d = json.load(sys.stdin)
plan = json.load(open(sys.argv[4]))
p50 = {c["name"]: c["p50_ms"] for c in d["configurations"]}
ideal = {i["configuration"]: i["p50_over_ideal"] for i in d["ideals"]}
t, o = "branched, 2 processors", "branched, 2 processors, ort"
ts, os_ = "branched, 1 core (sequential)", "branched, 1 core (sequential), ort"
print("%-14s %-5s %-8s %5.2fx %7.2f ms %7.2f ms %9.3fx %9.3fx %9.2fx %9.2fx %9.2fx %9.2fx" % (sys.argv[1], sys.argv[2], sys.argv[3],
      plan["totals"]["work_ratio"], p50[t], p50[o], p50[ts] / p50["original, 1 core"],
      p50[os_] / p50["original, onnxruntime 2 threads"],
      p50["original, 1 core"] / p50[t], p50["original, onnxruntime 2 threads"] / p50[o], ideal[t], ideal[o]))' \
        "$m" "$r" "$label" "$out/$m.$label.plan.json"
    done
  done
done
