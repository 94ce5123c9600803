#!/usr/bin/env bash
# How alike consecutive runs of one model are on this machine: puzzle_host.sh's
# mini32 (resnet-mini, 32x32, seed 0) on onnxruntime, one thread pinned to
# core 0, RUNS back-to-back runs after 50 warm-ups; prints the median, p10
# and p90, the lag-1/2/5/20/100 autocorrelation of the run times, and the
# spread of the mean of 5 consecutive runs beside what independent runs
# would give (the simulator's spread draws follow a processor's lag-1
# correlation). Run on an idle machine.
#
#   RUNS=3000 scripts/benchmarks/run_correlation.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
PY=.venv/bin/python
[[ -x "$PY" ]] || { echo "error: .venv missing; run scripts/setup.sh first" >&2; exit 1; }
cargo build --release -q -p stretch-cli
OUT="${OUT:-target/run-correlation}"
mkdir -p "$OUT"
"$CARGO_TARGET_DIR/release/stretch" zoo resnet-mini --input-size 32 --seed 0 -o "$OUT/mini32.onnx" > /dev/null
taskset -c 0 "$PY" - "$OUT/mini32.onnx" "${RUNS:-3000}" <<'PY'
import sys, time
import numpy as np
import onnxruntime as ort

path, runs = sys.argv[1], int(sys.argv[2])
so = ort.SessionOptions()
so.intra_op_num_threads = 1
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
i = s.get_inputs()[0]
x = np.random.default_rng(0).random([d if isinstance(d, int) else 1 for d in i.shape], dtype=np.float32)
for _ in range(50):
    s.run(None, {i.name: x})
t = []
for _ in range(runs):
    a = time.perf_counter()
    s.run(None, {i.name: x})
    t.append(time.perf_counter() - a)
t = np.array(t) * 1e3
print(f"{runs} runs of {path} (onnxruntime {ort.__version__}, one thread, core 0): median {np.median(t):.3f} ms, p10 {np.percentile(t, 10):.3f}, p90 {np.percentile(t, 90):.3f} (measured)")
r = t / np.median(t)
ac = {k: np.corrcoef(r[:-k], r[k:])[0, 1] for k in (1, 2, 5, 20, 100)}
print("autocorrelation of run times: " + ", ".join(f"lag {k} {v:.3f}" for k, v in ac.items()))
m5 = np.convolve(r, np.ones(5), "valid")[::5] / 5
print(f"sd of one run {r.std():.4f}; of the mean of 5 consecutive runs {m5.std():.4f}, against {r.std() / np.sqrt(5):.4f} were they independent ({m5.std() / (r.std() / np.sqrt(5)):.2f}x)")
PY
