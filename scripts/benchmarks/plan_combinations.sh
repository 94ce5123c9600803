#!/usr/bin/env bash
# Predicted speedup of every processor combination on the snapdragon855
# profile (docs/branching.md table): `stretch plan --all-combinations` on
# resnet34, resnet50, regnet_x_1_6gf and efficientnet_b0 at the default
# capacity band, one line per model with C/G/D = CPU/GPU/DSP and the work
# (MACs vs original) of the full C+G+D plan. Every figure is predicted.
#
# usage: scripts/benchmarks/plan_combinations.sh [extra plan options, e.g. --capacity 0.8,1.2]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
stretch="$CARGO_TARGET_DIR/release/stretch"
echo "| model | C | G | D | C+G | C+D | G+D | C+G+D | work C+G+D |"
echo "|---|---|---|---|---|---|---|---|---|"
for m in resnet34 resnet50 regnet_x_1_6gf efficientnet_b0; do
    "$stretch" plan "fixtures/models/$m.onnx" --device configs/devices/snapdragon855.toml --all-combinations "$@" |
        awk -v m="$m" '
            $1 ~ /^(cpu|gpu|dsp)(\+(cpu|gpu|dsp))*$/ { s[$1] = $3; w[$1] = $4 }
            END {
                printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, s["cpu"], s["gpu"], s["dsp"],
                    s["cpu+gpu"], s["cpu+dsp"], s["dsp+gpu"], s["cpu+dsp+gpu"], w["cpu+dsp+gpu"]
            }'
done
