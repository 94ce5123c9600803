#!/usr/bin/env bash
# Puzzle on this machine: one model group of three zoo models on the
# heterogeneous host configuration (configs/runtime/hetero.toml: cpu0 runs
# tract on core 0 with every operator, cpu1 runs onnxruntime on core 1
# without MaxPool and Gemm). `stretch analyze --runtime-config` measures
# every piece once (database in $OUT/costs.json) and searches; then
# `stretch serve --plan` runs the GA's plan, the best model-level mapping
# and Band's lst in turn (ROUNDS rounds) and prints each group's measured
# makespan beside the analyzer's prediction and the simulator's with the
# pieces re-timed before each round (--retime). Run twice by hand; never
# while something else builds.
#
#   scripts/benchmarks/puzzle_host.sh [DURATION_S] [ROUNDS]
#
# STRETCH=/path/to/stretch runs that binary instead of building this
# checkout (to compare two builds, alternate their runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
DURATION="${1:-20}"
ROUNDS="${2:-4}"
if [ -z "${STRETCH:-}" ]; then
  cargo build --release -q -p stretch-cli
  STRETCH="$CARGO_TARGET_DIR/release/stretch"
fi
OUT="${OUT:-target/puzzle-host}"
mkdir -p "$OUT"
"$STRETCH" zoo resnet-mini --input-size 32 --seed 0 -o "$OUT/mini32.onnx" > /dev/null
"$STRETCH" zoo mbnet-mini --input-size 64 --seed 1 -o "$OUT/mb64.onnx" > /dev/null
"$STRETCH" zoo resnet-mini --input-size 64 --seed 2 -o "$OUT/mini64.onnx" > /dev/null
cat > "$OUT/w.toml" <<'W'
seed = 1
duration_s = 10
[[group]]
name = "camera"
period_multiplier = 1.0
[[app]]
name = "mini32"
model = "mini32.onnx"
arrival = "group"
group = "camera"
[[app]]
name = "mb64"
model = "mb64.onnx"
arrival = "group"
group = "camera"
[[app]]
name = "mini64"
model = "mini64.onnx"
arrival = "group"
group = "camera"
W
/usr/bin/time -f "analyze took %e s" "$STRETCH" analyze --workload "$OUT/w.toml" --runtime-config configs/runtime/hetero.toml \
  --cost-db "$OUT/costs.json" -o "$OUT/plan.json"
"$STRETCH" serve --workload "$OUT/w.toml" --runtime-config configs/runtime/hetero.toml \
  --plan "$OUT/plan.json" --plan "$OUT/plan.best-mapping.json" --duration-s "$DURATION" --rounds "$ROUNDS" --retime
