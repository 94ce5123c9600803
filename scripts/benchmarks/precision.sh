#!/usr/bin/env bash
# Speed of int8 on this machine (issue 49, point 7), every figure measured
# in this run; phone figures are predictions and are not made here.
#
#   scripts/benchmarks/precision.sh [RUNS] [SIZE]
#
# 1. int8 against fp32 on the same core and engine: zoo resnet-mini at
#    SIZExSIZE (default 96) and the same model quantized wholly to int8
#    (`stretch quantize --processor cpu` on snapdragon855, whose CPU runs
#    int8; 32 digits images), benched against each other on one core with
#    tract and with onnxruntime (`stretch bench`, RUNS runs, interleaved).
# 2. Plans with and without precision: a copy of configs/devices/host.toml
#    whose cpu0 runs int8 at the speed step 1 measured with tract (cpu1
#    stays fp32), planned with `--alpha 1`, and the same profile with
#    `--precisions cpu0=fp32`.
# 3. The mixed-precision branched model (cpu0 int8, cpu1 fp32) against the
#    fp32 branched model on the two cores, and onnxruntime's own quantized
#    whole model (quantize_static on the same calibration images) on two
#    threads (`check_quantized.py time`, not interleaved with the benches).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
RUNS="${1:-60}"
SIZE="${2:-96}"
if [[ -z "${STRETCH:-}" ]]; then
  cargo build --release -q -p stretch-cli
  STRETCH="$CARGO_TARGET_DIR/release/stretch"
fi
PY=.venv/bin/python
[[ -x "$PY" ]] || PY=python3
OUT="${OUT:-target/precision-bench}"
mkdir -p "$OUT"
S="$STRETCH"
step() { echo; echo "== $* ($(date +%H:%M:%S))"; }
median() { "$PY" -c "import json,sys; r={c['name']:c for c in json.load(open(sys.argv[1]))['configurations']}; print(r[sys.argv[2]]['p50_ms'])" "$@"; }

step "1. int8 vs fp32, same core and engine (resnet-mini ${SIZE}x${SIZE})"
"$S" zoo resnet-mini --input-size "$SIZE" --seed 0 -o "$OUT/m.onnx" | tail -1
"$S" quantize "$OUT/m.onnx" --device configs/devices/snapdragon855.toml --processor cpu \
  --calibration digits --samples 32 --save-calibration "$OUT/calibration" -o "$OUT/m-int8.onnx" | tail -2
for E in tract ort; do
  "$S" bench "$OUT/m-int8.onnx" --original "$OUT/m.onnx" --processor "cpu=inline:0,engine=$E" \
    --runs "$RUNS" --json >"$OUT/int8-vs-fp32-$E.json" 2>"$OUT/int8-vs-fp32-$E.log"
  grep -E "^original, 1 core|^branched, 1 core \(sequential\)" "$OUT/int8-vs-fp32-$E.log" | sed "s/^/  [$E] /" || true
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
for e in ("tract", "ort"):
    c = {x["name"]: x for x in json.load(open(f"{out}/int8-vs-fp32-{e}.json"))["configurations"]}
    fp32, int8 = c["original, 1 core"], c["branched, 1 core (sequential)"]
    ratio = fp32["p50_ms"] / int8["p50_ms"]
    print(f"  {e}: fp32 p50 {fp32['p50_ms']:.3f} ms (min {fp32['min_ms']:.3f}), int8 p50 {int8['p50_ms']:.3f} ms (min {int8['min_ms']:.3f}): int8 at {ratio:.2f}x fp32's speed (p50), {fp32['min_ms'] / int8['min_ms']:.2f}x (min)")
    open(f"{out}/speedup-{e}.txt", "w").write(f"{ratio:.3f}\n")
PYEOF

step "2. plans with and without precision (host, cpu0 int8 at the tract speed measured above)"
SPEEDUP=$(cat "$OUT/speedup-tract.txt")
sed -e "s#\"\.\./\.\./data/#\"$PWD/data/#g" \
  -e "/^\[processors.cpu0\]/a precision = \"int8\"\nspeedup.int8 = { value = $SPEEDUP, source = \"measured by scripts/benchmarks/precision.sh: tract, whole resnet-mini ${SIZE}x${SIZE} int8 QDQ vs fp32 on one core, p50\" }" \
  configs/devices/host.toml >"$OUT/host-int8.toml"
"$S" plan "$OUT/m.onnx" --device "$OUT/host-int8.toml" --alpha 1 -o "$OUT/plan-int8.json" | grep -E "^stage|^plan:"
"$S" plan "$OUT/m.onnx" --device "$OUT/host-int8.toml" --alpha 1 --precisions cpu0=fp32 -o "$OUT/plan-fp32.json" | grep -E "^stage|^plan:"

step "3. mixed-precision branched vs fp32 branched vs onnxruntime's quantized whole model"
"$S" branch "$OUT/m.onnx" --plan "$OUT/plan-fp32.json" -o "$OUT/b-fp32.onnx" | tail -1
"$S" quantize "$OUT/b-fp32.onnx" --device "$OUT/host-int8.toml" --calibration digits --samples 32 -o "$OUT/b-mixed.onnx" | tail -2
for B in b-fp32 b-mixed; do
  "$S" bench "$OUT/$B.onnx" --original "$OUT/m.onnx" --runtime-config configs/runtime/host.toml --runs "$RUNS" \
    --json >"$OUT/$B.json" 2>"$OUT/$B.log"
  grep -E "^original, 1 core|^original, onnxruntime|^branched, 2 processors |^speedup of branched on its processors vs original, 1 core" "$OUT/$B.log" | sed "s/^/  [$B] /" || true
done
"$PY" scripts/check_quantized.py quantize "$OUT/calibration/fp32.onnx" "$OUT/calibration/samples.npy" "$OUT/m-ort-int8.onnx"
"$PY" scripts/check_quantized.py time "$OUT/m-ort-int8.onnx" --threads 2 --runs "$RUNS"
"$PY" scripts/check_quantized.py time "$OUT/m.onnx" --threads 2 --runs "$RUNS"
echo
echo "files in $OUT"
