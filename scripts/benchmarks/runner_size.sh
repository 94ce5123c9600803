#!/usr/bin/env bash
# Stripped sizes of the slim runner `stretch-run` (built alone, so only its
# own dependency tree is linked) in the release profile and in the `slim`
# profile it ships as (Cargo.toml: fat LTO, one codegen unit, opt-level s,
# tract-linalg at 3), and of `stretch`; then what the slim profile costs in
# speed: both runners time the same bundle (zoo resnet-mini at SIZE,
# branched on the host's two cores) RUNS runs each, interleaved twice, and
# the median ratio slim / release is printed.
#
#   scripts/benchmarks/runner_size.sh [RUNS] [SIZE]
#
# SLIM=PATH uses a slim runner built already (the slim build takes 20+
# minutes on two cores) instead of building it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
RUNS="${1:-30}"
SIZE="${2:-96}"
OUT="${OUT:-target/runner-size}"
mkdir -p "$OUT"
step() { echo "== $* ($(date +%H:%M:%S))"; }
step "release builds"
cargo build --release -q -p stretch-run
cp "$CARGO_TARGET_DIR/release/stretch-run" "$OUT/stretch-run-release"
cargo build --release -q -p stretch-cli
cp "$CARGO_TARGET_DIR/release/stretch" "$OUT/stretch"
step "slim build"
if [[ -n "${SLIM:-}" ]]; then
  echo "using the slim runner $SLIM (SLIM is set; not rebuilt)"
  cp "$SLIM" "$OUT/stretch-run-slim"
else
  cargo build --profile slim -q -p stretch-run
  cp "$CARGO_TARGET_DIR/slim/stretch-run" "$OUT/stretch-run-slim"
fi
strip "$OUT/stretch-run-release" "$OUT/stretch-run-slim" "$OUT/stretch"
for B in stretch-run-slim stretch-run-release stretch; do
  echo "$B: $(stat -c %s "$OUT/$B") bytes stripped ($(git rev-parse --short HEAD))"
done
step "bundle"
S="$OUT/stretch"
"$S" zoo resnet-mini --input-size "$SIZE" --classes 10 --seed 0 -o "$OUT/m.onnx" | tail -1
"$S" stretch "$OUT/m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 --alpha 1 \
  -o "$OUT/b.onnx" | tail -1
"$S" export "$OUT/b.onnx" --device configs/devices/host.toml --no-ort -o "$OUT/bundle" | tail -1
step "timing, $RUNS runs each, interleaved"
declare -A MED
for ROUND in 1 2; do
  for B in release slim; do
    LINE=$("$OUT/stretch-run-$B" "$OUT/bundle" --check --runs "$RUNS" | grep "runs: min")
    echo "$B round $ROUND: $LINE"
    MED[$B$ROUND]=$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$LINE")
  done
done
for ROUND in 1 2; do
  awk -v s="${MED[slim$ROUND]}" -v r="${MED[release$ROUND]}" -v k="$ROUND" \
    'BEGIN { printf "round %s: slim / release median %.3f (measured)\n", k, s / r }'
done
