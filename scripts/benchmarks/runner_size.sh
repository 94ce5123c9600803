#!/usr/bin/env bash
# Stripped sizes of the bundle runner `stretch-run` as it is built:
#   release      scripts/setup.sh's build (ONNX and LiteRT files; tract's
#                ONNX loader, onnxruntime loaded at run time);
#   slim         the `slim` profile (Cargo.toml: fat LTO, one codegen
#                unit, opt-level s, tract-linalg at 3), every feature;
#   slim-tflite  the slim profile without the `onnx` feature
#                (--no-default-features): LiteRT files only, no ONNX
#                loader, no onnxruntime; the runner a phone gets;
# and of `stretch`. Then what each costs per run: two bundles (zoo
# resnet-mini at SIZE branched on the host's two cores in fp32, and the
# same quantized for two int8 cores, 8 digits images) exported with ONNX
# and LiteRT files; on each, `release --format onnx` (the runner as it was
# before the LiteRT reader), `release --format tflite` and `slim-tflite`
# time the same bundle RUNS runs each, interleaved, twice; every line
# prints min and median, and each round the median ratio to
# `release --format onnx` of that round.
#
#   scripts/benchmarks/runner_size.sh [RUNS] [SIZE]
#
# SLIM=PATH and SLIM_TFLITE=PATH use slim runners built already (each
# slim build takes 20+ minutes on two cores) instead of building them.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
RUNS="${1:-30}"
SIZE="${2:-96}"
OUT="${OUT:-target/runner-size}"
mkdir -p "$OUT"
step() { echo "== $* ($(date +%H:%M:%S))"; }
slim() { # NAME PATH-or-empty CARGO-ARGS...
  local name="$1" given="$2"
  shift 2
  if [[ -n "$given" ]]; then
    echo "$name: using $given (not rebuilt)"
    cp "$given" "$OUT/stretch-run-$name"
  else
    cargo build --profile slim -q -p stretch-run "$@"
    cp "$CARGO_TARGET_DIR/slim/stretch-run" "$OUT/stretch-run-$name"
  fi
}
step "release build (scripts/setup.sh's)"
cargo build --release -q -p stretch-cli -p stretch-run
cp "$CARGO_TARGET_DIR/release/stretch-run" "$OUT/stretch-run-release"
cp "$CARGO_TARGET_DIR/release/stretch" "$OUT/stretch"
step "slim builds"
slim slim "${SLIM:-}"
slim slim-tflite "${SLIM_TFLITE:-}" --no-default-features
strip "$OUT/stretch-run-release" "$OUT/stretch-run-slim" "$OUT/stretch-run-slim-tflite" "$OUT/stretch"
for B in stretch-run-slim-tflite stretch-run-slim stretch-run-release stretch; do
  echo "$B: $(stat -c %s "$OUT/$B") bytes stripped ($(git rev-parse --short HEAD))"
done

step "bundles"
S="$OUT/stretch"
sed -n '/^pub const INT8_PAIR/,/^"#;/p' crates/stretch-cli/tests/common.rs | sed '1d;$d' > "$OUT/int8-pair.toml"
"$S" zoo resnet-mini --input-size "$SIZE" --classes 10 --seed 0 -o "$OUT/m.onnx" | tail -1
"$S" stretch "$OUT/m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 --alpha 1 \
  -o "$OUT/b.onnx" | tail -1
"$S" quantize "$OUT/b.onnx" --device "$OUT/int8-pair.toml" --calibration digits --samples 8 \
  -o "$OUT/q.onnx" | tail -1
rm -rf "$OUT/fp32" "$OUT/int8"
"$S" export "$OUT/b.onnx" --device configs/devices/host.toml --no-ort --format onnx,tflite \
  -o "$OUT/fp32" | tail -1
"$S" export "$OUT/q.onnx" --device "$OUT/int8-pair.toml" --no-ort --format onnx,tflite \
  -o "$OUT/int8" | tail -1
"$OUT/stretch-run-slim-tflite" "$OUT/fp32" --format onnx 2>&1 | sed 's/^/slim-tflite with --format onnx: /' || true

step "timing, $RUNS runs each, interleaved"
declare -A MED
CONFIGS=("release onnx" "release tflite" "slim-tflite tflite")
for BUNDLE in fp32 int8; do
  for ROUND in 1 2; do
    for C in "${CONFIGS[@]}"; do
      read -r R F <<<"$C"
      LINE=$("$OUT/stretch-run-$R" "$OUT/$BUNDLE" --format "$F" --check --runs "$RUNS" | grep "runs: min")
      echo "$BUNDLE round $ROUND, $R --format $F: $LINE"
      MED["$BUNDLE$ROUND$R$F"]=$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$LINE")
    done
    BASE="${MED[${BUNDLE}${ROUND}releaseonnx]}"
    for C in "release tflite" "slim-tflite tflite"; do
      read -r R F <<<"$C"
      awk -v b="$BASE" -v x="${MED[$BUNDLE$ROUND$R$F]}" -v n="$BUNDLE round $ROUND: $R --format $F" \
        'BEGIN { printf "%s / release --format onnx, median: %.3f (measured)\n", n, x / b }'
    done
  done
done
