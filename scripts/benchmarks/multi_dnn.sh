#!/usr/bin/env bash
# Multi-DNN serving on this machine (Band issue): measures with `stretch
# serve` on the heterogeneous host config (cpu0 tract on core 0, all ops;
# cpu1 onnxruntime on core 1 without MaxPool/Gemm), then replays the same
# workloads in `stretch simulate` with the latencies serve measured, so the
# two can be compared. Run on an idle machine (no build running).
#   DURATION=8 scripts/benchmarks/multi_dnn.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
OUT="${1:-multi-dnn-run}"
D="${DURATION:-8}"
mkdir -p "$OUT"
RC=configs/runtime/hetero.toml
POL=lst,fixed,rr,sel,heft
echo "== four apps, SLO multiplier 1-4, measured (serve), ${D} s per run"
"$S" serve --workload configs/workloads/four_apps.toml --runtime-config $RC --compare $POL \
    --slo-multipliers 1,2,3,4 --duration-s "$D" --plot "$OUT/four_apps_serve.svg" \
    --save-latencies "$OUT/four_apps_latencies.json" --json > "$OUT/four_apps_serve.json"
python3 - "$OUT/four_apps_serve.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print("SLO satisfaction (%), measured; rows: multiplier, columns: policy")
pols = list(dict.fromkeys(r["policy"] for r in rows))
print("mult " + " ".join(f"{p:>7}" for p in pols))
for i in range(0, len(rows), len(pols)):
    print(f"x{i // len(pols) + 1:<3} " + " ".join(f"{r['slo_satisfaction']:7.1f}" for r in rows[i:i + len(pols)]))
print("lost:", sum(r["lost"] for r in rows), "mismatches:", sum(r["mismatches"] for r in rows),
      "of", sum(r["outputs_checked"] for r in rows), "outputs checked")
PY
echo "== the same, simulated with serve's measured latencies"
"$S" simulate --workload configs/workloads/four_apps.toml --runtime-config $RC \
    --latencies "$OUT/four_apps_latencies.json" --compare $POL --slo-multipliers 1,2,3,4 \
    --duration-s "$D" | tee "$OUT/four_apps_sim.txt"
echo "== EagleEye-style frames: lst with subgraphs, lst whole-model only, fixed (measured)"
"$S" serve --workload configs/workloads/eagleeye.toml --runtime-config $RC --compare lst,lst-whole,fixed \
    --duration-s "$D" 2>/dev/null | tee "$OUT/eagleeye_serve.txt"
echo "== 7 s outage of cpu1 at 6 s (measured, lst)"
"$S" serve --workload configs/workloads/outage.toml --runtime-config $RC --policy lst \
    --trace "$OUT/outage_trace.json" --json > "$OUT/outage.json"
python3 -c "import json;r=json.load(open('$OUT/outage.json'))[0];print('requests',r['requests'],'completed',r['completed'],'lost',r['lost'],'mismatches',r['mismatches'],'of',r['outputs_checked']);print('completed per second:',r['per_second'])"
echo "== simulator speed: 10 minutes of the four-app workload"
"$S" simulate --workload configs/workloads/four_apps.toml --runtime-config $RC \
    --latencies "$OUT/four_apps_latencies.json" --policy lst --duration-s 600 | tail -3
