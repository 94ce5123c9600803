#!/usr/bin/env bash
# Fits the host profile's in-model calibration for both cores
# (predictor::calibration): 40 generated models (30 ResNet/MobileNetV2/
# RegNet-style, 10 VGG/Inception-style; seeds 5000 and 6000, none of them in
# predictor_accuracy.sh's held-out set) measured on tract, one thread pinned
# to the core, in interleaved rounds, against the profile's uncalibrated
# predictions; writes data/profiles/host/cpuN/calibration.json, which
# configs/devices/host.toml names. Run on an idle machine, then
# predictor_accuracy.sh to judge it on the held-out models.
#
#   scripts/benchmarks/calibrate_host.sh [--reps 10] [--rounds 5] [--ridge 0.05]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p predictor --example calibrate_models
for core in 0 1; do
  "$CARGO_TARGET_DIR/release/examples/calibrate_models" --device configs/devices/host.toml \
    --processor "cpu$core" --core "$core" -o "data/profiles/host/cpu$core/calibration.json" "$@"
done
