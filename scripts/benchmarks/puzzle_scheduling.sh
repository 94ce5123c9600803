#!/usr/bin/env bash
# Who hands work to the processors in `stretch serve`: the model group of
# puzzle_host.sh (three zoo models, one camera group) on
# configs/runtime/hetero.toml, served with the GA's plan, the best
# model-level mapping and Band's lst, with `--scheduling thread` (one
# scheduling thread hands work over and waits for results) and `self`
# (the workers schedule themselves and idle ones poll) interleaved
# (ROUNDS pairs, DURATION_S seconds each), the group's period fixed at
# PERIOD_MS (default 5 ms). Prints each group's mean and p50 makespan and
# the driver's overhead per subgraph per run, then the self/thread ratios
# (min and median over the pairs). Needs the plans from puzzle_host.sh
# (run it first, or this script runs it). Never while something else builds.
#
#   scripts/benchmarks/puzzle_scheduling.sh [DURATION_S] [ROUNDS]
set -euo pipefail
DURATION="${1:-10}"
ROUNDS="${2:-3}"
source "$(dirname "$0")/puzzle_common.sh"
sed "s/^period_multiplier = .*/period_ms = ${PERIOD_MS:-5}/" "$OUT/w.toml" > "$OUT/w_sched.toml"
for r in $(seq 1 "$ROUNDS"); do
    for mode in thread self; do
        echo "== round $r, scheduling $mode =="
        "$STRETCH" serve --workload "$OUT/w_sched.toml" --runtime-config configs/runtime/hetero.toml \
            --plan "$OUT/plan.json" --plan "$OUT/plan.best-mapping.json" --duration-s "$DURATION" \
            --scheduling "$mode" | tee "$OUT/sched_${mode}_$r.txt"
    done
done
python3 scripts/benchmarks/serve_ab.py "$OUT" "$ROUNDS" sched thread self mean p50 overhead
