#!/usr/bin/env bash
# Runs the GPU checks on a machine with an NVIDIA GPU and a pip torch but no
# Rust toolchain, with a LibTorch `stretch` built elsewhere for that torch
# (`scripts/build_libtorch.sh --for-torch VERSION`):
#   1. one epoch of the zoo's resnet-mini on the bundled digits with
#      --backend tch:cuda:0 (the check scripts/build_libtorch.sh makes where
#      it builds), and the same epoch on tch:cpu beside it;
#   2. scripts/benchmarks/fashion_mnist.sh on the full Fashion-MNIST training
#      set on that GPU (BACKEND=tch:cuda:0, JOBS models at a time per seed,
#      no benches: those measure the host's cores), on the models made on the
#      host (MODELS), stopped after LIMIT_S seconds if unfinished.
#
#   scripts/benchmarks/fashion_mnist_gpu.sh BINARY DATA_DIR MODELS_DIR OUT_DIR
#
# BINARY may be compressed (.gz or .xz). libtorch comes from python3's torch
# (or TORCH_LIB). EPOCHS (10), SEEDS ("0 1"), JOBS (4), LIMIT_S (480),
# LIMIT (training images; default all), BACKEND (tch:cuda:0) and TRAIN_ARGS
# (fashion_mnist.sh's) can be set. OUT_DIR
# gets the logs, nvidia-smi's view, and fashion's seed files (seedS.json,
# seedS.log) and per-model metrics (metrics.tar.gz).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN="$1" DATA="$2" MODELS="$3" OUT="$4"
EPOCHS="${EPOCHS:-10}" SEEDS="${SEEDS:-0 1}" JOBS="${JOBS:-4}" LIMIT_S="${LIMIT_S:-480}"
LIMIT="${LIMIT:-}" BACKEND="${BACKEND:-tch:cuda:0}"
mkdir -p "$OUT"
source scripts/benchmarks/gpu_common.sh
BIN=$(unpack "$BIN" /tmp/stretch-tch)
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "$(getconf _NPROCESSORS_ONLN) CPUs: $(grep -m1 "model name" /proc/cpuinfo)"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "libtorch from $TORCH_LIB"
  ldd "$BIN" | grep -E 'torch|c10|not found'
} 2>&1 | tee "$OUT/machine.txt"

CHECK=$(mktemp -d)
"$BIN" zoo resnet-mini --input-size 32 -o "$CHECK/resnet-mini.onnx" >/dev/null
for backend in "$BACKEND" tch:cpu; do
  echo "== one epoch on the digits, --backend $backend"
  start=$(date +%s%N)
  "$BIN" train "$CHECK/resnet-mini.onnx" --dataset digits --epochs 1 --backend "$backend" \
    -o "$CHECK/trained-${backend//:/-}.onnx"
  echo "rc $? in $(( ($(date +%s%N) - start) / 1000000 )) ms"
done 2>&1 | tee "$OUT/digits.log"

echo "== Fashion-MNIST, training images: ${LIMIT:-all}, $EPOCHS epochs, options: ${TRAIN_ARGS:-defaults}, seeds $SEEDS, $JOBS jobs per seed on $BACKEND (stopped after $LIMIT_S s)"
FM=/tmp/fashion-gpu
start=$(date +%s)
STRETCH="$BIN" BACKEND="$BACKEND" JOBS="$JOBS" BENCH=0 TRAIN_ARGS="${TRAIN_ARGS:-}" DATA="$DATA" MODELS="$MODELS" OUT="$FM" \
  timeout -s INT "$LIMIT_S" bash scripts/benchmarks/fashion_mnist.sh "$EPOCHS" "$LIMIT" "$SEEDS" 2>&1 | tee "$OUT/fashion.log"
echo "fashion_mnist.sh: rc ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$OUT/fashion.log"
for SEED in $SEEDS; do
  cp "$FM/seed$SEED.json" "$FM/seed$SEED.log" "$OUT/" 2>/dev/null
done
(cd "$FM" && tar czf "$OUT/metrics.tar.gz" seed*/*.csv 2>/dev/null)
ls -la "$OUT"
