#!/usr/bin/env bash
# Builds the slim runner `stretch-run` for aarch64-unknown-linux-gnu,
# statically linked, and runs a bundle under qemu: its outputs must pass
# `--check` (the bundle's reference, computed on x86) and equal the x86
# run's within the bundle's tolerance. A benchmark script (not CI): it
# installs packages and prints how long each step took.
#
#   scripts/cross/aarch64.sh [BUNDLE_DIR ...]
#
# Without bundles it exports two: resnet18 (torchvision structure, random
# weights, 224x224) branched on the host's two cores in fp32, and the same
# branched model quantized (both cores int8, 32 digits images), both with
# LiteRT files, each run with --format onnx and --format tflite.
#
# Toolchain: the distribution's Rust (rustc 1.63, rustc-web 1.85) is older
# than this workspace needs (1.92; let-chains are stable from 1.88), so
# the aarch64 standard library comes from rustup (`rustup target add`);
# the cross linker (gcc-aarch64-linux-gnu) and qemu-user-static come from
# the system's package repositories. The binary is built without the
# onnxruntime engine (`--no-default-features --features onnx`): a static
# binary cannot load libonnxruntime.so.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
T=aarch64-unknown-linux-gnu
OUT="${OUT:-target/cross-aarch64}"
mkdir -p "$OUT"
t0=$(date +%s)
lap() { local now; now=$(date +%s); echo "   ($(( now - t0 )) s)"; t0=$now; }

# apt_install PACKAGE...: installs the packages, refreshing the package lists
# (apt-get update) at most once, and only when they lack a package or the
# install fails on lists too old for the mirror.
apt_install() {
  local sudo="" updated=0 p candidate
  [[ $(id -u) -eq 0 ]] || sudo=sudo
  for p in "$@"; do
    candidate=$(LC_ALL=C apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ { print $2 }')
    if [[ -z "$candidate" || "$candidate" == "(none)" ]]; then
      echo "   $p is not in the package lists: apt-get update"
      $sudo apt-get update -q >/dev/null
      updated=1
      break
    fi
  done
  if ! $sudo apt-get install -y -q "$@" >/dev/null; then
    [[ $updated -eq 0 ]] || return 1
    echo "   apt-get install failed: apt-get update, then once more"
    $sudo apt-get update -q >/dev/null
    $sudo apt-get install -y -q "$@" >/dev/null
  fi
}

echo "== 1. packages: cross linker, qemu, aarch64 standard library"
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  apt_install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
fi
rustup target add "$T" >/dev/null
echo "   $(aarch64-linux-gnu-gcc --version | head -1)"
echo "   $(qemu-aarch64-static --version | head -1)"
echo "   $(rustc --version), rust-std for $T from rustup"
lap

echo "== 2. cargo build --release -p stretch-run --target $T (static, tract: ONNX and LiteRT files)"
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release -q -p stretch-run --no-default-features --features onnx --target "$T"
BIN="$CARGO_TARGET_DIR/$T/release/stretch-run"
cp "$BIN" "$OUT/stretch-run-aarch64"
aarch64-linux-gnu-strip "$OUT/stretch-run-aarch64"
file "$OUT/stretch-run-aarch64" | sed 's/^/   /'
echo "   stripped size: $(stat -c %s "$OUT/stretch-run-aarch64") bytes"
lap

BUNDLES=("$@")
if [[ ${#BUNDLES[@]} -eq 0 ]]; then
  echo "== 3. bundles (x86 build of stretch)"
  cargo build --release -q -p stretch-cli -p stretch-run
  S="$CARGO_TARGET_DIR/release/stretch"
  "$S" stretch fixtures/models/resnet18.onnx --device configs/devices/host.toml --processors cpu0,cpu1 \
    --random-weights 1 -o "$OUT/resnet18-branched.onnx" | tail -1
  "$S" export "$OUT/resnet18-branched.onnx" --device configs/devices/host.toml --no-ort --format onnx,tflite --force \
    -o "$OUT/resnet18-fp32" | tail -1
  {
    echo 'name = "host-int8"'
    echo 'description = "the host cores at int8, for quantizing the bundle (scripts/cross/aarch64.sh)"'
    for C in cpu0 cpu1; do
      echo "[processors.$C]"
      echo 'kind = "cpu"'
      echo 'precision = "int8"'
      echo 'speedup.int8 = { value = 2.0, source = "any rate: only the precision matters here" }'
      for K in peak_gflops bandwidth_gbs kernel_overhead_us efficiency; do
        echo "$K = { value = 1.0, source = \"unused\" }"
      done
    done
  } >"$OUT/host-int8.toml"
  "$S" quantize "$OUT/resnet18-branched.onnx" --device "$OUT/host-int8.toml" --calibration digits --samples 32 \
    -o "$OUT/resnet18-int8.onnx" | head -1
  "$S" export "$OUT/resnet18-int8.onnx" --device "$OUT/host-int8.toml" --no-ort --format onnx,tflite --force \
    -o "$OUT/resnet18-int8" | tail -1
  BUNDLES=("$OUT/resnet18-fp32" "$OUT/resnet18-int8")
  lap
fi

echo "== 4. each bundle on x86 and under qemu-aarch64"
X86="$CARGO_TARGET_DIR/release/stretch-run"
for B in "${BUNDLES[@]}"; do
  # Its LiteRT files too, where it has them.
  formats=(onnx)
  if grep -q '"tflite_model"' "$B/bundle.json"; then
    formats+=(tflite)
  fi
  for F in "${formats[@]}"; do
  echo "-- $B ($F files)"
  N="$OUT/$(basename "$B")-$F"
  "$X86" "$B" --format "$F" --check --output "$N-x86.npy" | grep -E "^check|^ran" | sed 's/^/   x86:     /'
  lap
  qemu-aarch64-static "$OUT/stretch-run-aarch64" "$B" --format "$F" --check --output "$N-aarch64.npy" |
    grep -E "^check|^ran" | sed 's/^/   aarch64: /'
  lap
  python3 - "$N-x86.npy" "$N-aarch64.npy" "$B/bundle.json" <<'PYEOF'
import json, struct, sys
def npy(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<H", raw[8:10])[0]
    data = raw[10 + n:]
    return struct.unpack(f"<{len(data) // 4}f", data)
a, b = npy(sys.argv[1]), npy(sys.argv[2])
ref = json.load(open(sys.argv[3]))["reference"]
peak = max(abs(x) for x in a)
worst = max(abs(x - y) for x, y in zip(a, b))
tol = ref["atol"] + max(ref["rtol"], 1e-5) * peak
print(f"   aarch64 vs x86: max difference {worst:.3e} (tolerance {tol:.3e}: {'within' if worst <= tol else 'OVER'})")
sys.exit(0 if worst <= tol else 1)
PYEOF
  done
done
