#!/usr/bin/env bash
# Top-1 agreement of stretch's post-training quantized files with
# onnxruntime's quantize_static model (issue 49, point 4: goal 99%) on the
# random-weight branched fixtures, quantized as the fixtures test does
# (host profile, cpu0+cpu1, both merges, 32x32, `--alpha 1`; two int8
# cores; 8 digits images) with VALIDATION digits images to compare on.
# For each file it prints the agreement (scripts/check_quantized.py
# scales --validation) and, from onnxruntime's runs of both files, the
# largest output difference and, for every image whose top-1 differs,
# the reference's top-2 margin, both in steps of the output's scale; and
# the reference against itself with every activation scale moved up by one
# float32 unit in the last place (`self, scales +1 ulp`): how much of the
# disagreement a calibration that differs only by float rounding causes.
#
#   scripts/benchmarks/precision_fixture_agreement.sh [VALIDATION]
#
# Default 256 images; files under $OUT (default target/precision-fixtures).
set -euo pipefail
VALIDATION="${1:-256}"
source "$(dirname "$0")/precision_common.sh"
OUT="${OUT:-target/precision-fixtures}"
mkdir -p "$OUT"
sed -n '/^pub const INT8_PAIR: &str = r#"$/,/^"#;$/p' crates/stretch-cli/tests/common.rs | sed '1d;$d' >"$OUT/int8-pair.toml"
for F in fixtures/models/*.onnx; do
  STEM=$(basename "$F" .onnx)
  for MERGE in project concat; do
    M="$OUT/$STEM-$MERGE"
    "$STRETCH" stretch "$F" --device configs/devices/host.toml --processors cpu0,cpu1 --merge "$MERGE" --alpha 1 \
      --random-weights 1 --input-shape 1,3,32,32 -o "$M.onnx" >/dev/null
    "$STRETCH" quantize "$M.onnx" --device "$OUT/int8-pair.toml" --calibration digits --samples 8 \
      --validation-images "$VALIDATION" --save-calibration "$M-cal" -o "$M-int8.onnx" >/dev/null
    "$PY" scripts/check_quantized.py quantize "$M-cal/fp32.onnx" "$M-cal/samples.npy" "$M-ref.onnx" >/dev/null 2>&1
    AGREE=$("$PY" scripts/check_quantized.py scales "$M-cal/fp32.onnx" "$M-cal/samples.npy" "$M-int8.onnx" \
      --validation "$M-cal/validation.npy" --min-agreement 0 2>/dev/null | grep -E 'top-1' | sed 's/.*model on //')
    MARGINS=$("$PY" - "$M" <<'PY'
import sys
import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
sys.path.insert(0, "scripts")
from check_quantized import output_step
m = sys.argv[1]
images = np.load(f"{m}-cal/validation.npy").astype(np.float32)
def outputs(path):
    s = ort.InferenceSession(path if isinstance(path, str) else path.SerializeToString(),
                             providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[None]})[0] for x in images])
ref, ours = outputs(f"{m}-ref.onnx"), outputs(f"{m}-int8.onnx")
model = onnx.load(f"{m}-ref.onnx")
step = output_step(model, model.graph.output[0].name)
top = np.sort(ref, axis=1)
margin = np.round((top[:, -1] - top[:, -2]) / step).astype(int)
flipped = ref.argmax(1) != ours.argmax(1)
nudged = onnx.load(f"{m}-ref.onnx")
scales = {n.input[1] for n in nudged.graph.node if n.op_type == "QuantizeLinear"}
for t in nudged.graph.initializer:
    if t.name in scales:
        v = onnx.numpy_helper.to_array(t).astype(np.float32)
        t.CopyFrom(onnx.numpy_helper.from_array(np.nextafter(v, np.float32(np.inf)), t.name))
itself = (outputs(nudged).argmax(1) == ref.argmax(1)).mean() * 100
print(f"largest difference {np.abs(ref - ours).max() / step:.0f} steps; median margin {np.median(margin):.0f} steps; "
      f"margins of the flipped: {sorted(margin[flipped].tolist())}; self, scales +1 ulp: {itself:.2f}%")
PY
)
    echo "$STEM-$MERGE: $AGREE; $MARGINS"
  done
done
