#!/usr/bin/env bash
# Import benchmark for a full-weight ResNet-50 (~100 MB): builds the
# `import_bench` example in release and runs it. Targets: import < 1 s,
# peak resident memory < 2x the file size.
#
# usage: scripts/benchmarks/import_resnet50.sh [MODEL.onnx] [--repeat N]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

model="${1:-fixtures-full/resnet50.onnx}"
shift || true

echo "note: ${model} is produced by scripts/fixtures/export_torchvision.py (needs torch + torchvision);"
echo "      it is not committed (fixtures-full/ is ignored by git)."
if [[ ! -f "$model" ]]; then
    echo "error: ${model} does not exist; generate it with scripts/fixtures/export_torchvision.py" >&2
    exit 2
fi

cargo build --release --quiet -p graph-ir --example import_bench
target_dir="${CARGO_TARGET_DIR:-target}"
exec "${target_dir}/release/examples/import_bench" "$model" "$@"
