#!/usr/bin/env bash
# Issue 16's lever "branch widths the engine's kernels like": the fixtures
# planned on the host profile with branch channel counts in multiples of 8
# (the default), 16 and 32 (`stretch stretch --width-multiple M`), each
# benched against the same original by plan_variants.sh (invocations
# interleaved; see there for the columns). Never while something builds.
#
#   MULTIPLES="8 16 32" ROUNDS=2 RUNS=30 scripts/benchmarks/width_multiple.sh [MODEL...]
#   (default models: resnet18 mobilenet_v2)
set -euo pipefail
variants=""
for k in ${MULTIPLES:-8 16 32}; do variants+="w$k=--width-multiple=$k "; done
VARIANTS="$variants" exec "$(dirname "$0")/plan_variants.sh" "$@"
