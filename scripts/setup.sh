#!/usr/bin/env bash
# Installs what stretch needs and runs its main job on a bundled example.
#
#   scripts/setup.sh            install, build (release) and run the whole pipeline on a
#                               bundled example: zoo model -> plan -> branch -> train on
#                               the bundled digits -> bench, then plan + branch + bench
#                               resnet18 at 224x224 (outputs in example-run/)
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

# Fashion-MNIST (70,000 28x28 images; IDX files with a t10k test split) for
# the accuracy benchmark, from the system's packages when they can be
# installed here; nothing else needs it.
FASHION=/usr/share/datasets/fashion-mnist
if [[ ! -d "$FASHION" ]]; then
    if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
        echo "== installing Fashion-MNIST (apt-get install dataset-fashion-mnist)"
        apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 ||
            echo "note: apt-get could not install dataset-fashion-mnist; the accuracy benchmark needs it" >&2
    else
        echo "note: Fashion-MNIST is not installed; as root on Debian/Ubuntu: apt-get install dataset-fashion-mnist" >&2
        echo "      (or put its four IDX files in a folder and pass --dataset mnist:FOLDER)" >&2
    fi
fi

if [[ "${1:-}" == "--deps" ]]; then
    exit 0
fi

echo "== building stretch and the slim runner stretch-run (release)"
cargo build --release --quiet -p stretch-cli -p stretch-run
STRETCH="$CARGO_TARGET_DIR/release/stretch"
RUNNER="$CARGO_TARGET_DIR/release/stretch-run"

OUT=example-run
mkdir -p "$OUT"
echo "== 1/7 stretch zoo: a 3-stage ResNet-style CNN for 32x32 images, 10 classes"
"$STRETCH" zoo resnet-mini --input-size 32 --classes 10 --seed 0 -o "$OUT/resnet-mini.onnx"
echo
echo "== 2/7 stretch plan on this machine's measured profile (cpu0 + cpu1)"
# The stages of a 32x32 model are predicted at ~0.4 ms and a meeting point's
# hand-off at ~0.07 ms, over Eq. 4's default 0.1 x stage, so this small
# example relaxes alpha to 1.
"$STRETCH" plan "$OUT/resnet-mini.onnx" --device configs/devices/host.toml --alpha 1 -o "$OUT/plan.json"
echo
echo "== 3/7 stretch branch"
"$STRETCH" branch "$OUT/resnet-mini.onnx" --plan "$OUT/plan.json" -o "$OUT/branched.onnx"
echo
echo "== 4/7 stretch train: the branched model on the bundled digits (upscaled to 32x32), 3 epochs"
"$STRETCH" train "$OUT/branched.onnx" --dataset digits --epochs 3 --threads 2 -o "$OUT/branched-trained.onnx"
echo
echo "== 5/7 stretch bench: trained branched model on cpu0 + cpu1 vs the original"
"$STRETCH" bench "$OUT/branched-trained.onnx" --original "$OUT/resnet-mini.onnx" --runs 100 \
    --trace "$OUT/trace.json" --gantt "$OUT/gantt.png"
echo "(this 32x32 example runs in about 2 ms, where the hand-offs between cores weigh as much as the"
echo " branches' work, so its ratios say little; the next step benches a model big enough to pay)"
echo
echo "== 6/7 stretch stretch + bench at 224x224: torchvision's resnet18 (bundled structure-only, random"
echo "       weights) branched at equal work on cpu0 + cpu1, against the original on one core and"
echo "       onnxruntime's 2-thread original"
"$STRETCH" stretch fixtures/models/resnet18.onnx --device configs/devices/host.toml --processors cpu0,cpu1 \
    --random-weights 1 -o "$OUT/resnet18-branched.onnx" | tail -2
"$STRETCH" convert fixtures/models/resnet18.onnx --random-weights 1 -o "$OUT/resnet18.onnx" > /dev/null
"$STRETCH" bench "$OUT/resnet18-branched.onnx" --original "$OUT/resnet18.onnx" --runs 20 \
    --processor cpu0=inline:core0,alone_threads=2 --processor cpu1=pool:core1,alone_threads=2 --trace "$OUT/resnet18-trace.json" |
    grep -E "^work|^engines|^configuration|^original|^branched,|^speedup|^ideal|^in-run|^steal"
echo
echo "== 7/7 stretch export + stretch-run: the trained branched model as a deployment bundle, run from its"
echo "       manifest alone and checked against its reference outputs"
"$STRETCH" export "$OUT/branched-trained.onnx" --device configs/devices/host.toml -o "$OUT/bundle" | tail -1
"$RUNNER" "$OUT/bundle" --check --runs 20
echo
echo "wrote: $OUT/plan.json (plan), $OUT/bundle/ (bundle), $OUT/branched-trained.onnx (trained model),"
echo "       $OUT/branched-trained.metrics.csv and .curve.svg (training), $OUT/trace.json (Chrome trace), $OUT/gantt.png"
echo "stretch is at $STRETCH; try: $STRETCH --help"
