#!/usr/bin/env bash
# Scheduling overhead per subgraph dispatch of the scheduler-rt runtime
# (goal: < 20 us median). Baseline (all inline) measured in the same run.
# Usage: scripts/benchmarks/dispatch_overhead.sh [SUBGRAPHS] [RUNS] [MS_SUBGRAPHS] [MS_RUNS]
# (microsecond subgraphs: a ReLU over 16 values; millisecond ones: a 3x3
# convolution of 32 channels at 56x56)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo run --release -q -p scheduler-rt --example dispatch_overhead -- "${1:-64}" "${2:-500}" "${3:-8}" "${4:-60}"
