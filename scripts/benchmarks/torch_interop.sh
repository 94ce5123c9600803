#!/usr/bin/env bash
# model.py against onnxruntime, by hand (needs torch): every fixture
# (torchvision structure, random weights, SIZE x SIZE) and both zoo models,
# branched on the host's two cores (--alpha 1), exported with
# `stretch export --format torch`; scripts/torch/check_forward.py runs the
# module's forward in eval mode and onnxruntime on the branched ONNX file
# on the same input, within 1e-5 of the largest magnitude, and
# scripts/torch/check_gradients.py compares one training step's gradients
# (train mode, a batch of 8) with `stretch gradients` (burn's, as `stretch
# train` takes them), within 1e-4 of each tensor's largest.
#
#   PY=/path/to/python-with-torch scripts/benchmarks/torch_interop.sh [MODELS...]
#
# PY defaults to `python3`; it needs torch, safetensors, numpy and
# onnxruntime. SIZE defaults to 32. STRETCH=PATH uses a `stretch` built
# already instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
PY="${PY:-python3}"
SIZE="${SIZE:-32}"
if [[ -n "${STRETCH:-}" ]]; then
  S="$STRETCH"
else
  cargo build --release -q -p stretch-cli
  S="$CARGO_TARGET_DIR/release/stretch"
fi
out="${TMPDIR:-/tmp}/stretch-torch-interop"
mkdir -p "$out"
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  for f in fixtures/models/*.onnx; do models+=("$(basename "$f" .onnx)"); done
  models+=(zoo:resnet-mini zoo:mbnet-mini)
fi
fails=0
gfails=0
for m in "${models[@]}"; do
  name="${m#zoo:}"
  src="fixtures/models/$m.onnx"
  extra=(--random-weights 1 --input-shape "1,3,$SIZE,$SIZE")
  if [[ "$m" == zoo:* ]]; then
    src="$out/$name.onnx"
    "$S" zoo "$name" --input-size "$SIZE" --seed 1 -o "$src" > /dev/null
    extra=()
  fi
  "$S" stretch "$src" --device configs/devices/host.toml --processors cpu0,cpu1 --alpha 1 "${extra[@]}" \
    -o "$out/$name-b.onnx" > /dev/null
  "$S" export "$out/$name-b.onnx" --format torch --force -o "$out/$name-torch" > /dev/null
  "$PY" scripts/torch/check_forward.py "$out/$name-b.onnx" "$out/$name-torch" || fails=$((fails + 1))
  "$PY" scripts/torch/check_gradients.py "$out/$name-b.onnx" "$out/$name-torch" --stretch "$S" ||
    gfails=$((gfails + 1))
done
echo "forward: $fails of ${#models[@]} over the tolerance; gradients: $gfails of ${#models[@]} over"
fails=$((fails + gfails))
[ "$fails" -eq 0 ]
