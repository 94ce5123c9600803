#!/usr/bin/env bash
# Splash (thermal-aware scheduling) in the simulator, on the Snapdragon 855
# profile's thermal figures (calibrated to Splash Table 2.2; see the
# comment in configs/devices/snapdragon855.toml):
#   1. Person Finder at 30 fps for 10 simulated minutes: Band's HEFT, HEFT
#      with the cloud, min-heat and max-weighted-ppt (both with the cloud):
#      time to throttling, SLO satisfaction, per-worker busy share, peak
#      temperature and PPT; then the highest camera rate that never
#      throttles in 10 minutes.
#   2. The same at the cloud link's other bandwidths (128 and 13 Mbit/s).
#   3. Live Video Analytics at 5 fps.
#   4. The overheads of thermal prediction, a policy decision and a refit.
# Every figure but the overheads is simulated. Run on an idle machine:
#   scripts/benchmarks/splash_simulate.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
cargo build --release --quiet -p multi-dnn --example thermal_overhead
S="$CARGO_TARGET_DIR/release/stretch"
OUT="${1:-splash-run}"
mkdir -p "$OUT"
DEV=configs/devices/snapdragon855.toml
PF=configs/workloads/person_finder.toml

echo "== Person Finder, 30 fps, 600 s, cloud link 249 Mbit/s =="
"$S" simulate --thermal --workload "$PF" --device "$DEV" --fps-sweep 5,10,15,20,25,30,35,40 | tee "$OUT/person_finder.txt"
for mbps in 128 13; do
    echo "== Person Finder, 30 fps, 600 s, cloud link $mbps Mbit/s =="
    "$S" simulate --thermal --workload "$PF" --device "$DEV" --cloud-mbps "$mbps" \
        --compare heft,heft+cloud,min-heat+cloud,max-weighted-ppt+cloud | tee "$OUT/person_finder_${mbps}mbps.txt"
done
echo "== Live Video Analytics, 5 fps, 600 s =="
"$S" simulate --thermal --workload configs/workloads/live_video_analytics.toml --device "$DEV" | tee "$OUT/live_video_analytics.txt"
echo "== overheads (measured on this machine) =="
"$CARGO_TARGET_DIR/release/examples/thermal_overhead" | tee "$OUT/overheads.txt"
