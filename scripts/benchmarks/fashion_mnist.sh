#!/usr/bin/env bash
# Accuracy of stretched models on Fashion-MNIST (paper Table 7 style): the
# zoo's resnet-mini for 28x28 inputs and its two-branch versions on the host
# profile (cpu0 + cpu1): `project` and `concat` at the default capacity
# (>= 1.0x the original's MACs per branched stage) and `project` at 0.8, each
# trained from scratch with one recipe and seed, then each branched model
# again with the trained original as teacher (--distill). One seed per core,
# in parallel, one thread each; then every branched model is benchmarked
# against the original on this machine (tract, 1 core vs cpu0 + cpu1) and
# the table printed by scripts/benchmarks/fashion_table.py.
#
#   scripts/benchmarks/fashion_mnist.sh [EPOCHS] [LIMIT] [SEEDS]
#
# EPOCHS defaults to 10; LIMIT trains on the first LIMIT of the 60,000
# training images (default: all); validation is always the 10,000-image t10k
# test split. SEEDS defaults to "0 1". On this project's 2-core VM one
# resnet-mini epoch over 3,000 images takes ~35 s plus ~35 s of validation
# on one thread, so the full training set (~12 min per epoch and model) is a
# job for a bigger machine.
#
# BENCH_ONLY=1 skips the training and re-runs only the benches and the
# table over the seed files already in $OUT (for re-measuring speedups on a
# quiet machine).
#
# On a GPU machine (the LibTorch build, scripts/build_libtorch.sh):
#   STRETCH=path/to/stretch BACKEND=tch:cuda:0 JOBS=4 BENCH=0 scripts/benchmarks/fashion_mnist.sh
# STRETCH names a built binary (no cargo build), BACKEND is compare-accuracy's
# --backend (default flex), JOBS its --jobs (models trained at the same time
# per seed, default 1; seeds are pinned to a core each only on flex with
# JOBS=1), BENCH=0 skips the benches (they measure the host's CPU cores, so
# run them on the target machine with BENCH_ONLY=1 over the seed files), and
# DATA names the directory of the IDX files, TRAIN_ARGS adds options to every
# training (for example "--batch-size 256 --lr 0.2": the recipe stays one
# for all models and seeds). MODELS=DIR takes the original
# and the branched files (and plans) from DIR, as made by this script on the
# target machine, instead of planning here: the plan follows the host profile
# picked for this machine's CPU, so another machine could branch differently.
#
# The stages of a 28x28 model are predicted at ~0.4 ms, so the host's 33 us
# core-to-core link fails Eq. 4 at alpha 0.1; --alpha 1 lets every stage branch.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
EPOCHS="${1:-10}"
LIMIT="${2:-}"
SEEDS="${3:-0 1}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
BACKEND="${BACKEND:-flex}"
JOBS="${JOBS:-1}"
if [[ ! -d "$DATA" ]]; then
  echo "Fashion-MNIST is not installed: as root, apt-get install dataset-fashion-mnist (or run scripts/setup.sh)" >&2
  exit 1
fi
if [[ -z "${STRETCH:-}" ]]; then
  cargo build --release -q -p stretch-cli
  STRETCH="$CARGO_TARGET_DIR/release/stretch"
fi
OUT="${OUT:-target/fashion-mnist}"
mkdir -p "$OUT"
VARIANTS=("project 1.0,1.2" "concat 1.0,1.2" "project 0.8,1.2")
BRANCHED=()
if [[ -n "${MODELS:-}" ]]; then
  cp "$MODELS/resnet-mini.onnx" "$OUT/"
else
  "$STRETCH" zoo resnet-mini --input-size 28 --classes 10 --seed 0 -o "$OUT/resnet-mini.onnx"
fi
for V in "${VARIANTS[@]}"; do
  read -r MERGE CAP <<<"$V"
  NAME="resnet-mini-$MERGE-${CAP%%,*}"
  if [[ -n "${MODELS:-}" ]]; then
    cp "$MODELS/$NAME.onnx" "$MODELS/$NAME.plan.json" "$OUT/"
  else
    "$STRETCH" stretch "$OUT/resnet-mini.onnx" --device configs/devices/host.toml --alpha 1 \
      --merge "$MERGE" --capacity "$CAP" --plan-out "$OUT/$NAME.plan.json" -o "$OUT/$NAME.onnx" | tail -1
  fi
  BRANCHED+=("$OUT/$NAME.onnx")
done
LIMIT_ARGS=()
[[ -n "$LIMIT" ]] && LIMIT_ARGS=(--limit "$LIMIT")
if [[ "${BENCH_ONLY:-0}" != 1 ]]; then
START=$(date +%s)
CORE=0
PIDS=()
for SEED in $SEEDS; do
  PIN=()
  [[ "$BACKEND" == flex && "$JOBS" == 1 ]] && PIN=(taskset -c "$((CORE % $(nproc)))")
  "${PIN[@]}" "$STRETCH" compare-accuracy "$OUT/resnet-mini.onnx" "${BRANCHED[@]}" \
    --dataset "mnist:$DATA" --epochs "$EPOCHS" "${LIMIT_ARGS[@]}" --threads 1 --seed "$SEED" --distill \
    --backend "$BACKEND" --jobs "$JOBS" ${TRAIN_ARGS:-} \
    --out-dir "$OUT/seed$SEED" --json "$OUT/seed$SEED.json" >"$OUT/seed$SEED.log" 2>&1 &
  PIDS+=($!)
  CORE=$((CORE + 1))
done
for P in "${PIDS[@]}"; do wait "$P"; done
echo "training took $(( $(date +%s) - START )) s (wall, seeds in parallel)"
fi
[[ "${BENCH:-1}" == 0 ]] || for B in "${BRANCHED[@]}"; do
  "$STRETCH" bench "$B" --original "$OUT/resnet-mini.onnx" --runtime-config configs/runtime/host.toml --runs 60 --trace "$OUT/bench-trace.json" \
    --gantt "$OUT/bench-gantt.png" --json >"${B%.onnx}.bench.json"
done
python3 scripts/benchmarks/fashion_table.py "$OUT" $SEEDS
