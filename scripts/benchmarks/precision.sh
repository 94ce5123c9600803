#!/usr/bin/env bash
# Speed of int8 on this machine (issue 49, point 7), every figure measured
# in this run; phone figures are predictions and are not made here.
#
#   scripts/benchmarks/precision.sh [RUNS] [SIZE]
#
# 1. int8 against fp32 on the same core and engine: zoo resnet-mini at
#    SIZExSIZE (default 96) and the same model quantized wholly to int8
#    (`stretch quantize --processor cpu` on snapdragon855, whose CPU runs
#    int8; 32 digits images), timed against each other on one core with
#    tract (`stretch bench`, RUNS runs, interleaved) and with onnxruntime
#    on one thread pinned to core 0 (`check_quantized.py time`, interleaved).
# 2. Plans with and without precision: kernels profiled at fp32 and at
#    int8 (`stretch profile --precision int8`) on core 0 with tract and
#    fitted; a profile whose cpu0 runs int8 priced by the int8 forests
#    (cpu1 fp32), planned with `--alpha 1`, and the same profile with
#    `--precisions cpu0=fp32`.
# 3. The mixed-precision branched model (cpu0 int8, cpu1 fp32) against the
#    fp32 branched model on the two cores (`stretch bench`, each against
#    the original); then in onnxruntime on two threads, interleaved: the
#    original, its quantize_static model (same calibration images), our
#    whole-int8 model and the mixed branched model as one file.
set -euo pipefail
RUNS="${1:-60}"
SIZE="${2:-96}"
source "$(dirname "$0")/precision_common.sh"
OUT="${OUT:-target/precision-bench}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
S="$STRETCH"
step() { echo; echo "== $* ($(date +%H:%M:%S))"; }
median() { "$PY" -c "import json,sys; r={c['name']:c for c in json.load(open(sys.argv[1]))['configurations']}; print(r[sys.argv[2]]['p50_ms'])" "$@"; }

step "1. int8 vs fp32, same core and engine (resnet-mini ${SIZE}x${SIZE})"
"$S" zoo resnet-mini --input-size "$SIZE" --seed 0 -o "$OUT/m.onnx" | tail -1
"$S" quantize "$OUT/m.onnx" --device configs/devices/snapdragon855.toml --processor cpu \
  --calibration digits --samples 32 --save-calibration "$OUT/calibration" -o "$OUT/m-int8.onnx" | tail -2
"$S" bench "$OUT/m-int8.onnx" --original "$OUT/m.onnx" --processor "cpu=inline:0,engine=tract" \
  --runs "$RUNS" --json >"$OUT/int8-vs-fp32-tract.json" 2>"$OUT/int8-vs-fp32-tract.log"
"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
c = {x["name"]: x for x in json.load(open(f"{out}/int8-vs-fp32-tract.json"))["configurations"]}
fp32, int8 = c["original, 1 core"], c["branched, 1 core (sequential)"]
ratio = fp32["p50_ms"] / int8["p50_ms"]
print(f"  tract (stretch bench, interleaved): fp32 p50 {fp32['p50_ms']:.3f} ms (min {fp32['min_ms']:.3f}), int8 p50 {int8['p50_ms']:.3f} ms (min {int8['min_ms']:.3f}): int8 at {ratio:.2f}x fp32's speed (p50), {fp32['min_ms'] / int8['min_ms']:.2f}x (min)")
PYEOF
echo "  onnxruntime, one thread on core 0 (check_quantized.py time, interleaved):"
taskset -c 0 "$PY" scripts/check_quantized.py time "$OUT/m.onnx" "$OUT/m-int8.onnx" --threads 1 --runs "$RUNS" | sed 's/^/    /'

step "2. plans with and without precision (kernels profiled at fp32 and at int8 on core 0, tract)"
# Both kernel sets are measured here, on this CPU, with KSAMPLES
# configurations per class and no adaptive round (a full profile is
# scripts/profile_host.sh's job); cpu0 runs int8 priced by the int8
# forests, cpu1 fp32; links as configs/devices/host.toml has them.
KSAMPLES="${KSAMPLES:-40}"
CLASSES=conv+bn+act,pool,gap,add+act,fc
for P in fp32 int8; do
  rm -rf "$OUT/kernels-$P"
  "$S" profile --precision "$P" --classes "$CLASSES" --cores 0 --samples "$KSAMPLES" --rounds 0 --reps 15 \
    --out "$OUT/kernels-$P" 2>/dev/null | tail -1
  "$S" fit "$OUT/kernels-$P" --processor cpu0 --statistic p10 >"$OUT/kernels-$P/fit.txt"
done
PEAK32=$(sed -n 's/^peak_gflops = { value = \([0-9.]*\).*/\1/p' "$OUT/kernels-fp32/fit.txt")
PEAK8=$(sed -n 's/.*int8 peak_gflops \([0-9.]*\).*/\1/p' "$OUT/kernels-int8/fit.txt")
SPEEDUP=$("$PY" -c "print(round($PEAK8 / $PEAK32, 3))")
BLOCK=$(sed -n '/^\[processors.cpu0\]/,$p' "$OUT/kernels-fp32/fit.txt" | tail -n +2)
{
  echo "name = \"host-precision\""
  echo "description = \"this machine's core 0 profiled at fp32 and int8 by scripts/benchmarks/precision.sh (measured)\""
  for C in cpu0 cpu1; do
    echo; echo "[processors.$C]"; echo "$BLOCK"
  done
  echo
  sed -n '/^\[\[links\]\]/,$p' configs/devices/host.toml
} >"$OUT/host-int8.toml"
"$PY" - "$OUT" "$SPEEDUP" <<'PYEOF'
import sys
out, speedup = sys.argv[1], sys.argv[2]
path = f"{out}/host-int8.toml"
text = open(path).read()
lines = [
    'precision = "int8"',
    f'speedup.int8 = {{ value = {speedup}, source = "fitted: int8 over fp32 peak_gflops of {out}/kernels-*/kernels.csv (stretch fit, p10)" }}',
    f'regressors_at.int8 = "{out}/kernels-int8/regressors.json"',
]
head, tail = text.split("[processors.cpu1]")
open(path, "w").write(head.rstrip("\n") + "\n" + "\n".join(lines) + "\n\n[processors.cpu1]" + tail)
PYEOF
echo "  int8 over fp32 fitted peak on core 0 (tract): $SPEEDUP"
"$S" plan "$OUT/m.onnx" --device "$OUT/host-int8.toml" --alpha 1 -o "$OUT/plan-int8.json" | grep -E "^stage|^plan:"
"$S" plan "$OUT/m.onnx" --device "$OUT/host-int8.toml" --alpha 1 --precisions cpu0=fp32 -o "$OUT/plan-fp32.json" | grep -E "^stage|^plan:"

step "3. mixed-precision branched vs fp32 branched vs onnxruntime's quantized whole model"
"$S" branch "$OUT/m.onnx" --plan "$OUT/plan-fp32.json" -o "$OUT/b-fp32.onnx" | tail -1
"$S" quantize "$OUT/b-fp32.onnx" --device "$OUT/host-int8.toml" --calibration digits --samples 32 -o "$OUT/b-mixed.onnx" | tail -2
for B in b-fp32 b-mixed; do
  "$S" bench "$OUT/$B.onnx" --original "$OUT/m.onnx" --runtime-config configs/runtime/host.toml --runs "$RUNS" \
    --json >"$OUT/$B.json" 2>"$OUT/$B.log"
done
"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
for b in ("b-fp32", "b-mixed"):
    c = {x["name"]: x for x in json.load(open(f"{out}/{b}.json"))["configurations"]}
    base = c["original, 1 core"]
    for name in ("original, 1 core", "original, onnxruntime 2 threads", "branched, 2 processors", "branched, 2 processors, ort"):
        x = c.get(name)
        if x:
            print(f"  [{b}] {name}: min {x['min_ms']:.3f} ms, p50 {x['p50_ms']:.3f} ms, {base['p50_ms'] / x['p50_ms']:.2f}x original 1 core (p50)")
PYEOF
"$PY" scripts/check_quantized.py quantize "$OUT/calibration/fp32.onnx" "$OUT/calibration/samples.npy" "$OUT/m-ort-int8.onnx"
"$PY" scripts/check_quantized.py time "$OUT/m.onnx" "$OUT/m-ort-int8.onnx" "$OUT/m-int8.onnx" "$OUT/b-mixed.onnx" \
  --threads 2 --runs "$RUNS"
echo
echo "files in $OUT"
