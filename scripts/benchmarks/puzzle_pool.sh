#!/usr/bin/env bash
# Puzzle's tensor pool on this machine: the model group of puzzle_host.sh
# (three zoo models, one camera group) on configs/runtime/hetero.toml,
# served with the GA's plan and Band's lst, with `--tensor-pool off` and
# `on` interleaved (ROUNDS pairs, DURATION_S seconds each), the group's
# period fixed at PERIOD_MS (default 8 ms; a period derived from each
# run's own isolated timings would differ between runs). Prints, per
# run, engine-boundary allocations and KB copied per request and each
# group's mean and p50 makespan, then the on/off ratios (min and median
# over the pairs). Needs the plan from puzzle_host.sh (run it first, or
# this script runs it). Never while something else builds.
#
#   scripts/benchmarks/puzzle_pool.sh [DURATION_S] [ROUNDS]
set -euo pipefail
DURATION="${1:-20}"
ROUNDS="${2:-3}"
source "$(dirname "$0")/puzzle_common.sh"
sed "s/^period_multiplier = .*/period_ms = ${PERIOD_MS:-8}/" "$OUT/w.toml" > "$OUT/w_pool.toml"
for r in $(seq 1 "$ROUNDS"); do
    for pool in off on; do
        echo "== round $r, tensor pool $pool =="
        "$STRETCH" serve --workload "$OUT/w_pool.toml" --runtime-config configs/runtime/hetero.toml \
            --plan "$OUT/plan.json" --duration-s "$DURATION" --tensor-pool "$pool" | tee "$OUT/pool_${pool}_$r.txt"
    done
done
python3 scripts/benchmarks/serve_ab.py "$OUT" "$ROUNDS" pool off on alloc kb mean p50
