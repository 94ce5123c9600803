#!/usr/bin/env bash
# Heimdall (render + multi-DNN) on this machine and on the LG V50 profile.
#
# Measured (`stretch serve`): a rendering task at 30 fps (2.7 ms a frame,
# a calibrated blend of a 1080p frame) on core 0 ("cpu0", the GPU of the
# paper), three DNNs sharing it -- mobilenet_v2 (the high-priority app,
# ~20 ms, 5 fps) and, run continuously (closed loops), resnet50 (~100 ms,
# several frames long) and resnet18 branched for cpu0+cpu1 by `stretch
# stretch` on the host profile (~50 ms), all at 224x224 -- and core 1
# ("cpu1") as the CPU they may be offloaded to. Every policy
# in turn: whole models, 5-operator chunks, maxmin-utility,
# maxtotal-utility, each utility policy with and without offloading.
# Simulated (`stretch simulate`): Heimdall's immersive online shopping
# scenario on configs/devices/lg_v50.toml (Table 2 GPU latencies).
# Run on an idle machine (no build running):
#   DURATION=20 scripts/benchmarks/heimdall.sh [OUT_DIR]
# POLICIES=a,b,... runs only those policies.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
OUT="${1:-heimdall-run}"
D="${DURATION:-20}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
REPO="$(pwd)"
POL="${POLICIES:-whole,ops5,maxmin-utility,maxtotal-utility,maxmin-utility-offload,maxtotal-utility-offload}"

"$S" stretch fixtures/models/resnet18.onnx --random-weights 3 --device configs/devices/host.toml \
    --processors cpu0,cpu1 --plan-out "$OUT/plan.json" -o "$OUT/branched_resnet18.onnx" > /dev/null
cat > "$OUT/workload.toml" <<TOML
# Written by scripts/benchmarks/heimdall.sh.
seed = 1
duration_s = $D

[render]
processor = "cpu0"
fps = 30
render_ms = 2.7
margin_ms = 5
offload_to = "cpu1"

[[app]]
name = "mobilenet_v2"
model = "$REPO/fixtures/models/mobilenet_v2.onnx"
random_weights = 1
arrival = "closed"
fps = 5
slo_ms = 150
utility = { l0 = 1, beta = 100, gamma = 2 }
frames = { variation = 0.3 }

[[app]]
name = "resnet50"
model = "$REPO/fixtures/models/resnet50.onnx"
random_weights = 2
arrival = "closed"
slo_ms = 1000
frames = { variation = 0.05 }

[[app]]
name = "branched_resnet18"
model = "$OUT/branched_resnet18.onnx"
arrival = "closed"
slo_ms = 1000
frames = { variation = 0.05 }
TOML

echo "== measured on this machine (stretch serve), ${D} s per policy"
"$S" serve --workload "$OUT/workload.toml" --runtime-config configs/runtime/host.toml \
    --compare "$POL" --trace "$OUT/serve_trace.json" > "$OUT/serve.txt" 2> "$OUT/serve.log"
grep -E "chunk|isolated|render kernel|coordinator overhead" "$OUT/serve.log" || true
cat "$OUT/serve.txt"

echo
echo "== simulated: Heimdall's scenario on the LG V50 profile"
"$S" simulate --workload configs/workloads/heimdall_lg_v50.toml --device configs/devices/lg_v50.toml \
    --compare "$POL" 2>/dev/null
