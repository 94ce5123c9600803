#!/usr/bin/env bash
# Two builds of stretch on Puzzle's host benchmark, alternated: runs
# scripts/benchmarks/puzzle_host.sh with binary A, then B, PAIRS times
# (each run analyses afresh and serves its own plans), then prints, per
# build, how far each served median makespan is from the analyzer's and
# the re-timed simulation's figure, and each piece's served median over its
# re-timed one (scripts/benchmarks/puzzle_summary.py). Never run while
# something else builds.
#
#   scripts/benchmarks/puzzle_ab.sh A_BIN B_BIN [PAIRS] [DURATION_S] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ $# -lt 2 ]; then
  echo "usage: scripts/benchmarks/puzzle_ab.sh A_BIN B_BIN [PAIRS] [DURATION_S] [ROUNDS]" >&2
  exit 2
fi
A="$1"; B="$2"; PAIRS="${3:-3}"; DURATION="${4:-6}"; ROUNDS="${5:-2}"
for bin in "$A" "$B"; do
  if [ ! -x "$bin" ]; then
    echo "puzzle_ab.sh: '$bin' is not an executable stretch binary" >&2
    exit 2
  fi
done
OUT="${OUT:-target/puzzle-ab}"
mkdir -p "$OUT"
for i in $(seq 1 "$PAIRS"); do
  for side in A B; do
    bin="$A"; [ "$side" = B ] && bin="$B"
    echo "pair $i, build $side ($bin)" >&2
    if ! OUT="$OUT/$side$i" STRETCH="$bin" scripts/benchmarks/puzzle_host.sh "$DURATION" "$ROUNDS" > "$OUT/$side$i.log" 2>&1; then
      echo "puzzle_ab.sh: pair $i, build $side failed; the end of $OUT/$side$i.log:" >&2
      tail -n 20 "$OUT/$side$i.log" >&2
      exit 1
    fi
  done
done
python3 scripts/benchmarks/puzzle_summary.py "$OUT"/A*.log -- "$OUT"/B*.log
