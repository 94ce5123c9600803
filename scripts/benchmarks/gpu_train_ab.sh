#!/usr/bin/env bash
# Training speed of LibTorch builds of `stretch` side by side on a GPU
# machine (no Rust toolchain there: binaries built elsewhere with
# scripts/build_libtorch.sh --for-torch VERSION): one epoch of MODEL on the
# IDX data in DATA_DIR per run, every binary once per round at each batch
# size, interleaved, ROUNDS rounds; prints each run's epoch line (training
# images/s, validation top-1) under its name.
#
#   scripts/benchmarks/gpu_train_ab.sh DATA_DIR MODEL NAME=BINARY[=EXTRA ARGS] ...
#
# BINARY may be compressed (.gz or .xz). ROUNDS (2), BATCHES ("64 256"), LIMIT (training
# images; default all) and BACKEND (tch:cuda:0) can be set; libtorch comes from python3's torch (or TORCH_LIB).
set -uo pipefail
DATA="$1" MODEL="$2"
shift 2
ROUNDS="${ROUNDS:-2}" BATCHES="${BATCHES:-64 256}" BACKEND="${BACKEND:-tch:cuda:0}"
source "$(dirname "$0")/gpu_common.sh"
LIMIT_ARGS=()
[[ -n "${LIMIT:-}" ]] && LIMIT_ARGS=(--limit "$LIMIT")
WORK=$(mktemp -d)
NAMES=() BINS=() EXTRAS=()
for spec in "$@"; do
  IFS='=' read -r name bin extra <<<"$spec"
  NAMES+=("$name") BINS+=("$(unpack "$bin" "$WORK/$name")") EXTRAS+=("${extra:-}")
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in $(seq 1 "$ROUNDS"); do
  for batch in $BATCHES; do
    for k in "${!NAMES[@]}"; do
      line=$("${BINS[$k]}" train "$MODEL" --dataset "mnist:$DATA" --epochs 1 "${LIMIT_ARGS[@]}" --batch-size "$batch" \
        --backend "$BACKEND" ${EXTRAS[$k]} -o "$WORK/out.onnx" 2>&1 | grep -E "epoch +1/1|error")
      echo "round $round batch $batch ${NAMES[$k]}: $line"
    done
  done
done
rm -rf "$WORK"
