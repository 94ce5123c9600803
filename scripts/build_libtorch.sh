#!/usr/bin/env bash
# Builds `stretch` with burn's LibTorch backend (`--features tch`) from the
# package registries alone (PyPI and crates.io), then checks it by training
# one epoch on the bundled digits.
#
#   scripts/build_libtorch.sh             install torch, build, train on tch:cpu
#                                         (and tch:cuda:0 when nvidia-smi works)
#   scripts/build_libtorch.sh --no-train  install torch and build only
#   COMPARE_FLEX=1 scripts/build_libtorch.sh
#                                         also train the same epoch on flex
#   scripts/build_libtorch.sh --for-torch 2.11.0
#                                         build for another machine's pip torch
#                                         (TESTS=1: also the training crate's
#                                         unit tests, to run there)
#
# --for-torch VERSION builds a binary for a machine that has a pip torch of
# that version (and a GPU) but no Rust toolchain or network: PyPI's wheel of
# that torch is downloaded without its dependencies (~0.5 GB) and only its
# headers and libraries are unpacked (into $CARGO_TARGET_DIR/../torch-VERSION,
# or $TORCH_DIR); torch-sys compiles against them (LIBTORCH: a directory
# without libtorch's build-version file, so its version check does not apply
# and the C++ API must compile, which the build shows) and the
# link allows the CUDA libraries that libtorch_cuda needs and that the target
# machine has. Nothing is trained here: the binary, stripped and gzipped, goes
# to $CARGO_TARGET_DIR/../target-tch-VERSION/release/stretch.gz, and
# scripts/benchmarks/fashion_mnist_gpu.sh runs it there against that
# machine's torch (LD_LIBRARY_PATH).
#
# torch: PyPI's torch==2.9.0 wheel (the version torch-sys 0.22.0 requires; its
# build.rs refuses any other) goes into .venv-torch at the repository root,
# never into .venv: it is ~4 GB of downloads (the wheel bundles CUDA 12.8
# libraries, so one build serves both tch:cpu and tch:cuda) and neither CI nor
# the tests need it.
#
# No download at build time: torch-sys and burn-tch take headers and libraries
# from that Python package (LIBTORCH_USE_PYTORCH=1). LIBTORCH points at a
# directory that does not exist, so if torch-sys ever took its download branch
# it would stop there with missing headers instead of fetching libtorch; the
# build runs `--offline` (crates are fetched first), inside a network
# namespace when `unshare -rn` is allowed, and afterwards the script checks
# that torch-sys linked the venv's libtorch and unpacked none of its own.
#
# The binary goes to $CARGO_TARGET_DIR/../target-tch/release/stretch (its own
# target dir, so the default build's release/stretch stays the flex/ort one)
# and finds libtorch through an rpath to .venv-torch; no LD_LIBRARY_PATH needed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TORCH_VERSION=2.9.0
VENV=$ROOT/.venv-torch
PYTHON=${PYTHON:-python3}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
GIVEN_TCH_TARGET_DIR=${TCH_TARGET_DIR:-}
TCH_TARGET_DIR=${TCH_TARGET_DIR:-$(dirname "$CARGO_TARGET_DIR")/target-tch}
TRAIN=1
FOR_TORCH=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --no-train) TRAIN=0 ;;
        --for-torch) FOR_TORCH="${2:?--for-torch needs a torch version, e.g. 2.11.0}"; shift ;;
        *) echo "error: unknown argument '$1' (expected --no-train or --for-torch VERSION)" >&2; exit 2 ;;
    esac
    shift
done

command -v cargo >/dev/null || { echo "error: cargo not found; install Rust from rustup.rs" >&2; exit 1; }
command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found; torch $TORCH_VERSION needs Python 3.10-3.13" >&2; exit 1; }

# Both builds run cargo with --locked (the crates that were checked, no
# silent upgrade); say what to do when the manifests have moved past Cargo.lock.
LOCK_ERR=$(cargo metadata --locked --offline --format-version 1 2>&1 >/dev/null) || {
    if grep -q "cannot update the lock file" <<<"$LOCK_ERR"; then
        echo "error: Cargo.lock is out of date with the manifests (a dependency or feature was added); run 'cargo build' once without --locked to update it, commit Cargo.lock, then rerun this script" >&2
        exit 1
    fi
}

if [[ -n "$FOR_TORCH" ]]; then
    TORCH_DIR=${TORCH_DIR:-$(dirname "$CARGO_TARGET_DIR")/torch-$FOR_TORCH}
    TCH_TARGET_DIR=${GIVEN_TCH_TARGET_DIR:-$(dirname "$CARGO_TARGET_DIR")/target-tch-$FOR_TORCH}
    if [[ ! -f "$TORCH_DIR/torch/lib/libtorch_cpu.so" ]]; then
        echo "== PyPI's torch==$FOR_TORCH wheel (no dependencies), headers and libraries into $TORCH_DIR"
        WHEELS=$(mktemp -d)
        "$PYTHON" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: --progress-bar off \
            "torch==$FOR_TORCH" -d "$WHEELS" | grep -E '^ *(Downloading|Saved)' || true
        WHEEL=$(compgen -G "$WHEELS/torch-$FOR_TORCH-*.whl" | head -n 1) \
            || { echo "error: pip found no torch==$FOR_TORCH wheel for this platform" >&2; exit 1; }
        mkdir -p "$TORCH_DIR"
        unzip -q -o "$WHEEL" 'torch/include/*' 'torch/lib/*' -d "$TORCH_DIR"
        rm -rf "$WHEELS"
    fi
    [[ -f "$TORCH_DIR/torch/lib/libtorch_cuda.so" ]] \
        || echo "warning: the torch==$FOR_TORCH wheel has no libtorch_cuda.so: the binary will not have tch:cuda" >&2
    echo "== cargo build --release -p stretch-cli --features tch against torch $FOR_TORCH (into $TCH_TARGET_DIR)"
    start=$(date +%s)
    env -u LIBTORCH_USE_PYTORCH -u LIBTORCH_INCLUDE -u LIBTORCH_LIB -u TORCH_CUDA_VERSION \
        LIBTORCH="$TORCH_DIR/torch" \
        CARGO_TARGET_DIR="$TCH_TARGET_DIR" CARGO_PROFILE_RELEASE_DEBUG=0 \
        RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--allow-shlib-undefined" \
        cargo build --release --locked -p stretch-cli --features tch
    echo "build took $(( $(date +%s) - start )) s"
    BIN=$TCH_TARGET_DIR/release/stretch
    grep -l "^cargo:libtorch_lib=$TORCH_DIR/torch/lib\$" "$TCH_TARGET_DIR"/release/build/torch-sys-*/output >/dev/null \
        || { echo "error: torch-sys did not link $TORCH_DIR/torch/lib" >&2; exit 1; }
    strip -o "$BIN.stripped" "$BIN"
    gzip -9 -c "$BIN.stripped" >"$BIN.gz"
    rm -f "$BIN.stripped"
    echo "wrote $BIN.gz ($(( $(stat -c %s "$BIN.gz") / 1048576 )) MiB): on the target machine run"
    echo "  scripts/benchmarks/fashion_mnist_gpu.sh BINARY.gz FASHION_MNIST_DIR MODELS_DIR OUT_DIR"
    if [[ "${TESTS:-0}" == 1 ]]; then
        echo "== the training crate's unit tests with --features tch, for the same machine"
        TEST_BIN=$(env -u LIBTORCH_USE_PYTORCH -u LIBTORCH_INCLUDE -u LIBTORCH_LIB -u TORCH_CUDA_VERSION \
            LIBTORCH="$TORCH_DIR/torch" CARGO_TARGET_DIR="$TCH_TARGET_DIR" CARGO_PROFILE_RELEASE_DEBUG=0 \
            RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,--allow-shlib-undefined" \
            cargo test --release --locked -p training --features tch --lib --no-run --message-format=json \
            | grep -o '"executable":"[^"]*"' | tail -n 1 | cut -d'"' -f4)
        [[ -x "$TEST_BIN" ]] || { echo "error: cargo built no training test binary" >&2; exit 1; }
        strip -o "$TCH_TARGET_DIR/release/training-tests" "$TEST_BIN"
        gzip -9 -f "$TCH_TARGET_DIR/release/training-tests"
        echo "wrote $TCH_TARGET_DIR/release/training-tests.gz: run it there with LD_LIBRARY_PATH at torch's lib (scripts/benchmarks/gpu_common.sh)"
    fi
    exit 0
fi

torch_version() { "$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null; }

echo "== torch $TORCH_VERSION from PyPI into .venv-torch"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
if [[ "$(torch_version)" != "$TORCH_VERSION"* ]]; then
    start=$(date +%s)
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir --progress-bar off \
        "torch==$TORCH_VERSION" | grep -E '^ *(Downloading|Successfully)' || true
    echo "pip install took $(( $(date +%s) - start )) s"
fi
installed=$(torch_version) || { echo "error: torch did not install into $VENV" >&2; exit 1; }
[[ "$installed" == "$TORCH_VERSION"* ]] || { echo "error: .venv-torch has torch $installed, not $TORCH_VERSION" >&2; exit 1; }
TORCH_LIB=$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
echo "torch $installed, libraries in $TORCH_LIB"

echo "== crates from crates.io"
HOST=$(rustc -vV | sed -n 's/^host: //p')
cargo fetch --locked --target "$HOST"
TORCH_SYS=$(grep -A1 '^name = "torch-sys"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/torch-sys-\1/p')
TORCH_SYS_BUILD=$(compgen -G "${CARGO_HOME:-$HOME/.cargo}/registry/src/*/$TORCH_SYS/build.rs" | head -n 1) \
    || { echo "error: cargo fetched no $TORCH_SYS" >&2; exit 1; }
grep -q "const TORCH_VERSION: &str = \"$TORCH_VERSION\";" "$TORCH_SYS_BUILD" \
    || { echo "error: $TORCH_SYS_BUILD wants another torch: $(grep 'const TORCH_VERSION' "$TORCH_SYS_BUILD")" >&2; exit 1; }

echo "== cargo build --release -p stretch-cli --features tch (offline, into $TCH_TARGET_DIR)"
NO_NET=()
if unshare -rn true 2>/dev/null; then
    NO_NET=(unshare -rn)
    echo "building inside a network namespace with no network (unshare -rn)"
else
    echo "unshare -rn is not allowed here; relying on --offline and the LIBTORCH guard"
fi
start=$(date +%s)
env -u LIBTORCH_INCLUDE -u LIBTORCH_LIB -u LIBTORCH_BYPASS_VERSION_CHECK -u TORCH_CUDA_VERSION \
    LIBTORCH_USE_PYTORCH=1 \
    LIBTORCH="$VENV/no-libtorch-download" \
    VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" \
    CARGO_TARGET_DIR="$TCH_TARGET_DIR" \
    RUSTFLAGS="${RUSTFLAGS:-} -C link-arg=-Wl,-rpath,$TORCH_LIB" \
    "${NO_NET[@]}" cargo build --release --offline --locked -p stretch-cli --features tch
echo "build took $(( $(date +%s) - start )) s"

BIN=$TCH_TARGET_DIR/release/stretch
echo "== checking that nothing was downloaded"
outputs=("$TCH_TARGET_DIR"/release/build/torch-sys-*/output)
grep -l "^cargo:libtorch_lib=$TORCH_LIB\$" "${outputs[@]}" >/dev/null \
    || { echo "error: torch-sys did not link $TORCH_LIB (see ${outputs[*]})" >&2; exit 1; }
if compgen -G "$TCH_TARGET_DIR/release/build/torch-sys-*/out/libtorch" >/dev/null; then
    echo "error: torch-sys unpacked a libtorch of its own: $(compgen -G "$TCH_TARGET_DIR/release/build/torch-sys-*/out/libtorch")" >&2
    exit 1
fi
linked=$(ldd "$BIN" | awk '/libtorch_cpu/ {print $3}')
[[ "$linked" == "$TORCH_LIB/libtorch_cpu.so" ]] \
    || { echo "error: $BIN loads libtorch_cpu from '$linked', not $TORCH_LIB" >&2; exit 1; }
echo "torch-sys linked $TORCH_LIB; $BIN finds it through its rpath"

[[ $TRAIN == 1 ]] || exit 0

CHECK_DIR=$(mktemp -d)
trap 'rm -rf "$CHECK_DIR"' EXIT
"$BIN" zoo resnet-mini --input-size 32 -o "$CHECK_DIR/resnet-mini.onnx"
backends=(tch:cpu)
if nvidia-smi >/dev/null 2>&1; then
    backends+=(tch:cuda:0)
else
    echo "(nvidia-smi does not work here: tch:cuda:0 not checked)"
fi
[[ "${COMPARE_FLEX:-0}" == 1 ]] && backends+=(flex)
for backend in "${backends[@]}"; do
    echo "== one epoch on the digits, --backend $backend"
    "$BIN" train "$CHECK_DIR/resnet-mini.onnx" --dataset digits --epochs 1 --backend "$backend" \
        -o "$CHECK_DIR/trained-${backend//:/-}.onnx"
done
