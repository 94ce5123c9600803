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
#   With FIT="BATCH:LR[:AUTOGRAD] ...", step 2 is preceded by one epoch of
#   the whole table (both waves, both seeds) on PROBE_LIMIT (10000) training
#   images per candidate (--batch-size BATCH --lr LR [--autograd
#   AUTOGRAD]), timed; the table then
#   trains with the candidate that fits the most training images in what is
#   left of LIMIT_S (all 60,000 if several do: then the first that does),
#   on the first LIMIT images: the table's time is taken as EPOCHS x the
#   probe's time x (LIMIT + V) / (PROBE_LIMIT + V), V = 3,334 (validating
#   10,000 images as a third of training as many), solved for 0.9 x the
#   time left, in thousands, at most 60,000 (each probe's start-up is
#   counted once per epoch, so this errs long). nvidia-smi dmon samples the
#   GPU's utilisation every second into OUT_DIR/dmon.log throughout.
#
#   scripts/benchmarks/fashion_mnist_gpu.sh BINARY DATA_DIR MODELS_DIR OUT_DIR
#
# BINARY may be compressed (.gz or .xz). libtorch comes from python3's torch
# (or TORCH_LIB). EPOCHS (10), SEEDS ("0 1"), JOBS (4), LIMIT_S (480),
# LIMIT (training images; default all), BACKEND (tch:cuda:0) and TRAIN_ARGS
# (fashion_mnist.sh's) can be set; DIGITS=0 skips step 1. OUT_DIR gets the
# logs, nvidia-smi's view, and one archive (seeds.tar.gz) of fashion's seed
# files (seedS.json, seedS.log) and per-model metrics: the device tool
# brings back only a few files per call.
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

T0=$(date +%s)
nvidia-smi dmon -s u -d 1 >"$OUT/dmon.log" 2>&1 &
DMON=$!
trap 'kill $DMON 2>/dev/null' EXIT
CHECK=$(mktemp -d)
"$BIN" zoo resnet-mini --input-size 32 -o "$CHECK/resnet-mini.onnx" >/dev/null
DIGIT_BACKENDS=("$BACKEND" tch:cpu)
[[ "${DIGITS:-1}" == 0 ]] && DIGIT_BACKENDS=()
for backend in "${DIGIT_BACKENDS[@]}"; do
  echo "== one epoch on the digits, --backend $backend"
  start=$(date +%s%N)
  "$BIN" train "$CHECK/resnet-mini.onnx" --dataset digits --epochs 1 --backend "$backend" \
    -o "$CHECK/trained-${backend//:/-}.onnx"
  echo "rc $? in $(( ($(date +%s%N) - start) / 1000000 )) ms"
done 2>&1 | tee "$OUT/digits.log"

if [[ -n "${FIT:-}" ]]; then
  PROBE_LIMIT="${PROBE_LIMIT:-10000}"
  BEST_LIMIT=0
  for cand in $FIT; do
    IFS=: read -r batch lr grad <<<"$cand"
    args="--batch-size $batch --lr $lr${grad:+ --autograd $grad}"
    probe=/tmp/fashion-probe-${cand//:/-}
    start=$(date +%s%N)
    STRETCH="$BIN" BACKEND="$BACKEND" JOBS="$JOBS" BENCH=0 TRAIN_ARGS="$args" DATA="$DATA" \
      MODELS="$MODELS" OUT="$probe" bash scripts/benchmarks/fashion_mnist.sh 1 "$PROBE_LIMIT" "$SEEDS" \
      >"$probe.log" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    left=$(( LIMIT_S - ($(date +%s) - T0) ))
    fit=$(python3 -c "print(max(0, min(60, int((0.9 * $left / $EPOCHS * ($PROBE_LIMIT + 3334) / ($ms / 1000) - 3334) / 1000))) * 1000)")
    echo "probe $args: rc $rc, one epoch of the table on $PROBE_LIMIT images in $ms ms; $left s left: LIMIT $fit" | tee -a "$OUT/probe.log"
    { cat "$probe.log"; grep -h "img/s" "$probe"/seed*.log; } >>"$OUT/probe.log" 2>&1
    if [[ $rc == 0 && $fit -gt $BEST_LIMIT ]]; then
      BEST_LIMIT=$fit TRAIN_ARGS="$args"
    fi
  done
  [[ $BEST_LIMIT -gt 0 ]] || { echo "no candidate recipe ran and fits a thousand training images" | tee -a "$OUT/probe.log"; exit 1; }
  LIMIT=$BEST_LIMIT
  [[ $LIMIT -ge 60000 ]] && LIMIT=""
  LIMIT_S=$(( LIMIT_S - ($(date +%s) - T0) ))
  echo "table: LIMIT ${LIMIT:-all}, $TRAIN_ARGS, $LIMIT_S s" | tee -a "$OUT/probe.log"
fi

echo "== Fashion-MNIST, training images: ${LIMIT:-all}, $EPOCHS epochs, options: ${TRAIN_ARGS:-defaults}, seeds $SEEDS, $JOBS jobs per seed on $BACKEND (stopped after $LIMIT_S s)"
FM=/tmp/fashion-gpu
start=$(date +%s)
STRETCH="$BIN" BACKEND="$BACKEND" JOBS="$JOBS" BENCH=0 TRAIN_ARGS="${TRAIN_ARGS:-}" DATA="$DATA" MODELS="$MODELS" OUT="$FM" \
  timeout -s INT "$LIMIT_S" bash scripts/benchmarks/fashion_mnist.sh "$EPOCHS" "$LIMIT" "$SEEDS" 2>&1 | tee "$OUT/fashion.log"
echo "fashion_mnist.sh: rc ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$OUT/fashion.log"
(cd "$FM" && tar czf "$OUT/seeds.tar.gz" seed*.json seed*.log seed*/*.csv 2>/dev/null)
ls -la "$OUT"
