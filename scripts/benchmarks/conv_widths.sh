#!/usr/bin/env bash
# Time per MAC of one 3x3 convolution (cin = cout = c, bias and ReLU, at
# 14x14 and 28x28) for c from 64 to 384 in steps of 8, on tract and on
# onnxruntime, one thread on core 0 (scheduler-rt's time_files example,
# interleaved rounds): shows which output-channel counts each engine's
# kernels run slowly (the "Tiles" paragraph of docs/prediction.md). Then, at 14x14,
# cout from 160 to 184 with cin = 192, and cin from 160 to 184 with cout =
# 192, on tract: which of the two counts. Prints GMAC/s per file and
# engine. Never while something builds.
#
#   ROUNDS=4 scripts/benchmarks/conv_widths.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p scheduler-rt --features ort --example time_files
T="$CARGO_TARGET_DIR/release/examples/time_files"
out="${TMPDIR:-/tmp}/stretch-conv-widths"
rm -rf "$out" && mkdir -p "$out/square" "$out/split"
.venv/bin/python - "$out" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)

def conv(path, cin, cout, hw):
    w = numpy_helper.from_array((rng.random((cout, cin, 3, 3)) * 0.01).astype(np.float32), "W")
    b = numpy_helper.from_array(np.zeros(cout, np.float32), "B")
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, hw, hw])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, cout, hw, hw])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)

for hw in (14, 28):
    for c in range(64, 385, 8):
        conv(f"{out}/square/i{c:03d}_o{c:03d}_h{hw}.onnx", c, c, hw)
for c in range(160, 185, 8):
    conv(f"{out}/split/i192_o{c:03d}_h14.onnx", 192, c, 14)
    conv(f"{out}/split/i{c:03d}_o192_h14.onnx", c, 192, 14)
PY
report() {
  python3 -c '
import re, sys
for line in sys.stdin:
    m = re.search(r"i(\d+)_o(\d+)_h(\d+)\.onnx: min [\d.]+ ms, median ([\d.]+) ms", line)
    if m:
        ci, co, hw, ms = int(m[1]), int(m[2]), int(m[3]), float(m[4])
        print("%-6s cin %3d cout %3d %2dx%-2d cout%%32 %2d  %6.3f ms  %5.1f GMAC/s" % (sys.argv[1], ci, co, hw, hw, co % 32, ms, ci * co * 9 * hw * hw / ms / 1e6))' "$1"
}
for e in tract ort; do
  "$T" "$e" 0 "${ROUNDS:-4}" "$out"/square/*.onnx | report "$e"
done
"$T" tract 0 "${ROUNDS:-4}" "$out"/split/*.onnx | report tract
