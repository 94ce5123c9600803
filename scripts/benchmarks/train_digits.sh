#!/usr/bin/env bash
# Accuracy of a stretched model against its original on real data: the zoo's
# resnet-mini (3 stages) for 32x32 inputs, and its two-branch versions on the
# host profile (cpu0 + cpu1) in both merge modes, each trained from scratch
# on scikit-learn's digits (upscaled to 32x32) with the same recipe and seed.
#
#   scripts/benchmarks/train_digits.sh [EPOCHS] [THREADS]
#
# The stages of a 32x32 model are predicted at ~0.4 ms, so the host's 33 us
# core-to-core link fails Eq. 4 at alpha 0.1; --alpha 1 lets every stage branch.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
EPOCHS="${1:-30}"
THREADS="${2:-1}"
cargo build --release -q -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"
OUT="${OUT:-target/train-digits}"
mkdir -p "$OUT"
"$STRETCH" zoo resnet-mini --input-size 32 --classes 10 --seed 0 -o "$OUT/resnet-mini.onnx"
for MERGE in concat project; do
  "$STRETCH" stretch "$OUT/resnet-mini.onnx" --device configs/devices/host.toml --alpha 1 \
    --merge "$MERGE" -o "$OUT/resnet-mini-$MERGE.onnx" | tail -3
done
"$STRETCH" compare-accuracy "$OUT/resnet-mini.onnx" "$OUT/resnet-mini-concat.onnx" "$OUT/resnet-mini-project.onnx" \
  --dataset digits --epochs "$EPOCHS" --threads "$THREADS" --seed 0 --out-dir "$OUT/compare"
