#!/usr/bin/env bash
# Puzzle §6.3-6.4 on simulated processors: 10 random single-group scenarios
# of 6 of the 9 Table 3 models and 10 two-group scenarios of 3 + 3, each
# searched by `stretch analyze` on configs/devices/s23ultra.toml (Table 3
# whole-model latencies over fixtures standing in for the paper's models;
# see the stand-in list below). Prints each scenario's saturation
# multiplier α* for the GA (median over its Pareto front, as the paper
# does, and the chosen plan), the best model-level mapping (the best α*
# over the mappings' front), the single best processor and Band's lst,
# then mean ± std per method and how often the chosen plan is at most the
# best baseline plan (and at most 0.8x of it).
#
#   scripts/benchmarks/puzzle_scenarios.sh [GENERATIONS] [SEED]
#
# Every figure is simulated.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
GENERATIONS="${1:-40}"
SEED="${2:-0}"
cargo build --release -q -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"
OUT="${OUT:-target/puzzle-scenarios}"
mkdir -p "$OUT"
python3 - "$OUT" "$SEED" <<'PY'
import random, sys, os
out, seed = sys.argv[1], int(sys.argv[2])
root = os.path.abspath(".")
# app name (a key of s23ultra.toml [models]) -> fixture standing in for it
stand_in = {
    "face_det": "fixtures/vision/yolo_tiny.onnx",
    "selfie_seg": "fixtures/vision/lraspp_mobilenet_v3_large.onnx",
    "hand_det": "fixtures/models/mobilenet_v2.onnx",
    "pose_det": "fixtures/models/efficientnet_b0.onnx",
    "tc_mono_depth": "fixtures/vision/style_transfer.onnx",
    "fast_scnn": "fixtures/vision/deeplabv3_mobilenet_v3_large.onnx",
    "yolov8n": "fixtures/vision/yolo_tiny.onnx",
    "mosaic": "fixtures/vision/fcn_resnet50.onnx",
    "fastsam_s": "fixtures/models/resnet50.onnx",
}
rng = random.Random(seed)
names = sorted(stand_in)
for kind, groups in (("single", 1), ("multi", 2)):
    for s in range(10):
        picked = rng.sample(names, 6)
        text = "seed = %d\nduration_s = 1\n" % s
        for g in range(groups):
            text += '[[group]]\nname = "g%d"\nperiod_multiplier = 1.0\n' % g
        for i, n in enumerate(picked):
            g = 0 if groups == 1 else i // 3
            text += '[[app]]\nname = "%s"\nmodel = "%s/%s"\narrival = "group"\ngroup = "g%d"\n' % (n, root, stand_in[n], g)
        with open(os.path.join(out, "%s_%02d.toml" % (kind, s)), "w") as f:
            f.write(text)
PY
: > "$OUT/seconds.txt"
for f in "$OUT"/single_*.toml "$OUT"/multi_*.toml; do
  start=$(date +%s.%N)
  "$STRETCH" analyze --workload "$f" --device configs/devices/s23ultra.toml \
    --generations "$GENERATIONS" --seed "$SEED" --json -o "${f%.toml}.plan.json" > "${f%.toml}.json" 2>/dev/null
  secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}")
  echo "$secs" >> "$OUT/seconds.txt"
  echo "analyzed $(basename "$f") in $secs s" >&2
done
python3 - "$OUT" <<'PY'
import json, glob, os, statistics, sys
out = sys.argv[1]
def alpha(x):
    return float("inf") if x is None else x
for kind in ("single", "multi"):
    rows = []
    for f in sorted(glob.glob(os.path.join(out, kind + "_[0-9][0-9].json"))):
        fig = json.load(open(f))["figures"]
        base = {b["name"].split(" (")[0]: alpha(b["saturation_multiplier"]) for b in fig["baselines"]}
        rows.append((os.path.basename(f)[:-5], alpha(fig["ga_median_saturation_multiplier"]),
                     alpha(fig["saturation_multiplier"]), base["best mapping"], base["single processor"],
                     base["Band lst"]))
    print("\n%s model group%s (%d scenarios): saturation multiplier α* (simulated; lower is better)" %
          ("one" if kind == "single" else "two", "" if kind == "single" else "s", len(rows)))
    print("%-10s %9s %9s %9s %9s %9s" % ("scenario", "GA med", "GA best", "best map", "single", "Band lst"))
    for r in rows:
        print("%-10s" % r[0] + "".join(" %9.2f" % v for v in r[1:]))
    for i, name in enumerate(("GA median over front", "GA chosen plan", "best mapping", "single best processor", "Band lst")):
        v = [r[i + 1] for r in rows]
        fin = [x for x in v if x != float("inf")]
        sd = statistics.stdev(fin) if len(fin) > 1 else 0.0
        print("  %-24s %.2f ± %.2f%s" % (name, statistics.mean(fin), sd,
              "" if len(fin) == len(v) else "  (%d of %d never saturated below x4)" % (len(v) - len(fin), len(v))))
    ga = [r[1] for r in rows]; lst = [r[5] for r in rows]
    print("  GA median ≤ Band lst in %d of %d scenarios" % (sum(a <= b + 1e-9 for a, b in zip(ga, lst)), len(rows)))
    best = [r[2] for r in rows]
    print("  GA chosen ≤ Band lst in %d of %d scenarios" % (sum(a <= b + 1e-9 for a, b in zip(best, lst)), len(rows)))
    bm = [min(r[3], r[4]) for r in rows]
    print("  GA chosen ≤ the best baseline plan (best mapping, single processor) in %d of %d scenarios; ≤ 0.8x of it in %d"
          % (sum(a <= b + 1e-9 for a, b in zip(best, bm)), len(rows), sum(a <= 0.8 * b + 1e-9 for a, b in zip(best, bm))))
secs = [float(x) for x in open(os.path.join(out, "seconds.txt")) if x.strip()]
print("\nanalyze wall time per scenario (search, α* sweeps of the front and the baselines): mean %.1f s, max %.1f s" %
      (statistics.mean(secs), max(secs)))
PY
