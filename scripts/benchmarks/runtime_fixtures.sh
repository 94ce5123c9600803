#!/usr/bin/env bash
# The whole NN-Stretch path on torchvision fixtures on this machine: plan on
# the measured host profile (cpu0, cpu1), branch (random weights, seed 1),
# then `stretch bench` the branched model against the original in one run
# (original on 1 core, original with 2 intra-op threads, branched sequential,
# branched on cpu0 inline + cpu1 pinned pool, subgraphs nothing else runs
# beside with two intra-op threads: alone_threads=2; OPTS replaces that
# suffix of both processors, e.g. OPTS=",alone_threads=2,wait=poll" as
# configs/runtime/host.toml has it). Run on an idle machine.
#
# PLAN_ARGS are added to the plan (see fixture_common.sh).
#
#   RUNS=60 OPTS=",alone_threads=2" scripts/benchmarks/runtime_fixtures.sh [MODEL...]   (default: resnet18 resnet50 mobilenet_v2)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 resnet50 mobilenet_v2)
for m in "${models[@]}"; do
  echo "== $m"
  prepare_fixture "$m"
  "$S" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "${RUNS:-30}" \
    --processor "cpu0=inline:core0${OPTS-,alone_threads=2}" --processor "cpu1=pool:core1${OPTS-,alone_threads=2}" --trace "$out/$m.trace.json"
done
