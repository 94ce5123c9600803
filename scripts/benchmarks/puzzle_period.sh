#!/usr/bin/env bash
# How the measured makespan of Puzzle's plan depends on the load: the
# model group of puzzle_host.sh served with the GA's plan and Band's lst
# at fixed group periods (PERIODS, ms), DURATION_S seconds each, beside
# the analyzer's one prediction (made at its own period) and the
# simulator's prediction at the served period with the plan's pieces
# re-timed before each round (`serve --retime`: the simulator's own error,
# apart from the machine's change of speed since the analysis), with the
# CPU time the hypervisor stole during each. Needs the plan from
# puzzle_host.sh (runs it when missing). Never while something else builds.
#
#   PERIODS="5 8 15 30" ROUNDS=2 scripts/benchmarks/puzzle_period.sh [DURATION_S]
set -euo pipefail
DURATION="${1:-20}"
source "$(dirname "$0")/puzzle_common.sh"
for p in ${PERIODS:-5 8 15 30}; do
    sed "s/^period_multiplier = .*/period_ms = $p/" "$OUT/w.toml" > "$OUT/w_period.toml"
    echo "== period $p ms =="
    "$STRETCH" serve --workload "$OUT/w_period.toml" --runtime-config configs/runtime/hetero.toml \
        --plan "$OUT/plan.json" --duration-s "$DURATION" --rounds "${ROUNDS:-2}" --retime \
        | grep -E "makespan|predicted|re-timed before|stolen|^plan|^Band"
done
