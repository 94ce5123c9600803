#!/usr/bin/env bash
# The host latency model judged end to end on both cores, with and without
# an in-model calibration: per core, model_accuracy times the 52 held-out
# models (12 fixtures, 30 generated ResNet/MobileNetV2/RegNet-style and 10
# VGG/Inception-style from seeds 1/1001) and 80 calibration models (60 and
# 20 of the same families from seeds 5000/6000) on tract, one thread pinned
# to the core, all in the same interleaved rounds (so the machine's drift in
# speed falls on the fit and the judgement alike); fits the calibration to
# the second set and judges the profile on the first, uncalibrated and
# calibrated. Keeps the measurements in OUT/cpuN-times.json (model_accuracy
# --times F judges again without timing) and the calibrations as
# OUT/cpuN-calibration.json; INSTALL=1 copies them to
# PROFILE/cpuN/calibration.json (default data/profiles/host; the profile
# configs/devices/host.toml reads on this CPU names cpu0's). Run on an idle
# machine (about 10 min per core here).
#
#   OUT=target/predictor-host INSTALL=0 CORES="0 1" PROFILE=data/profiles/host scripts/benchmarks/predictor_host.sh [--reps 10] [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
OUT="${OUT:-target/predictor-host/$(date +%Y%m%d-%H%M%S)}"
PROFILE="${PROFILE:-data/profiles/host}"
mkdir -p "$OUT"
cargo build --release -q -p predictor --example model_accuracy
for core in ${CORES:-0 1}; do
  p="cpu$core"
  echo "== $p"
  "$CARGO_TARGET_DIR/release/examples/model_accuracy" --device configs/devices/host.toml --processor "$p" --core "$core" \
    --wide 10 --calibrate-with 60 --times "$OUT/$p-times.json" --calibration-out "$OUT/$p-calibration.json" \
    --dump "$OUT/$p-predictions.json" "$@" | tee "$OUT/$p.txt"
  if [ "${INSTALL:-0}" = 1 ]; then
    cp "$OUT/$p-calibration.json" "$PROFILE/$p/calibration.json"
    echo "installed $PROFILE/$p/calibration.json"
  fi
done
echo "measurements and reports in $OUT"
