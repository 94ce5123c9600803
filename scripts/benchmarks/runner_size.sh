#!/usr/bin/env bash
# Stripped sizes of the slim runner `stretch-run` (built alone, so only its
# own dependency tree is linked) and of `stretch`, release builds.
#
#   scripts/benchmarks/runner_size.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
OUT="${OUT:-target/runner-size}"
mkdir -p "$OUT"
cargo build --release -q -p stretch-run
cp "$CARGO_TARGET_DIR/release/stretch-run" "$OUT/stretch-run"
cargo build --release -q -p stretch-cli
cp "$CARGO_TARGET_DIR/release/stretch" "$OUT/stretch"
strip "$OUT/stretch-run" "$OUT/stretch"
for B in stretch-run stretch; do
  echo "$B: $(stat -c %s "$OUT/$B") bytes stripped ($(git rev-parse --short HEAD))"
done
