#!/usr/bin/env bash
# Accuracy of branched models at the phone's precisions (issue 49's table):
# Fashion-MNIST, resnet-mini and mbnet-mini, per seed: the fp32 original,
# the fp32 branched model, the branched model after post-training
# quantization at snapdragon855's precisions (CPU and DSP int8, GPU fp16)
# and after quantization-aware fine-tuning, with params, MACs and file
# sizes (`stretch compare-accuracy --precision profile`).
#
#   scripts/benchmarks/precision_accuracy.sh [EPOCHS] [LIMIT] [SEEDS] [QAT_EPOCHS]
#
# Defaults: 5 epochs on the first 3,000 training images, seeds "0 1", 2
# epochs of fine-tuning at --lr / 10; validation is always the 10,000-image
# t10k test split. Seeds run in parallel, one thread each.
#
# The branching is planned where the phone would run the model: at
# 224x224 on snapdragon855 (cpu, gpu, dsp, --alpha 1). At 28x28 no stage of
# either model branches on that profile (every stage takes well under the
# ~1 ms a meeting point costs), so the 224x224 original and branched models
# are converted to 28x28 inputs (the zoo models are fully convolutional:
# the same weights and branches) and trained at 28x28. mbnet-mini has no
# branched plan on snapdragon855 at 224x224 either: its "branched" model is
# the plan's, every node on the int8 CPU.
set -euo pipefail
EPOCHS="${1:-5}"
LIMIT="${2:-3000}"
SEEDS="${3:-0 1}"
QAT_EPOCHS="${4:-2}"
source "$(dirname "$0")/precision_common.sh"
need_fashion
OUT="${OUT:-target/precision-accuracy}"
mkdir -p "$OUT"
for M in resnet-mini mbnet-mini; do
  "$STRETCH" zoo "$M" --input-size 224 --classes 10 --seed 0 -o "$OUT/$M-224.onnx" | tail -1
  "$STRETCH" stretch "$OUT/$M-224.onnx" --device "$DEVICE" --processors cpu,gpu,dsp --alpha 1 \
    --plan-out "$OUT/$M.plan.json" -o "$OUT/$M-224-branched.onnx" | tail -1
  "$STRETCH" convert "$OUT/$M-224.onnx" --input-shape 1,3,28,28 -o "$OUT/$M.onnx" | tail -1
  "$STRETCH" convert "$OUT/$M-224-branched.onnx" --input-shape 1,3,28,28 -o "$OUT/$M-branched.onnx" | tail -1
done
START=$(date +%s)
PIDS=()
CORE=0
for SEED in $SEEDS; do
  (
    for M in resnet-mini mbnet-mini; do
      taskset -c "$((CORE % $(nproc)))" "$STRETCH" compare-accuracy "$OUT/$M.onnx" "$OUT/$M-branched.onnx" \
        --dataset "mnist:$DATA" --epochs "$EPOCHS" --limit "$LIMIT" --threads 1 --seed "$SEED" \
        --precision profile --device "$DEVICE" --qat-epochs "$QAT_EPOCHS" \
        --out-dir "$OUT/$M-seed$SEED" --json "$OUT/$M-seed$SEED.json" >"$OUT/$M-seed$SEED.log" 2>&1
    done
  ) &
  PIDS+=($!)
  CORE=$((CORE + 1))
done
for P in "${PIDS[@]}"; do wait "$P"; done
echo "training took $(( $(date +%s) - START )) s (wall, seeds in parallel)"
python3 scripts/benchmarks/precision_table.py "$OUT" $SEEDS
# Top-1 agreement of each trained branched model's post-training quantized
# file with onnxruntime's quantize_static of the same fp32 model on the same
# calibration images (nodes of non-int8 processors left float there), on
# 256 images of the test split.
PY=.venv/bin/python
[[ -x "$PY" ]] || PY=python3
for SEED in $SEEDS; do
  for M in resnet-mini mbnet-mini; do
    TRAINED="$OUT/$M-seed$SEED/branched1-$M-branched.onnx"
    [[ -f "$TRAINED" ]] || continue
    CAL="$OUT/$M-seed$SEED/calibration"
    "$STRETCH" quantize "$TRAINED" --device "$DEVICE" --calibration "mnist:$DATA" --samples 128 \
      --split-seed "$SEED" --save-calibration "$CAL" -o "$CAL/ptq.onnx" >/dev/null
    echo "$M seed $SEED: $("$PY" scripts/check_quantized.py scales "$CAL/fp32.onnx" "$CAL/samples.npy" "$CAL/ptq.onnx" \
      --validation "$CAL/validation.npy" 2>&1 | grep -E 'agree|below' | tr '\n' ' ')"
  done
done
