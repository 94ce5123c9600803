#!/usr/bin/env bash
# Measures this machine's CPU as the `host` device and makes
# configs/devices/host.toml use it whenever a process runs on this CPU.
#
# The VMs here change CPU from day to day, and a profile measured on one CPU
# mispredicts another, so host.toml keeps one file per CPU model measured:
# `per_cpu = { "MODEL" = "host-SLUG.toml" }` (MODEL as /proc/cpuinfo names
# it). This script writes data/profiles/host-SLUG/ and
# configs/devices/host-SLUG.toml for the CPU it runs on and adds the entry:
#
#   1. stretch profile --engine tract --threads 1 --cores N   (kernels.csv; cores 0 and 1)
#   2. stretch fit --statistic $STAT (forests and the analytic figures of
#      each core, fitted to the 10th percentile of each kernel's runs by
#      default: noise from the rest of the machine only adds time, so it
#      repeats between runs minutes apart where the median drifts; STAT=median
#      fits the median)
#   3. stretch profile --link 0,1 and 1,0 (the hand-off between the cores;
#      the piecewise fit up to 1 MiB, where meeting-point tensors fall)
#   4. scripts/benchmarks/predictor_in_model.sh on core 0 (kernels timed
#      inside 240 generated models; forests refitted on them)
#   5. scripts/benchmarks/predictor_host.sh on cores 0 and 1 (the 52
#      held-out models judged, uncalibrated and with an in-model
#      calibration fitted on 80 other models; with CALIBRATE=1 core 0's
#      calibration is installed and named by the profile; on the EPYC of
#      2026-11-26 it did not help, so the default leaves it out)
#   6. stretch profile --engine ort on core 0 and its fit, written as
#      configs/devices/host-SLUG-ort.toml (data/profiles/host-SLUG-ort/):
#      onnxruntime's costs, for plans whose processors run `engine=ort`
#      (not named in host.toml: pass it with --device)
# Both processors use core 0's forests and calibration: the cores are the
# same silicon, and rows timed minutes apart on a drifting VM differ by the
# drift (see host.toml). About 35 min on this 2-vCPU VM; run it on an idle
# machine (nothing building). Where this CPU's profile exists it is
# measured again (its files replaced).
#
#   scripts/profile_host.sh            # all six steps
#   STEPS="1 2 3" scripts/profile_host.sh   # kernels, figures, links only
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
PY=.venv/bin/python
[[ -x "$PY" ]] || { echo "error: .venv missing; run scripts/setup.sh --deps first" >&2; exit 1; }
MODEL=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -1)
[[ -n "$MODEL" ]] || { echo "error: /proc/cpuinfo names no CPU model" >&2; exit 1; }
SLUG=$(echo "$MODEL" | tr 'A-Z' 'a-z' | sed 's/([^)]*)//g; s/[^a-z0-9.]\+/-/g; s/^-//; s/-$//')
DIR="data/profiles/host-$SLUG"
TOML="configs/devices/host-$SLUG.toml"
STEPS="${STEPS:-1 2 3 4 5 6}"
step() { [[ " $STEPS " == *" $1 "* ]]; }
echo "== this CPU: $MODEL -> $TOML, $DIR"
cargo build --release -q -p stretch-cli
STRETCH="$CARGO_TARGET_DIR/release/stretch"
mkdir -p "$DIR"
export STAT="${STAT:-p10}"

if step 1; then
  for core in 0 1; do
    echo "== 1: kernels on core $core"
    "$STRETCH" profile --engine tract --threads 1 --cores "$core" --out "$DIR/cpu$core" | tail -3
  done
fi
if step 2; then
  for core in 0 1; do
    echo "== 2: fit cpu$core"
    "$STRETCH" fit "$DIR/cpu$core" --processor "cpu$core" --statistic "$STAT" > "$DIR/cpu$core/fit.txt"
    sed -n 1,12p "$DIR/cpu$core/fit.txt"
  done
fi
if step 3; then
  for pair in 0,1 1,0; do
    echo "== 3: link $pair"
    "$STRETCH" profile --link "$pair" --out "$DIR/link-${pair/,/-}" | tee "$DIR/link-${pair/,/-}.txt" | tail -2
    mv "$DIR/link-${pair/,/-}/link.csv" "$DIR/link-${pair/,/-}.csv" && rmdir "$DIR/link-${pair/,/-}"
  done
fi
if step 1 || step 2 || step 3; then
  "$PY" scripts/host_profile_toml.py --model "$MODEL" --dir "$DIR" --out "$TOML"
fi
if step 4; then
  echo "== 4: kernels inside whole models on core 0"
  PROFILE="$DIR" CORES="0" scripts/benchmarks/predictor_in_model.sh
fi
if step 5; then
  echo "== 5: held-out models on cores 0 and 1, calibration from core 0"
  PROFILE="$DIR" INSTALL="${CALIBRATE:-0}" CORES="0 1" OUT="target/predictor-host/host-$SLUG-$(date +%Y%m%d-%H%M%S)" \
    scripts/benchmarks/predictor_host.sh
  "$PY" scripts/host_profile_toml.py --model "$MODEL" --dir "$DIR" --out "$TOML"
fi
if step 6; then
  echo "== 6: onnxruntime kernels on core 0"
  "$STRETCH" profile --engine ort --threads 1 --cores 0 --out "$DIR-ort/cpu0" | tail -3
  "$STRETCH" fit "$DIR-ort/cpu0" --processor cpu0 --statistic "$STAT" > "$DIR-ort/cpu0/fit.txt"
  sed -n 1,12p "$DIR-ort/cpu0/fit.txt"
  "$PY" scripts/host_profile_toml.py --engine ort --model "$MODEL" --dir "$DIR-ort" --links-dir "$DIR" \
    --out "configs/devices/host-$SLUG-ort.toml"
fi
echo "== $TOML is read for configs/devices/host.toml on this CPU ($MODEL)"
