#!/usr/bin/env bash
# Fuzzes the ONNX importer (fuzz/fuzz_targets/import.rs) for SECONDS (default 600).
#
#   scripts/fuzz_import.sh [SECONDS] [-- EXTRA_LIBFUZZER_ARGS...]
#
# Installs cargo-fuzz if it is missing, seeds fuzz/corpus/import/ with the
# models in fixtures/models/, fixtures/vision/ and fixtures/ops/ and, when
# Python (.venv's, else python3) has the `onnx` package, the small models
# fuzz/make_seeds.py writes and the onnx package's pytorch-converted and
# pytorch-operator test models; builds into fuzz/target/.
# Works on a stable toolchain through RUSTC_BOOTSTRAP. FUZZ_SANITIZER picks the
# sanitizer (default `address`; `none` where sanitizers are unavailable).
# Crashing inputs land in fuzz/artifacts/import/; replay one with
#   cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run import artifacts/import/<file>
# Exits non-zero when a crash, timeout or out-of-memory is found.
set -euo pipefail

seconds="${1:-600}"
shift || true
[[ "${1:-}" == "--" ]] && shift

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
corpus="$root/fuzz/corpus/import"

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz

mkdir -p "$corpus"
for model in "$root"/fixtures/models/*.onnx "$root"/fixtures/vision/*.onnx "$root"/fixtures/ops/*.onnx; do
    [[ -f "$model" ]] && cp -n "$model" "$corpus/"
done
python=python3
[[ -x "$root/.venv/bin/python" ]] && python="$root/.venv/bin/python"
if "$python" -c "import onnx" 2>/dev/null; then
    "$python" "$root/fuzz/make_seeds.py" "$corpus"
    data="$("$python" -c 'import onnx, os; print(os.path.dirname(onnx.__file__))')/backend/test/data"
    for case in "$data"/pytorch-converted/*/model.onnx "$data"/pytorch-operator/*/model.onnx; do
        cp -n "$case" "$corpus/$(basename "$(dirname "$case")").onnx"
    done
else
    echo "note: python3 without the onnx package; seeding with fixtures/models only" >&2
fi

cd "$root/fuzz"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="$root/fuzz/target"
exec cargo fuzz run --sanitizer "${FUZZ_SANITIZER:-address}" import "$corpus" -- \
    -dict="$root/fuzz/import.dict" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$@"
