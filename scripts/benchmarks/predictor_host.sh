#!/usr/bin/env bash
# The host latency model judged end to end on both cores, with and without
# its in-model calibration, on one set of measurements: per core, times the
# 80 calibration models (calibrate_models: 60 ResNet/MobileNetV2/RegNet-style
# and 20 VGG/Inception-style from seeds 5000/6000) and the 52
# held-out models (model_accuracy --wide 10: 12 fixtures, 30 generated
# ResNet/MobileNetV2/RegNet-style, 10 VGG/Inception-style from seeds 1/1001)
# on tract, one thread pinned to the core, in interleaved rounds; fits the
# calibration to the first set and judges the profile on the second,
# uncalibrated and calibrated. Keeps every measurement in OUT (--times files:
# model_accuracy/calibrate_models --times F judge again without timing), the
# fitted calibrations as OUT/cpuN-calibration.json; INSTALL=1 copies them to
# data/profiles/host/cpuN/calibration.json, which configs/devices/host.toml
# names. Run on an idle machine (about 10 min per core here).
#
#   OUT=target/predictor-host INSTALL=0 CORES="0 1" scripts/benchmarks/predictor_host.sh [--reps 10] [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
OUT="${OUT:-target/predictor-host/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
cargo build --release -q -p predictor --example model_accuracy --example calibrate_models
bin="$CARGO_TARGET_DIR/release/examples"
for core in ${CORES:-0 1}; do
  p="cpu$core"
  echo "== $p: calibration models"
  "$bin/calibrate_models" --device configs/devices/host.toml --processor "$p" --core "$core" \
    --times "$OUT/$p-times-calibration.json" -o "$OUT/$p-calibration.json" "$@" | tee "$OUT/$p-calibrate.txt"
  echo "== $p: held-out models, uncalibrated"
  "$bin/model_accuracy" --device configs/devices/host.toml --processor "$p" --core "$core" --wide 10 \
    --uncalibrated --times "$OUT/$p-times-heldout.json" "$@" | tee "$OUT/$p-heldout-uncalibrated.txt"
  echo "== $p: held-out models, calibrated (the same measurements)"
  "$bin/model_accuracy" --device configs/devices/host.toml --processor "$p" --core "$core" --wide 10 \
    --uncalibrated --calibration "$OUT/$p-calibration.json" --times "$OUT/$p-times-heldout.json" "$@" \
    | tee "$OUT/$p-heldout-calibrated.txt"
  if [ "${INSTALL:-0}" = 1 ]; then
    cp "$OUT/$p-calibration.json" "data/profiles/host/$p/calibration.json"
    echo "installed data/profiles/host/$p/calibration.json"
  fi
done
echo "measurements and reports in $OUT"
