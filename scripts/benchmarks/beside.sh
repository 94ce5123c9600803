#!/usr/bin/env bash
# What running beside each other does to a branched fixture's subgraphs,
# outside the runtime: each model is planned and branched as in
# runtime_fixtures.sh, cut into its subgraph files (write_subgraphs), and
# cpu1's subgraphs are timed on core 1 while core 0 is idle, runs cpu0's
# subgraphs in a loop, or spins without touching memory (example `beside`,
# the three interleaved), on tract and on onnxruntime. Compare its ratios
# with `stretch bench`'s "in-run" line (the same subgraphs inside the
# runtime). Run on an idle machine.
#
#   ROUNDS=6 scripts/benchmarks/beside.sh [MODEL...]   (default: resnet18 resnet50 mobilenet_v2 regnet_x_1_6gf)
set -euo pipefail
source "$(dirname "$0")/fixture_common.sh"
cargo build --release -q -p scheduler-rt --features ort --example write_subgraphs --example beside
E="$CARGO_TARGET_DIR/release/examples"
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(resnet18 resnet50 mobilenet_v2 regnet_x_1_6gf)
for m in "${models[@]}"; do
  echo "== $m"
  prepare_fixture "$m"
  rm -rf "$out/$m.subgraphs"
  "$E/write_subgraphs" "$out/$m.branched.onnx" "$out/$m.subgraphs" > /dev/null
  for engine in tract ort; do
    "$E/beside" "$engine" "${ROUNDS:-6}" "$out/$m.subgraphs" | tail -4
  done
done
