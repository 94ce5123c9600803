#!/usr/bin/env bash
# Two or more stretch binaries (e.g. before and after a runtime change)
# benching the same branched fixtures, invocations interleaved: every round
# runs every model on every binary, the binaries' order rotating. Each
# invocation measures its own baselines, so the ratios compare: per
# invocation, from `stretch bench --json`, the branched model's p50 on two
# processors (tract, then the onnxruntime engine), tract's original on one
# core over it (p50 and min), onnxruntime's 2-thread original over the ort
# engine's run (p50 and min), and each engine's p50 over its ideal. The
# fixtures are planned and branched once, by this checkout's binary, on the
# host profile (fixture_common.sh). Processors as runtime_fixtures.sh's:
# cpu0 inline on core 0, cpu1 a pool on core 1, OPTS appended to both.
# Never while something builds.
#
#   BINARIES="old=/tmp/stretch-old new=target/release/stretch" ROUNDS=2 RUNS=30 \
#     OPTS=",alone_threads=2,wait=poll" scripts/benchmarks/binaries_ab.sh [MODEL...]
#   (default models: resnet18 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
read -r -a binaries <<< "${BINARIES:?BINARIES=\"LABEL=PATH ...\" is required}"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 mobilenet_v2)
for m in "${models[@]}"; do
  echo "== $m"
  prepare_fixture "$m"
done
for b in "${binaries[@]}"; do
  echo "$b: $("${b#*=}" --version 2> /dev/null || echo "${b#*=}")"
done
printf '%-14s %-5s %-8s %10s %10s %12s %12s %10s %10s\n' model round binary "tract p50" "ort p50" \
  "1c/tract" "2thr/ort" "tract/idl" "ort/idl"
printf '%-14s %-5s %-8s %10s %10s %12s %12s %10s %10s\n' "" "" "" "" "" "p50 (min)" "p50 (min)" "" ""
n=${#binaries[@]}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in "${models[@]}"; do
    for k in $(seq 0 $((n - 1))); do
      b="${binaries[$(((k + r) % n))]}"
      "${b#*=}" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" \
        --processor "cpu0=inline:core0${OPTS-,alone_threads=2,wait=poll}" \
        --processor "cpu1=pool:core1${OPTS-,alone_threads=2,wait=poll}" \
        --trace "$out/$m.ab.trace.json" --json 2> /dev/null \
      | python3 -c '
import json, sys
d = json.load(sys.stdin)
c = {x["name"]: x for x in d["configurations"]}
ideal = {i["configuration"]: i["p50_over_ideal"] for i in d["ideals"]}
t, o = "branched, 2 processors", "branched, 2 processors, ort"
one, ref = c["original, 1 core"], c["original, onnxruntime 2 threads"]
print("%-14s %-5s %-8s %7.2f ms %7.2f ms %5.2fx (%.2fx) %5.2fx (%.2fx) %9.2fx %9.2fx" % (sys.argv[1], sys.argv[2], sys.argv[3],
      c[t]["p50_ms"], c[o]["p50_ms"], one["p50_ms"] / c[t]["p50_ms"], one["min_ms"] / c[t]["min_ms"],
      ref["p50_ms"] / c[o]["p50_ms"], ref["min_ms"] / c[o]["min_ms"], ideal[t], ideal[o]))' \
        "$m" "$r" "${b%%=*}"
    done
  done
done
