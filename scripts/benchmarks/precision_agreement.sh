#!/usr/bin/env bash
# Top-1 agreement of stretch's post-training quantized files with
# onnxruntime's quantize_static model of the same trained fp32 model
# (issue 49, point 4: goal 99% of validation images), on trained models:
# Fashion-MNIST, resnet-mini and mbnet-mini branched for snapdragon855
# (planned at 224x224 on cpu, gpu and dsp, converted to 28x28 as in
# precision_accuracy.sh), trained EPOCHS epochs on LIMIT images per seed.
#
#   scripts/benchmarks/precision_agreement.sh [EPOCHS] [LIMIT] [SEEDS] [IMAGES]
#
# Defaults: 3 epochs, 3,000 images, seed 0, 2,000 validation images. Both
# files are calibrated on the same 128 images; the reference leaves the
# nodes of non-int8 processors float (this file computes the GPU's in
# fp16), so for resnet-mini, whose GPU branch is fp16, the figure also
# holds the fp16 rounding. Models train one after the other on both cores.
set -euo pipefail
EPOCHS="${1:-3}"
LIMIT="${2:-3000}"
SEEDS="${3:-0}"
IMAGES="${4:-2000}"
source "$(dirname "$0")/precision_common.sh"
need_fashion
OUT="${OUT:-target/precision-agreement}"
mkdir -p "$OUT"
for M in resnet-mini mbnet-mini; do
  "$STRETCH" zoo "$M" --input-size 224 --classes 10 --seed 0 -o "$OUT/$M-224.onnx" | tail -1
  "$STRETCH" stretch "$OUT/$M-224.onnx" --device "$DEVICE" --processors cpu,gpu,dsp --alpha 1 \
    -o "$OUT/$M-224-branched.onnx" | tail -1
  "$STRETCH" convert "$OUT/$M-224-branched.onnx" --input-shape 1,3,28,28 -o "$OUT/$M-branched.onnx" | tail -1
  for SEED in $SEEDS; do
    T="$OUT/$M-seed$SEED"
    mkdir -p "$T"
    START=$(date +%s)
    "$STRETCH" train "$OUT/$M-branched.onnx" --dataset "mnist:$DATA" --epochs "$EPOCHS" --limit "$LIMIT" \
      --seed "$SEED" --threads 2 -o "$T/trained.onnx" >"$T/train.log" 2>&1
    echo "$M seed $SEED: trained in $(( $(date +%s) - START )) s: $(grep -E ' epoch ' "$T/train.log" | tail -1 | sed 's/.*val loss/val loss/')"
    "$STRETCH" quantize "$T/trained.onnx" --device "$DEVICE" --calibration "mnist:$DATA" --samples 128 \
      --split-seed "$SEED" --validation-images "$IMAGES" --save-calibration "$T/calibration" -o "$T/ptq.onnx" | grep -v '^wrote' 
    "$PY" scripts/check_quantized.py scales "$T/calibration/fp32.onnx" "$T/calibration/samples.npy" "$T/ptq.onnx" \
      --validation "$T/calibration/validation.npy" --min-agreement 0 2>&1 | grep -E 'agree|activations' | sed "s/^/  /"
  done
done
