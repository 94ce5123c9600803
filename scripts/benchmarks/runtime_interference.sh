#!/usr/bin/env bash
# The paper's §7.4 experiment on this machine: a branched fixture (planned on
# the host profile for cpu0+cpu1, random weights) benchmarked with a
# CPU-burning thread pinned to core 0 during every timed run. `stretch bench`
# prints, in one run, the adaptive runtime's p50/p99 beside fixed placement
# and the original with 2 intra-op threads, and the Chrome trace holds every
# adaptive run with an instant event per move. Run on an idle machine.
#
#   scripts/benchmarks/runtime_interference.sh [MODEL] [CORES]   (default: resnet18 core0)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
m="${1:-resnet18}"
cores="${2:-core0}"
out="${TMPDIR:-/tmp}/stretch-runtime-interference"
mkdir -p "$out"
"$S" convert "fixtures/models/$m.onnx" --random-weights 1 -o "$out/$m.onnx" > /dev/null
"$S" stretch "fixtures/models/$m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 \
  --random-weights 1 --plan-out "$out/$m.plan.json" -o "$out/$m.branched.onnx" | tail -1
"$S" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "${RUNS:-40}" \
  --processor cpu0=inline:core0 --processor cpu1=pool:core1 --adaptive --interference "$cores" \
  --trace "$out/$m.trace.json" --gantt "$out/$m.gantt.png"
echo "moves recorded in the trace: $(grep -o "moved subgraph" "$out/$m.trace.json" | wc -l)"
