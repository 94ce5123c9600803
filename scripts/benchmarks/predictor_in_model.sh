#!/usr/bin/env bash
# Kernels timed inside whole models, as training rows for the host's
# forests: per core, the in_model_kernels example times every kernel of 300
# generated models (ResNet/MobileNetV2/RegNet-style from seeds 7000 and
# 9000, VGG/Inception-style from 8000 and 10000, ResNet-style with each
# stage's width drawn as a branched model's branches have them, so that
# every residue of the output channels modulo 32 occurs, from 9000 and
# 11000; none of them among the
# held-out models of model_accuracy, seeds 1/1001, or its calibration
# models, 5000/6000) on tract, one thread pinned to the core, and writes
# them to PROFILE/cpuN/in-model.csv (replacing it); then `stretch fit`
# refits PROFILE/cpuN/regressors.json, each class on its in-model rows
# (`--in-model prefer`; bn and act, which these models fuse away, keep
# their isolated rows), to the 10th percentile of each row's runs (STAT,
# default p10; median fits the median). About 4 min per core here. Run on an idle machine,
# then scripts/benchmarks/predictor_host.sh to judge and calibrate.
#
#   PROFILE=data/profiles/host CORES="0 1" STAT=p10 scripts/benchmarks/predictor_in_model.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
PROFILE="${PROFILE:-data/profiles/host}"
STAT="${STAT:-p10}"
cargo build --release -q -p predictor --example in_model_kernels
cargo build --release -q -p stretch-cli
for core in ${CORES:-0 1}; do
  p="cpu$core"
  csv="$PROFILE/$p/in-model.csv"
  rm -f "$csv"
  # forests on the isolated rows alone first, so that the example's
  # predictions take this version's features
  "$CARGO_TARGET_DIR/release/stretch" fit "$PROFILE/$p" --processor "$p" --statistic "$STAT" > /dev/null
  for seed in 7000 9000; do
    echo "== $p, seed $seed"
    "$CARGO_TARGET_DIR/release/examples/in_model_kernels" --device configs/devices/host.toml --processor "$p" \
      --core "$core" --generated 90 --wide 30 --branch-widths 30 --seed "$seed" --reps 10 --uncalibrated --rows-out "$csv" | tail -16
  done
  "$CARGO_TARGET_DIR/release/stretch" fit "$PROFILE/$p" --processor "$p" --in-model prefer --statistic "$STAT" | sed -n 1,13p
done
