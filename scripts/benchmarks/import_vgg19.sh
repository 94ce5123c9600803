#!/usr/bin/env bash
# Import benchmark for a full-weight VGG-19 (~550 MB, 143,667,240 float
# weights): the ONNX model zoo's `light_vgg19` from the onnx package's test
# data (in .venv, from scripts/setup.sh) has its ConstantOfShape weights
# folded to initializers by `stretch convert` and redrawn at random by
# `scripts/check_onnx.py fill --refill`; that file (not in the
# repository) is imported by the `import_bench` example in a fresh process.
# The light model's own convert is timed too (wall time and peak memory).
# Targets: median import < 2 s, peak resident memory < 2x the file size.
#
# usage: scripts/benchmarks/import_vgg19.sh [--repeat N]   (default 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
work="${TMPDIR:-/tmp}/stretch-import-vgg19"
mkdir -p "$work"
python=.venv/bin/python
light="$($python -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data/light/light_vgg19.onnx"
[[ -f "$light" ]] || { echo "error: $light not found; run scripts/setup.sh" >&2; exit 2; }

cargo build --release --quiet -p stretch-cli -p graph-ir --example import_bench
model="$work/vgg19_full.onnx"
/usr/bin/time -f "light_vgg19 convert (weights built by ConstantOfShape, folded, written out): %e s, peak %M KB" \
    "$CARGO_TARGET_DIR/release/stretch" convert "$light" -o "$work/vgg19_folded.onnx" > /dev/null
if [[ ! -f "$model" ]]; then
    $python scripts/check_onnx.py fill "$work/vgg19_folded.onnx" "$model" --seed 1 --refill > /dev/null
fi
rm -f "$work/vgg19_folded.onnx"
echo "model made from ${light##*/} with random weights: $(stat -c %s "$model") bytes"
exec "$CARGO_TARGET_DIR/release/examples/import_bench" "$model" --time-target 2 "$@"
