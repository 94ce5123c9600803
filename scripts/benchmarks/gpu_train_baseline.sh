#!/usr/bin/env bash
# Where a LibTorch `stretch`'s training time goes on a GPU machine, against
# PyTorch training the same network there (scripts/benchmarks/
# torch_train_structure.py; no Rust toolchain on that machine: the binary is
# built elsewhere with scripts/build_libtorch.sh --for-torch VERSION).
# Per round, per batch size, for MODELS_DIR/NAME.onnx and NAME.struct.json
# (torch_train_structure.py dump) of each NAME: stretch trains 2 epochs on
# the first LIMIT Fashion-MNIST images with each of VARIANTS (stretch's
# options per variant, `+` for a space: "--conv-grad+libtorch")
# (the second epoch's training images/s is reported: the first warms up),
# then PyTorch trains the same structure on random batches of the same shape
# for TORCH_SECONDS, once with the batch on the GPU and no per-step reads,
# once as a data-loading loop would (pinned host batches, loss read every
# step). With BASELINE_BIN (another build of stretch, .gz/.xz or not),
# each stretch run is followed by the same run of that build. Interleaved;
# ROUNDS rounds. Then, per variant, one
# such run of the first NAME at the first batch size with --phase-times (the
# second epoch's time per step in each phase, the device waited for between
# phases). When nsys is on the machine, one stretch epoch is also profiled
# and the GPU kernels it ran are summed by time. With TEST_BIN (the
# training crate's tests from TESTS=1 scripts/build_libtorch.sh, .gz or
# not), those tests run first. First of all, scripts/benchmarks/
# torch_conv_rules.py times burn's convolution gradient rules against
# PyTorch's own on the first NAME's convolutions at each batch size
# (CONV_RULES=0 skips it).
# Everything goes to OUT_DIR/baseline.log.
#
#   scripts/benchmarks/gpu_train_baseline.sh BINARY DATA_DIR MODELS_DIR OUT_DIR
#
# NAMES ("resnet-mini resnet-mini-nobn"), VARIANTS ("--autograd+burn"), BATCHES ("256 1024"), ROUNDS (2),
# LIMIT (12000), TORCH_SECONDS (5), BACKEND (tch:cuda:0) can be set. The learning
# rate is 0.01 everywhere (the network without BatchNorm diverges at the
# table's rates; throughput does not depend on it).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN="$1" DATA="$2" MODELS="$3" OUT="$4"
NAMES="${NAMES:-resnet-mini resnet-mini-nobn}" VARIANTS="${VARIANTS:---autograd+burn}" BATCHES="${BATCHES:-256 1024}" ROUNDS="${ROUNDS:-2}"
LIMIT="${LIMIT:-12000}" SECONDS_EACH="${TORCH_SECONDS:-5}" BACKEND="${BACKEND:-tch:cuda:0}"
mkdir -p "$OUT"
source scripts/benchmarks/gpu_common.sh
BIN=$(unpack "$BIN" /tmp/stretch-tch)
BASE=""
[[ -z "${BASELINE_BIN:-}" ]] || BASE=$(unpack "$BASELINE_BIN" /tmp/stretch-tch-base)
LOG="$OUT/baseline.log"
WORK=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  echo "nsys: ${NSYS:-none}"
  if [[ -n "${TEST_BIN:-}" ]]; then
    echo "== $(basename "$TEST_BIN")"
    "$(unpack "$TEST_BIN" "$WORK/training-tests")" --test-threads 1 2>&1 | grep -E "^test |test result"
  fi
  [[ "${CONV_RULES:-1}" == 0 ]] || for batch in $BATCHES; do
    python3 scripts/benchmarks/torch_conv_rules.py "$MODELS/${NAMES%% *}.struct.json" "$batch" cuda 2>&1 | grep -v -i warn
  done
  run() { # NAME BATCH VARIANT EXTRA...: stretch's second-epoch lines
    local name=$1 batch=$2 variant=$3
    shift 3
    "$BIN" train "$MODELS/$name.onnx" --dataset "mnist:$DATA" --limit "$LIMIT" --epochs 2 --batch-size "$batch" \
      --lr 0.01 --backend "$BACKEND" ${variant//+/ } "$@" -o "$WORK/out.onnx" 2>&1 | grep -E "epoch +2/2|rror"
  }
  for round in $(seq 1 "$ROUNDS"); do
    for batch in $BATCHES; do
      for name in $NAMES; do
        for variant in $VARIANTS; do
          echo "round $round batch $batch $name stretch ${variant//+/ }: $(run "$name" "$batch" "$variant" | tail -1)"
          [[ -z "$BASE" ]] || echo "round $round batch $batch $name stretch (BASELINE_BIN) ${variant//+/ }: $(BIN=$BASE run "$name" "$batch" "$variant" | tail -1)"
        done
        echo "round $round batch $batch $name pytorch: $(python3 scripts/benchmarks/torch_train_structure.py train "$MODELS/$name.struct.json" "$batch" "$SECONDS_EACH" 2>&1 | tail -1)"
        echo "round $round batch $batch $name pytorch, host batches and loss read: $(python3 scripts/benchmarks/torch_train_structure.py train-host "$MODELS/$name.struct.json" "$batch" "$SECONDS_EACH" 2>&1 | tail -1)"
      done
    done
  done
  for variant in $VARIANTS; do
    echo "phases, ${NAMES%% *}, batch ${BATCHES%% *}, ${variant//+/ }:"
    run "${NAMES%% *}" "${BATCHES%% *}" "$variant" --phase-times
  done
  if [[ -n "${NSYS:-}" ]]; then
    name=${NAMES%% *}
    "$NSYS" profile -o "$WORK/prof" "$BIN" train "$MODELS/$name.onnx" --dataset "mnist:$DATA" --limit 5000 --epochs 1 \
      --batch-size 256 --lr 0.01 --backend "$BACKEND" -o "$WORK/out.onnx" >/dev/null 2>&1
    "$NSYS" stats --report cuda_gpu_kern_sum --format csv "$WORK/prof.nsys-rep" 2>&1 | head -30
  fi
} 2>&1 | tee "$LOG"
rm -rf "$WORK"
