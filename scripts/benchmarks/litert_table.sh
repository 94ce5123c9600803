#!/usr/bin/env bash
# LiteRT files against their ONNX subgraphs, per fixture model: each
# model (torchvision structure, random weights, SIZE x SIZE input) is
# branched on the host's two cores (--merge MERGE), exported with .tflite
# files in fp32, quantized for two int8 cores (8 digits images) and
# exported again; scripts/check_litert.py runs every .tflite in LiteRT's
# interpreter on the ONNX chain's inputs and compares it with onnxruntime
# on the ONNX file. Prints one table per model: per subgraph, the largest
# difference at fp32 (absolute and relative to the largest magnitude) and
# at int8 (integer steps of the output), then the whole chain.
#
#   scripts/benchmarks/litert_table.sh [MODELS...]   (default: resnet18 regnet_x_1_6gf mobilenet_v2)
#
# SIZE (default 32) and MERGE (default concat) are read from the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
SIZE="${SIZE:-32}"
MERGE="${MERGE:-concat}"
out="${TMPDIR:-/tmp}/stretch-litert-table"
mkdir -p "$out"
sed -n '/^pub const INT8_PAIR/,/^"#;/p' crates/stretch-cli/tests/common.rs | sed '1d;$d' > "$out/int8-pair.toml"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet18 regnet_x_1_6gf mobilenet_v2)
for m in "${models[@]}"; do
  b="$out/$m-$MERGE.onnx"
  "$S" stretch "fixtures/models/$m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 --merge "$MERGE" \
    --alpha 1 --random-weights 1 --input-shape "1,3,$SIZE,$SIZE" -o "$b" > /dev/null
  "$S" quantize "$b" --device "$out/int8-pair.toml" --calibration digits --samples 8 -o "$out/$m-int8.onnx" > /dev/null
  for p in fp32 int8; do
    src="$b"; [ "$p" = int8 ] && src="$out/$m-int8.onnx"
    dev=configs/devices/host.toml; [ "$p" = int8 ] && dev="$out/int8-pair.toml"
    rm -rf "$out/$m-$p"
    "$S" export "$src" --device "$dev" --no-ort --format onnx,tflite -o "$out/$m-$p" > /dev/null
    .venv/bin/python scripts/check_litert.py "$out/$m-$p" --chain-steps 100 --json "$out/$m-$p.json" > /dev/null || true
  done
  .venv/bin/python - "$m" "$out/$m-fp32.json" "$out/$m-int8.json" <<'EOF'
import json, sys
name, f, q = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def fig(c):
    if c["kind"] == "steps":
        return f"{c['steps']:g} steps"
    return f"{c['max_abs']:.2e} ({c['rel']:.1e})"
def worst(cs):
    return max(cs, key=lambda c: c.get("steps", c.get("rel", 0))) if cs else None
print(f"\n{name}: LiteRT vs onnxruntime, per subgraph (fp32: max |d| (relative); int8: integer steps)")
print("| subgraph | processor | fp32 | int8 |")
print("|---|---|---|---|")
qs = {s["name"]: s for s in q["subgraphs"]}
for s in f["subgraphs"]:
    a = worst(s["outputs"]); b = worst(qs.get(s["name"], {}).get("outputs", []))
    print(f"| {s['name']} | {s['processor']} | {fig(a) if a else '-'} | {fig(b) if b else '-'} |")
a, b = worst(f["chain"]["outputs"]), worst(q["chain"]["outputs"])
print(f"| whole chain | | {fig(a) if a else '-'} | {fig(b) if b else '-'} |")
EOF
done
