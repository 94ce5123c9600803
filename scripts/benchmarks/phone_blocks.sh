#!/usr/bin/env bash
# Block-level latency predictors on real phone measurements: builds the
# `phone_blocks` example in release, trains one random forest per phone on 80%
# of the MBConv blocks in data/phone-latency (fixed seeds), prints
# ±5/10/15% accuracy, RMSE and RMSPE on the held-out 20%, and saves the
# forests to data/predictors/<phone>_blocks.forest.json. Target: ±10% accuracy
# on the held-out 20% >= 95% for each phone.
#
# usage: scripts/benchmarks/phone_blocks.sh [--no-save] [--data DIR] [--out DIR]
#            [--trees N] [--depth N] [--leaf N] [--max-features N]
#            [--split-seed N] [--fit-seed N]
# After changing the defaults in crates/predictor/src/phone.rs, rerun without
# --no-save and update data/predictors/README.md with the printed numbers.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

cargo build --release --quiet -p predictor --example phone_blocks
target_dir="${CARGO_TARGET_DIR:-target}"
exec "${target_dir}/release/examples/phone_blocks" "$@"
