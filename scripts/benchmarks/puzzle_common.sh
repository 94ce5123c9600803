# Sourced by the benchmarks that serve puzzle_host.sh's plans again
# (puzzle_scheduling.sh, puzzle_pool.sh, puzzle_period.sh): sets $OUT (the
# plans' folder, default target/puzzle-host), runs puzzle_host.sh there
# when it holds no plan yet, builds stretch (release) and sets $STRETCH.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
OUT="${OUT:-target/puzzle-host}"
if [ ! -f "$OUT/plan.json" ]; then
    OUT="$OUT" scripts/benchmarks/puzzle_host.sh 10 1
fi
cargo build --release -q -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"
