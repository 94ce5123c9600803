#!/usr/bin/env bash
# The PyTorch round trip against `stretch train`, by hand (needs torch):
# resnet-mini for 28x28 inputs and its `project` branched model (host
# profile, cpu0 + cpu1, --alpha 1) are each trained with one recipe (SGD
# momentum 0.9, lr 0.05, batch 64, weight decay 5e-4, cosine, one seed, no
# augmentation) on Fashion-MNIST, once by `stretch train` (flex, one
# thread) and once by scripts/torch/train.py under `torchrun
# --nproc-per-node 2` (DDP, gloo, one thread per process), from the same
# initial weights; the PyTorch weights come back through `stretch
# import-weights` and `stretch evaluate` scores them. Prints, per model,
# both top-1s on the 10,000 test images, their gap, and the imported
# model's top-1 as stretch measures it against what PyTorch measured.
#
#   PY=/path/to/python-with-torch scripts/benchmarks/torch_fashion.sh [EPOCHS] [LIMIT]
#
# EPOCHS defaults to 5; LIMIT trains on the first LIMIT training images
# (default 12000; "all" for the 60,000). SEEDS (default "0") lists the
# seeds, each a run of both frameworks. A step whose output is already in
# $OUT (default $TMPDIR/stretch-torch-fashion) is not run again. STRETCH=PATH
# uses a built `stretch`; DATA names the IDX directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
EPOCHS="${1:-5}"
LIMIT="${2:-12000}"
SEEDS="${SEEDS:-0}"
PY="${PY:-python3}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
OUT="${OUT:-${TMPDIR:-/tmp}/stretch-torch-fashion}"
if [[ -n "${STRETCH:-}" ]]; then
  S="$STRETCH"
else
  cargo build --release -q -p stretch-cli
  S="$CARGO_TARGET_DIR/release/stretch"
fi
TORCHRUN="$(dirname "$PY")/torchrun"
[[ -x "$TORCHRUN" ]] || TORCHRUN=torchrun
mkdir -p "$OUT"
LIMIT_S=() LIMIT_T=()
if [[ "$LIMIT" != all ]]; then LIMIT_S=(--limit "$LIMIT"); LIMIT_T=(--limit "$LIMIT"); fi
[[ -f "$OUT/m.onnx" ]] || "$S" zoo resnet-mini --input-size 28 --seed 0 -o "$OUT/m.onnx" > /dev/null
[[ -f "$OUT/b.onnx" ]] || "$S" stretch "$OUT/m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 \
  --alpha 1 --merge project -o "$OUT/b.onnx" > /dev/null
for seed in $SEEDS; do
  for v in m b; do
    [[ -f "$OUT/$v-s$seed-stretch.onnx" ]] && continue
    "$S" train "$OUT/$v.onnx" --dataset "mnist:$DATA" --epochs "$EPOCHS" "${LIMIT_S[@]}" --threads 1 --seed "$seed" \
      --metrics "$OUT/$v-s$seed-stretch.csv" -o "$OUT/$v-s$seed-stretch.onnx" > "$OUT/$v-s$seed-stretch.log" 2>&1 &
  done
  wait
done
for v in m b; do
  "$S" export "$OUT/$v.onnx" --format torch --force -o "$OUT/$v-torch" > /dev/null
  for seed in $SEEDS; do
    r="$OUT/$v-s$seed-torch"
    if [[ ! -f "$r.safetensors" ]]; then
      OMP_NUM_THREADS=1 "$TORCHRUN" --standalone --nproc-per-node 2 scripts/torch/train.py "$OUT/$v-torch" \
        --data "fashion-mnist:$DATA" --epochs "$EPOCHS" "${LIMIT_T[@]}" --seed "$seed" -o "$r.safetensors" > "$r.log" 2>&1
    fi
    "$S" import-weights "$OUT/$v.onnx" --from "$r.safetensors" -o "$r.onnx" > /dev/null
    "$S" evaluate "$r.onnx" --dataset "mnist:$DATA" > "$OUT/$v-s$seed-evaluate.log"
  done
done
"$PY" - "$OUT" "$EPOCHS" "$LIMIT" $SEEDS <<'EOF'
import re, statistics, sys
out, epochs, limit, *seeds = sys.argv[1:]
last = lambda path, pat: float(re.findall(pat, open(path).read())[-1])
print(f"Fashion-MNIST, {epochs} epochs on {limit} training images, top-1 on the 10,000 test images")
print("| model | seed | stretch train | train.py (DDP x2) | gap (points) | imported, stretch evaluate | PyTorch measured |")
print("|---|---|---|---|---|---|---|")
for v, name in (("m", "resnet-mini"), ("b", "resnet-mini project (cpu0, cpu1)")):
    gaps = []
    for seed in seeds:
        p = f"{out}/{v}-s{seed}"
        s = last(f"{p}-stretch.log", r"validation top-1 ([0-9.]+)%")
        t = last(f"{p}-torch.log", r"top-1 ([0-9.]+)%")
        e = last(f"{p}-evaluate.log", r"top-1 ([0-9.]+)%")
        gaps.append(t - s)
        print(f"| {name} | {seed} | {s:.2f}% | {t:.2f}% | {t - s:+.2f} | {e:.2f}% | {t:.2f}% |")
    if len(seeds) > 1:
        print(f"| {name} | mean | | | {statistics.mean(gaps):+.2f} | | |")
EOF
