#!/usr/bin/env bash
# Installs what stretch needs and runs its main job on a bundled example.
#
#   scripts/setup.sh            install, build (release) and inspect a bundled model
#   scripts/setup.sh --deps     install the Python reference tools only
#
# Python reference tools (onnx, onnxruntime, numpy) go into .venv at the
# repository root; tests find them there. Cargo builds into $CARGO_TARGET_DIR
# (default: ~/.cache/stretch/target, shared between clones).
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"

command -v cargo >/dev/null || { echo "error: cargo not found; install Rust from rustup.rs" >&2; exit 1; }
command -v python3 >/dev/null || { echo "error: python3 not found; install Python 3.9+" >&2; exit 1; }

if ! .venv/bin/python -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
    echo "== installing Python reference tools into .venv (onnx, onnxruntime, numpy)"
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check -r scripts/requirements.txt
fi
.venv/bin/python -c "import onnx, onnxruntime; print('onnx', onnx.__version__, '/ onnxruntime', onnxruntime.__version__)"

if [[ "${1:-}" == "--deps" ]]; then
    exit 0
fi

echo "== building stretch (release)"
cargo build --release --quiet -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"

echo "== stretch inspect fixtures/models/resnet18.onnx"
"$STRETCH" inspect fixtures/models/resnet18.onnx
echo
echo "stretch is at $STRETCH; try: $STRETCH --help"
