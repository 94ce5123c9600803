#!/usr/bin/env bash
# Where the onnxruntime engine's time goes on a branched model: resnet18 at
# 224x224 (random weights) planned at the default capacity on the host
# profile, then (1) `stretch bench` with both processors on the onnxruntime
# engine (--json and its Chrome trace: per-processor busy time, the gaps
# between subgraphs, the sum of the subgraph runs of one traced run) and
# (2) onnxruntime from Python on the same files: the original with 1 and 2
# intra-op threads and the branched file as one session on 1 thread, 30 runs
# each after 5 warm-ups, spinning off as in the engine. Run on an idle machine.
#
#   scripts/benchmarks/ort_breakdown.sh [RUNS]   (default 20 for the bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release -q -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
out="${TMPDIR:-/tmp}/stretch-ort-breakdown"
mkdir -p "$out"
"$S" convert fixtures/models/resnet18.onnx --random-weights 1 -o "$out/resnet18.onnx" > /dev/null
"$S" stretch fixtures/models/resnet18.onnx --device configs/devices/host.toml --processors cpu0,cpu1 \
    --random-weights 1 -o "$out/branched.onnx" | tail -1
"$S" bench "$out/branched.onnx" --original "$out/resnet18.onnx" --runs "${1:-20}" \
    --processor cpu0=inline:core0,engine=ort --processor cpu1=pool:core1,engine=ort \
    --trace "$out/trace.json" --json > "$out/bench.json"
.venv/bin/python - "$out" <<'PY'
import json, sys, time
import numpy as np
import onnxruntime as ort

out = sys.argv[1]
bench = json.load(open(f"{out}/bench.json"))
print("stretch bench (p50 / min ms):")
for c in bench["configurations"]:
    print(f"  {c['name']:45} {c['p50_ms']:8.2f} {c['min_ms']:8.2f}")
spans = [e for e in json.load(open(f"{out}/trace.json"))["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 1]
spans.sort(key=lambda e: e["ts"])
t0 = spans[0]["ts"]
end = max(e["ts"] + e["dur"] for e in spans)
busy, gaps, last_end = {}, [], {}
for e in spans:
    busy[e["tid"]] = busy.get(e["tid"], 0) + e["dur"] / 1e3
    if e["tid"] in last_end:
        gaps.append((e["ts"] - last_end[e["tid"]]) / 1e3)
    last_end[e["tid"]] = e["ts"] + e["dur"]
print(f"traced run: span {(end - t0) / 1e3:.2f} ms, {len(spans)} subgraph runs summing to {sum(busy.values()):.2f} ms;"
      f" busy per processor {', '.join(f'{k} {v:.2f} ms' for k, v in sorted(busy.items()))};"
      f" gaps between a processor's runs (waits at meeting points included): median {np.median(gaps):.3f} ms, max {max(gaps):.3f} ms")
x = np.random.default_rng(0).standard_normal([1, 3, 224, 224]).astype(np.float32)
def timed(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    feed = {s.get_inputs()[0].name: x}
    for _ in range(5):
        s.run(None, feed)
    ts = []
    for _ in range(30):
        a = time.perf_counter()
        s.run(None, feed)
        ts.append((time.perf_counter() - a) * 1e3)
    return min(ts), float(np.median(ts))
print("onnxruntime from Python (p50 / min ms):")
for name, path, threads in [("original, 1 thread", "resnet18.onnx", 1), ("original, 2 threads", "resnet18.onnx", 2),
                            ("branched file as one session, 1 thread", "branched.onnx", 1)]:
    mn, md = timed(f"{out}/{path}", threads)
    print(f"  {name:45} {md:8.2f} {mn:8.2f}")
PY
