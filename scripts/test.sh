#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy (warnings are errors) and the
# whole test suite, after installing the Python reference tools. stretch-cli's
# default feature `ort` turns on scheduler-rt's onnxruntime engine for the
# whole workspace; its tests load libonnxruntime.so from the .venv wheel.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"

scripts/setup.sh --deps
scripts/gen_litert_schema.sh --check
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
