#!/usr/bin/env bash
# The tensor pool on the onnxruntime engine, single-model runs: resnet18
# and resnet50 at 224x224 (random weights) branched at the default
# capacity on the host profile, benched on two onnxruntime processors
# (cpu0 inline on core 0, cpu1 pool on core 1) with `--tensor-pool off`
# and `on` interleaved, ROUNDS rounds of RUNS runs each. Prints every
# configuration's p50 and minimum per round and the on/off ratio of the
# branched model's p50 on its two onnxruntime processors (min and median
# over rounds). Off copies every subgraph input into a fresh buffer and
# every output into a fresh tensor; on hands inputs over in place and
# reuses output tensors.
# Never while something else builds.
#
#   scripts/benchmarks/ort_pool.sh [RUNS] [ROUNDS]   (default 30, 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
RUNS="${1:-30}"
ROUNDS="${2:-2}"
cargo build --release -q -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
out="${TMPDIR:-/tmp}/stretch-ort-pool"
mkdir -p "$out"
for m in resnet18 resnet50; do
    "$S" convert "fixtures/models/$m.onnx" --random-weights 1 -o "$out/$m.onnx" > /dev/null
    "$S" stretch "fixtures/models/$m.onnx" --device configs/devices/host.toml --processors cpu0,cpu1 \
        --random-weights 1 -o "$out/$m.branched.onnx" | tail -1
done
for r in $(seq 1 "$ROUNDS"); do
    for m in resnet18 resnet50; do
        for pool in off on; do
            "$S" bench "$out/$m.branched.onnx" --original "$out/$m.onnx" --runs "$RUNS" \
                --processor cpu0=inline:core0,engine=ort --processor cpu1=pool:core1,engine=ort \
                --tensor-pool "$pool" --trace "$out/$m.$pool.$r.trace.json" --json > "$out/$m.$pool.$r.json"
        done
    done
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for m in ("resnet18", "resnet50"):
    print(f"{m} (ms, p50 / min; measured):")
    ratios = []
    for r in range(1, rounds + 1):
        runs = {p: json.load(open(f"{out}/{m}.{p}.{r}.json")) for p in ("off", "on")}
        for p in ("off", "on"):
            cs = runs[p]["configurations"]
            print(f"  round {r}, pool {p:3}: " + "; ".join(f"{c['name']} {c['p50_ms']:.2f} / {c['min_ms']:.2f}" for c in cs))
        b = {p: next(c for c in runs[p]["configurations"] if c["name"] == "branched, 2 processors")["p50_ms"] for p in ("off", "on")}
        ratios.append(b["on"] / b["off"])
    print(f"  'branched, 2 processors' (onnxruntime engine) p50 on/off: min {min(ratios):.3f}, median {statistics.median(ratios):.3f}")
PY
