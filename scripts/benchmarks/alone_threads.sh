#!/usr/bin/env bash
# Issue 16's lever "let the core that has no branch of its own help in the
# segments that are not branched": the same branched models benched with
# and without `alone_threads=2` on both processors (subgraphs nothing else
# of a request runs beside, i.e. stem, head, merges and stages Eq. 4 keeps
# whole, get two intra-op threads, free to use both cores), invocations
# interleaved, ROUNDS rounds. Prints per invocation, from `stretch bench
# --json`, the branched model's p50 on tract and on onnxruntime and its
# ratio to the same invocation's references (tract original on 1 core,
# onnxruntime original with 2 threads). Uses the branched files of
# runtime_fixtures.sh (made when missing). Never while something builds.
#
#   ROUNDS=2 RUNS=30 scripts/benchmarks/alone_threads.sh [MODEL...]   (default: resnet18 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 mobilenet_v2)
for m in "${models[@]}"; do
  [ -f "$out/$m.branched.onnx" ] || prepare_fixture "$m" > /dev/null
done
printf '%-14s %-6s %-13s %12s %12s %14s %14s\n' model round alone_threads "tract p50" "ort p50" "tract/orig 1c" "ort/ort 2thr"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for m in "${models[@]}"; do
    for a in "" ",alone_threads=2"; do
      label="${a#,alone_threads=}"
      "$S" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" \
        --processor "cpu0=inline:core0$a" --processor "cpu1=pool:core1$a" \
        --trace "$out/$m.alone.trace.json" --json 2> /dev/null \
      | python3 -c '
import json, sys
d = json.load(sys.stdin)
p50 = {c["name"]: c["p50_ms"] for c in d["configurations"]}
t, o = p50["branched, 2 processors"], p50["branched, 2 processors, ort"]
print("%-14s %-6s %-13s %9.2f ms %9.2f ms %13.2fx %13.2fx" % (sys.argv[1], sys.argv[2], sys.argv[3], t, o,
      p50["original, 1 core"] / t, p50["original, onnxruntime 2 threads"] / o))' "$m" "$r" "${label:-off}"
    done
  done
done
