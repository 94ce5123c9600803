#!/usr/bin/env bash
# End-to-end accuracy of the host latency model: measures 42 models (the 12
# torchvision fixtures plus 30 generated ResNet/MobileNetV2/RegNet-style
# variants with random depth and width) twice on tract (two compilations,
# timed in interleaved rounds), one thread pinned to
# a core, and compares with `configs/devices/host.toml`'s prediction.
# Prints ±5/±10/±15% accuracy, RMSE, RMSPE, the measurement's own
# repeatability and the time to predict resnet50. Run on an idle machine.
#
#   scripts/benchmarks/predictor_accuracy.sh [--processor cpu1 --core 1] [--generated 30] [--wide 0] [--reps 10] [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p predictor --example model_accuracy
"$CARGO_TARGET_DIR/release/examples/model_accuracy" --device configs/devices/host.toml --processor cpu0 --core 0 "$@"
