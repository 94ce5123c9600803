#!/usr/bin/env bash
# Splash on this machine: `stretch serve --thermal` with the emulated heat
# of configs/runtime/splash_host.toml (illustrative figures), Person Finder
# (configs/workloads/person_finder_host.toml) at FPS camera frames per
# second (default 12; the file's 8 left every run below throttling on a
# faster CPU) for DURATION seconds,
# a real cloud worker process (`stretch worker`, onnxruntime, 1 thread) on
# 127.0.0.1:7070 behind the link shaper (249 Mbit/s, 4 ms round trip):
#   1. Band's heft without the cloud (the config less its cloud processor);
#   2. heft, min-heat and max-weighted-ppt with the cloud;
#   3. min-heat with the cloud worker killed halfway through the run and
#      started again 5 s later (the runtime probes it and brings it back).
# Measured on this machine (the thermal figures emulated). The worker
# process shares this VM's two cores with the local processors, so the
# "cloud" adds no compute here: it shows the protocol, the shaper and the
# failure handling, not a server GPU. Run on an idle machine:
#   DURATION=60 FPS=12 scripts/benchmarks/splash_serve.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
cargo build --release --quiet -p stretch-cli
S="$CARGO_TARGET_DIR/release/stretch"
OUT="${1:-splash-serve-run}"
D="${DURATION:-60}"
FPS="${FPS:-12}"
mkdir -p "$OUT"
RC=configs/runtime/splash_host.toml
W="$OUT/person_finder_host.toml"
python3 - configs/workloads/person_finder_host.toml "$W" "$FPS" <<'PY'
import os, re, sys
src, dst, fps = sys.argv[1], sys.argv[2], sys.argv[3]
here = os.path.dirname(os.path.abspath(src))
text = open(src).read()
text = re.sub(r'model = "([^"]+)"', lambda m: 'model = "%s"' % os.path.normpath(os.path.join(here, m.group(1))), text)
text = re.sub(r'(?m)^fps = .*$', "fps = " + fps, text, count=1)
open(dst, "w").write(text)
PY
python3 - "$RC" "$OUT/nocloud.toml" <<'PY'
import sys
text = open(sys.argv[1]).read()
start = text.index('[[processor]]\nname = "cloud"')
end = text.index('[thermal]')
open(sys.argv[2], 'w').write(text[:start] + text[end:])
PY
"$S" worker --listen 127.0.0.1:7070 --engine ort > "$OUT/worker.log" 2>&1 &
WORKER=$!
trap 'kill $WORKER 2>/dev/null || true; [ -f "$OUT/worker2.pid" ] && kill "$(cat "$OUT/worker2.pid")" 2>/dev/null || true' EXIT
sleep 1
echo "== heft without the cloud, ${D} s =="
"$S" serve --thermal --workload "$W" --runtime-config "$OUT/nocloud.toml" --duration-s "$D" \
    --compare heft --isolated-runs 10 | tee "$OUT/heft_nocloud.txt"
echo "== heft, min-heat, max-weighted-ppt with the cloud, ${D} s each =="
"$S" serve --thermal --workload "$W" --runtime-config "$RC" --duration-s "$D" \
    --compare heft,min-heat,max-weighted-ppt --isolated-runs 10 | tee "$OUT/cloud.txt"
echo "== min-heat with the cloud worker killed halfway, restarted 5 s later =="
HALF=$(python3 -c "print($D / 2 + 20)")
rm -f "$OUT/worker2.pid"
(
    sleep "$HALF"
    kill -9 $WORKER
    sleep 5
    "$S" worker --listen 127.0.0.1:7070 --engine ort >> "$OUT/worker.log" 2>&1 &
    echo $! > "$OUT/worker2.pid"
) &
"$S" serve --thermal --workload "$W" --runtime-config "$RC" --duration-s "$D" \
    --policy min-heat --isolated-runs 10 | tee "$OUT/killed.txt"
