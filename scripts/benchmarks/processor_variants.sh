#!/usr/bin/env bash
# The same branched fixtures benched under variants of the processors'
# options, invocations interleaved, ROUNDS rounds: each variant is a suffix
# appended to both processors (`cpu0=inline:core0SUFFIX`,
# `cpu1=pool:core1SUFFIX`; `-` for none). Prints per invocation, from
# `stretch bench --json`, the branched model's p50 on tract and on
# onnxruntime, its ratio to the same invocation's references (tract
# original on 1 core, onnxruntime original with 2 threads) and to its ideal
# (its subgraphs' sequential times laid on the plan). Uses the branched
# files of runtime_fixtures.sh (made when missing). Never while something
# builds.
#
#   VARIANTS="- ,alone_threads=2" ROUNDS=2 RUNS=30 scripts/benchmarks/processor_variants.sh [MODEL...]
#   (default models: resnet18 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
read -r -a variants <<< "${VARIANTS:-- ,alone_threads=2}"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 mobilenet_v2)
for m in "${models[@]}"; do
  [ -f "$out/$m.branched.onnx" ] || prepare_fixture "$m" > /dev/null
done
printf '%-14s %-6s %-30s %12s %12s %14s %14s %12s %12s\n' model round variant "tract p50" "ort p50" \
  "tract/orig 1c" "ort/ort 2thr" "tract/ideal" "ort/ideal"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in "${models[@]}"; do
    for v in "${variants[@]}"; do
      a="${v#-}"
      "$S" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" \
        --processor "cpu0=inline:core0$a" --processor "cpu1=pool:core1$a" \
        --trace "$out/$m.variant.trace.json" --json 2> /dev/null \
      | python3 -c '
import json, sys
d = json.load(sys.stdin)
p50 = {c["name"]: c["p50_ms"] for c in d["configurations"]}
ideal = {i["configuration"]: i["p50_over_ideal"] for i in d["ideals"]}
t, o = "branched, 2 processors", "branched, 2 processors, ort"
print("%-14s %-6s %-30s %9.2f ms %9.2f ms %13.2fx %13.2fx %11.2fx %11.2fx" % (sys.argv[1], sys.argv[2], sys.argv[3],
      p50[t], p50[o], p50["original, 1 core"] / p50[t], p50["original, onnxruntime 2 threads"] / p50[o],
      ideal[t], ideal[o]))' "$m" "$r" "$v"
    done
  done
done
