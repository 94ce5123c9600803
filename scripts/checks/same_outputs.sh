#!/usr/bin/env bash
# Runs the single-model pipeline on a fixture (inspect, plan, branch,
# predict, export) and `simulate`
# and `analyze` on every shipped workload with fixed seeds, and compares
# what two builds print, byte for byte, and the files they write (plan,
# branched model, bundle manifest). For a refactoring that
# must not change behaviour: build the old commit, then
#
#   scripts/checks/same_outputs.sh OLD_STRETCH NEW_STRETCH [OUT_DIR]
#
# Prints one line per case (same / DIFFERS) and the diff of each that
# differs; exits 1 if any differs. Every figure these commands print is
# simulated (predicted latencies on device profiles), so a rerun of one
# build prints the same bytes, except three things measured on the host
# that are masked before comparing: the policies' decision time (the
# "decision" column, `decision_p50_us`/`decision_p99_us`), how long the
# simulator or the search took ("simulated 20.0 s in 0.003 s", "1175
# simulations, 1.3 s") and the output folder's name. Host-measured runs (serve, analyze --runtime-config) are not
# compared because their figures are timings.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [[ $# -lt 2 ]]; then
    echo "usage: $0 OLD_STRETCH NEW_STRETCH [OUT_DIR]" >&2
    exit 2
fi
OLD=$1
NEW=$2
OUT=${3:-target/same-outputs}
for b in "$OLD" "$NEW"; do
    [[ -x "$b" ]] || { echo "error: $b is not an executable" >&2; exit 2; }
done
rm -rf "$OUT"
mkdir -p "$OUT/old" "$OUT/new"

W=configs/workloads
D=configs/devices
# name | arguments (each case writes its plan, if any, into the run's folder as @/plan.json)
M=fixtures/models/resnet18.onnx
CASES=(
  "inspect-resnet18|inspect $M"
  "plan-resnet18-sd855|plan $M --device $D/snapdragon855.toml -o @/model-plan.json"
  "branch-resnet18|branch $M --plan @/model-plan.json -o @/branched.onnx"
  "predict-branched|predict @/branched.onnx --device $D/snapdragon855.toml --processor cpu"
  "export-branched|export @/branched.onnx --random-weights 1 --device $D/snapdragon855.toml --no-ort -o @/bundle"
  "four_apps-host|simulate --workload $W/four_apps.toml --device $D/host.toml --compare fixed,rr,sel,heft,lst,lst-whole --slo-multipliers 1,2,4 --noise 0.05 --seed 3"
  "four_apps-host-json|simulate --workload $W/four_apps.toml --device $D/host.toml --policy lst --json"
  "eagleeye-host|simulate --workload $W/eagleeye.toml --device $D/host.toml --compare lst,heft,rr --contention 1.4"
  "outage-host|simulate --workload $W/outage.toml --device $D/host.toml --compare lst,fixed"
  "heimdall-lg_v50|simulate --workload $W/heimdall_lg_v50.toml --device $D/lg_v50.toml --compare whole,ops5,maxmin-utility,maxtotal-utility,maxmin-utility-offload,maxtotal-utility-offload"
  "live_video-sd855-thermal|simulate --thermal --workload $W/live_video_analytics.toml --device $D/snapdragon855.toml"
  "person_finder-sd855-thermal|simulate --thermal --workload $W/person_finder.toml --device $D/snapdragon855.toml --compare heft,lst,min-heat+cloud,max-weighted-ppt+cloud --fps-sweep 10,20,30"
  "person_finder_host-sd855-thermal|simulate --thermal --workload $W/person_finder_host.toml --device $D/snapdragon855.toml --compare heft+cloud,min-heat+cloud --eta 0.3 --cloud-mbps 13"
  "puzzle_s23-analyze|analyze --workload $W/puzzle_s23_scenario.toml --device $D/s23ultra.toml --generations 8 --seed 1 -o @/plan.json"
  "puzzle_s23-analyze-json|analyze --workload $W/puzzle_s23_scenario.toml --device $D/s23ultra.toml --generations 5 --seed 2 --json"
  "puzzle_s23-simulate-plan|simulate --workload $W/puzzle_s23_scenario.toml --device $D/s23ultra.toml --plan @/plan.json --slo-multipliers 1,1.5,2"
)

differ=0
for case in "${CASES[@]}"; do
    name=${case%%|*}
    args=${case#*|}
    for side in old new; do
        bin=$OLD
        [[ $side == new ]] && bin=$NEW
        dir="$OUT/$side"
        # shellcheck disable=SC2086
        set -- ${args//@/$dir}
        if ! "$bin" "$@" > "$dir/$name.raw.out" 2> "$dir/$name.raw.err"; then
            echo "note: $side $name exited non-zero (see $dir/$name.raw.err)" >&2
        fi
        for s in out err; do
            sed -E -e "s#$dir#@#g" \
                -e 's/ *[0-9]+(\.[0-9]+)? µs/ <µs>/g' \
                -e 's/(simulated [0-9.]+ s) in [0-9.]+ s/\1 in <s>/' \
                -e 's/(simulations), [0-9.]+ s$/\1, <s>/' \
                -e 's/("decision_p[0-9]+_us"): [-0-9.e]+/\1: <µs>/' \
                "$dir/$name.raw.$s" > "$dir/$name.$s"
        done
    done
    if cmp -s "$OUT/old/$name.out" "$OUT/new/$name.out" && cmp -s "$OUT/old/$name.err" "$OUT/new/$name.err"; then
        echo "same     $name ($(wc -l < "$OUT/new/$name.out") lines)"
    else
        echo "DIFFERS  $name"
        diff "$OUT/old/$name.out" "$OUT/new/$name.out" | head -40 || true
        diff "$OUT/old/$name.err" "$OUT/new/$name.err" | head -10 || true
        differ=1
    fi
done
for f in plan.json model-plan.json branched.onnx bundle/bundle.json; do
    if cmp -s "$OUT/old/$f" "$OUT/new/$f"; then
        echo "same     the written $f"
    else
        echo "DIFFERS  the written $f"
        differ=1
    fi
done
exit $differ
