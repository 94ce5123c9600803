#!/usr/bin/env bash
# Multi-DNN serving (Band issue). On this machine, with `stretch serve` on
# the heterogeneous host config (cpu0: tract on core 0, every op; cpu1:
# onnxruntime on core 1 without MaxPool/Gemm): the four-app SLO sweep per
# policy, the EagleEye-style frame workload, a 7 s outage; then
# `stretch simulate` replaying the same workloads with the latencies serve
# measured (fidelity table), the simulator's speed, the Snapdragon 855
# profile's simulated ordering, and the scheduler's decision time.
# SCHED=thread serves with one scheduling thread (`serve --scheduling
# thread`) instead of self-scheduling workers (the default, `self`).
# Run on an idle machine (no build running):
#   DURATION=15 ROUNDS=5 [SCHED=self|thread] scripts/benchmarks/multi_dnn.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
cargo build --release --quiet -p multi-dnn --example decision_time
S="$CARGO_TARGET_DIR/release/stretch"
OUT="${1:-multi-dnn-run}"
D="${DURATION:-15}"
R="${ROUNDS:-5}"
SCHED="${SCHED:-self}"
mkdir -p "$OUT"
RC=configs/runtime/hetero.toml
POL=lst,fixed,rr,sel,heft
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python

echo "== four apps, SLO multiplier 1-4, measured (serve), ${D} s per point in ${R} interleaved rounds"
"$S" serve --scheduling "$SCHED" --workload configs/workloads/four_apps.toml --runtime-config $RC --compare $POL \
    --slo-multipliers 1,2,3,4 --duration-s "$D" --rounds "$R" --plot "$OUT/four_apps_serve.svg" \
    --save-latencies "$OUT/four_apps_latencies.json" --json > "$OUT/four_apps_serve.json"
echo "== the same, simulated with serve's measured latencies"
"$S" simulate --workload configs/workloads/four_apps.toml --runtime-config $RC \
    --latencies "$OUT/four_apps_latencies.json" --compare $POL --slo-multipliers 1,2,3,4 \
    --duration-s "$D" --json > "$OUT/four_apps_sim.json"

echo "== EagleEye-style frames: lst with subgraphs, lst whole-model only, fixed (measured, then simulated)"
"$S" serve --scheduling "$SCHED" --workload configs/workloads/eagleeye.toml --runtime-config $RC --compare lst,lst-whole,fixed \
    --duration-s "$D" --rounds "$R" --save-latencies "$OUT/eagleeye_latencies.json" --json > "$OUT/eagleeye_serve.json"
"$S" simulate --workload configs/workloads/eagleeye.toml --runtime-config $RC \
    --latencies "$OUT/eagleeye_latencies.json" --compare lst,lst-whole,fixed \
    --duration-s "$D" --json > "$OUT/eagleeye_sim.json"

echo "== 7 s outage of cpu1 at 6 s (measured, lst)"
"$S" serve --scheduling "$SCHED" --workload configs/workloads/outage.toml --runtime-config $RC --policy lst \
    --trace "$OUT/outage_trace.json" --json > "$OUT/outage.json"

$PY - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
load = lambda n: json.load(open(f"{out}/{n}"))
serve, sim = load("four_apps_serve.json"), load("four_apps_sim.json")
pols = list(dict.fromkeys(r["policy"] for r in serve))
mults = len(serve) // len(pols)
print("SLO satisfaction (%), measured by serve; rows: multiplier, columns: policy")
print("mult " + " ".join(f"{p:>7}" for p in pols) + "   lst - best")
for i in range(mults):
    row = serve[i * len(pols):(i + 1) * len(pols)]
    best = max(r["slo_satisfaction"] for r in row)
    print(f"x{i + 1:<3} " + " ".join(f"{r['slo_satisfaction']:7.1f}" for r in row)
          + f"   {row[0]['slo_satisfaction'] - best:+.1f}")
print("lost:", sum(r["lost"] for r in serve), "mismatches:", sum(r["mismatches"] for r in serve),
      "of", sum(r["outputs_checked"] for r in serve), "outputs checked")
print("lst decision time p50 per run (µs):", [round(r["decision_p50_us"], 1) for r in serve if r["policy"] == "lst"])
print()
print("Simulator fidelity, four apps: simulate (serve's latencies) vs serve")
print(f"{'policy':<8} {'mult':>4} {'thr serve':>9} {'thr sim':>8} {'diff':>7} {'SLO serve':>9} {'SLO sim':>8} {'diff':>6}")
worst_t = worst_s = 0.0
for a, b in zip(serve, sim):
    m = serve.index(a) // len(pols) + 1
    dt = 100 * (b["throughput_rps"] - a["throughput_rps"]) / a["throughput_rps"]
    ds = b["slo_satisfaction"] - a["slo_satisfaction"]
    worst_t, worst_s = max(worst_t, abs(dt)), max(worst_s, abs(ds))
    print(f"{a['policy']:<8} x{m:<3} {a['throughput_rps']:9.2f} {b['throughput_rps']:8.2f} {dt:+6.1f}% "
          f"{a['slo_satisfaction']:9.1f} {b['slo_satisfaction']:8.1f} {ds:+6.1f}")
print(f"worst: throughput {worst_t:.1f}%, SLO satisfaction {worst_s:.1f} points")
print()
es, em = load("eagleeye_serve.json"), load("eagleeye_sim.json")
print("EagleEye-style frames per second (measured by serve; simulated with serve's latencies)")
for a, b in zip(es, em):
    print(f"{a['policy']:<10} {a['fps']:6.2f} fps measured   {b['fps']:6.2f} fps simulated "
          f"({100 * (b['fps'] - a['fps']) / a['fps']:+.1f}%)   SLO met {a['slo_satisfaction']:.1f}% / {b['slo_satisfaction']:.1f}%")
print()
r = load("outage.json")[0]
print("outage: requests", r["requests"], "completed", r["completed"], "lost", r["lost"],
      "mismatches", r["mismatches"], "of", r["outputs_checked"])
for o in r["outages"]:
    print(f"  {o['processor']} away {o['down_s']:.2f}-{o['up_s']:.2f} s, running again {o['resumed_after_ms']:.1f} ms "
          f"after; completed/s {o['before_rps']:.1f} before, {o['during_rps']:.1f} during, "
          f"{o['after_rps']:.1f} in the first second after; recovered within 1 s: {o['recovered_within_1s']}")
print("  completed per second:", r["per_second"])
PY

echo "== simulator speed: 10 minutes of the four-app workload"
"$S" simulate --workload configs/workloads/four_apps.toml --runtime-config $RC \
    --latencies "$OUT/four_apps_latencies.json" --policy lst --duration-s 600 2>&1 | grep -E "simulated .* in"

echo "== Snapdragon 855 profile (predicted latencies, delegate op support), simulated"
"$S" simulate --workload configs/workloads/four_apps.toml --device configs/devices/snapdragon855.toml \
    --compare lst,fixed,rr,sel,heft --slo-multipliers 1,2,3,4 --duration-s 60 2>/dev/null \
    | tee "$OUT/sd855_four_apps.txt"
"$S" simulate --workload configs/workloads/eagleeye.toml --device configs/devices/snapdragon855.toml \
    --compare lst,lst-whole,fixed --duration-s 60 2>/dev/null | tee "$OUT/sd855_eagleeye.txt"

echo "== scheduler decision time (4 processors, 32 queued jobs)"
"$CARGO_TARGET_DIR/release/examples/decision_time" 3000 | tee "$OUT/decision_time.txt"
