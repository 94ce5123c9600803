#!/usr/bin/env bash
# A two-node Ray cluster on this machine's loopback address, and a sweep run
# on it against the same sweep run by the local pool:
#
#   1. installs Ray (ray[default], for its dashboard's Job Submission API)
#      into a virtual environment ($RAY_VENV, default
#      ~/.cache/stretch/ray-venv) and builds stretch (release) unless
#      STRETCH names a binary;
#   2. writes a sweep of JOBS_SEEDS seeds x 3 models (resnet-mini from the
#      zoo for 28x28, and its project and concat versions branched for the
#      host profile) on a Fashion-MNIST subset (LIMIT training images,
#      EPOCHS epochs, one thread per job);
#   3. runs it with the local pool (2 jobs at a time) and times it;
#   4. starts a head node and a worker node (1 CPU each) on 127.0.0.1 only,
#      checks that no process of the cluster listens on another address
#      (else stops the cluster and exits), and runs the same sweep with
#      --ray; once a job runs on the worker node, stops that node (its
#      raylet is killed), so its jobs fail and are submitted again;
#   5. checks that every job finished exactly once (one SUCCEEDED Ray
#      submission per job) and that every table row and trained model
#      equals the local run's, prints wall time local vs cluster, and stops
#      every process it started.
#
#   scripts/cluster/ray_local.sh [OUT_DIR]
#   scripts/cluster/ray_local.sh --check-listeners SS_OUTPUT PID...
#
# The second form is the listener check alone: it reads `ss -ltnpH` output
# from the file SS_OUTPUT and fails, printing them, on the listeners of the
# given processes that are not on a loopback address.
#
# Environment: EPOCHS (default 1), LIMIT (default 1000), SEEDS (default
# "0 1": 6 jobs), DATA (Fashion-MNIST IDX directory), STRETCH, RAY_VENV.
# It is a benchmark script run by hand, not part of CI.
set -euo pipefail

# Listeners of the processes $2... in the `ss -ltnpH` output file $1 that
# are not on a loopback address: printed, and a non-zero status if any.
nonloopback_listeners() {
  python3 - "$@" <<'PY'
import ipaddress, re, sys
pids = set(sys.argv[2:])
bad = []
for line in open(sys.argv[1]):
    fields = line.split()
    if len(fields) < 4 or fields[0] != "LISTEN":
        continue
    owners = set(re.findall(r"pid=(\d+)", line))
    if not owners & pids:
        continue
    host = fields[3].rsplit(":", 1)[0].strip("[]").split("%")[0]
    try:
        ip = ipaddress.ip_address(host)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
            ip = ip.ipv4_mapped
        loopback = ip.is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        bad.append(line.rstrip())
for line in bad:
    print(f"not on loopback: {line}")
sys.exit(1 if bad else 0)
PY
}

if [[ "${1:-}" == "--check-listeners" ]]; then
  shift
  nonloopback_listeners "$@"
  exit
fi

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/stretch/target}"
OUT="$(realpath -m "${1:-target/ray-local}")"
EPOCHS="${EPOCHS:-1}"
LIMIT="${LIMIT:-1000}"
SEEDS="${SEEDS:-0 1}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
RAY_VENV="${RAY_VENV:-$HOME/.cache/stretch/ray-venv}"
PORT=6390
DASH=8266
ADDRESS="http://127.0.0.1:$DASH"
WORKER_NM_PORT=62391
export RAY_USAGE_STATS_ENABLED=0
# Ray resolves 127.0.0.1 given as --node-ip-address to the machine's
# outward address unless it believes it runs without a cluster; then every
# process it starts (GCS, raylets, agents, workers, the dashboard's job
# agent) takes and binds 127.0.0.1.
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0

t() { date +%s.%N; }
# GET a dashboard endpoint (python3 only: no curl needed).
get() {
  python3 -c "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())" "$1"
}
# SIGKILL every process whose command line contains $1 (no procps needed).
kill_matching() {
  python3 - "$1" <<'PY'
import os, signal, sys
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    if sys.argv[1] in cmd and "raylet" in cmd:
        os.kill(int(pid), signal.SIGKILL)
PY
}
# `ray` with --node-ip-address taken as given: the worker node's `ray start`
# also passes the check that refuses a second node while
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0.
ray_loopback() {
  "$RAY_VENV/bin/python" - "$@" <<'PY'
import sys
import ray._private.ray_constants as ray_constants
import ray._private.services as services
ray_constants.ENABLE_RAY_CLUSTER = True
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
sys.exit(main())
PY
}
# Pids of the processes of this script's cluster: those that name its
# temporary directory, and their descendants.
ray_pids() {
  python3 - "$RAY_TMP" <<'PY'
import os, sys
parent, named = {}, set()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    parent[pid] = stat.rsplit(")", 1)[1].split()[1]
    if sys.argv[1] in cmd:
        named.add(pid)
pids = set(named)
grew = True
while grew:
    more = {p for p, pp in parent.items() if pp in pids} - pids
    pids |= more
    grew = bool(more)
print(" ".join(sorted(pids, key=int)))
PY
}
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(t)"; }

if [[ ! -d "$DATA" ]]; then
  echo "Fashion-MNIST is not installed: as root, apt-get install dataset-fashion-mnist (or run scripts/setup.sh)" >&2
  exit 1
fi
T0=$(t)
if [[ ! -x "$RAY_VENV/bin/ray" ]]; then
  echo "== installing Ray into $RAY_VENV"
  python3 -m venv "$RAY_VENV"
  "$RAY_VENV/bin/pip" install -q "ray[default]"
fi
RAY="$RAY_VENV/bin/ray"
echo "== $("$RAY" --version) (install/check $(since "$T0") s)"
if [[ -z "${STRETCH:-}" ]]; then
  T0=$(t)
  cargo build --release -q -p stretch-cli
  STRETCH="$CARGO_TARGET_DIR/release/stretch"
  echo "== built $STRETCH ($(since "$T0") s)"
fi
STRETCH="$(realpath "$STRETCH")"

# Ray's temporary directory, short: its sockets' paths must fit 107 bytes.
RAY_TMP=$(mktemp -d /tmp/ray-local.XXXXXX)
cleanup() {
  "$RAY" stop --force >/dev/null 2>&1 || true
  rm -rf "$RAY_TMP"
}
trap cleanup EXIT

rm -rf "$OUT"
mkdir -p "$OUT"
SEED_LIST=$(echo "$SEEDS" | tr ' ' ',')
cat >"$OUT/sweep.toml" <<EOF
# Written by scripts/cluster/ray_local.sh
dataset = "mnist:$DATA"
original = "zoo:resnet-mini"
seeds = [$SEED_LIST]

[zoo]
input_size = 28
classes = 10
seed = 0

[[stretch]]
device = "$ROOT/configs/devices/host.toml"
merges = ["project", "concat"]
options = { alpha = 1 }

[recipe]
epochs = $EPOCHS
limit = $LIMIT
threads = 1
EOF

echo "== local pool (2 jobs at a time)"
T0=$(t)
"$STRETCH" sweep "$OUT/sweep.toml" -o "$OUT/local" --jobs 2 --json "$OUT/local.json" >"$OUT/local.log" 2>&1
LOCAL_S=$(since "$T0")
echo "   $LOCAL_S s"

echo "== Ray: a head node and a worker node on 127.0.0.1, 1 CPU each"
"$RAY" stop --force >/dev/null 2>&1 || true
T0=$(t)
ray_loopback start --head --node-ip-address 127.0.0.1 --port "$PORT" --dashboard-host 127.0.0.1 \
  --dashboard-port "$DASH" --temp-dir "$RAY_TMP" --num-cpus 1 \
  --disable-usage-stats >"$OUT/ray-head.log" 2>&1
ray_loopback start --address "127.0.0.1:$PORT" --node-ip-address 127.0.0.1 --num-cpus 1 \
  --node-manager-port "$WORKER_NM_PORT" --dashboard-agent-listen-port 52391 \
  --disable-usage-stats >"$OUT/ray-worker.log" 2>&1
for _ in $(seq 60); do
  get "$ADDRESS/api/version" >/dev/null 2>&1 && break
  sleep 1
done
echo "   cluster up in $(since "$T0") s: $(get "$ADDRESS/api/version")"
sleep 2
PIDS=$(ray_pids)
if [[ -z "$PIDS" ]]; then
  echo "   no process of the cluster found (none names $RAY_TMP): cannot check its listeners" >&2
  exit 1
fi
ss -ltnpH >"$OUT/listeners.txt"
if ! nonloopback_listeners "$OUT/listeners.txt" $PIDS; then
  echo "   the cluster listens beyond 127.0.0.1 (above; all listeners in $OUT/listeners.txt): stopping it" >&2
  exit 1
fi
echo "   $(grep -cE "pid=($(echo $PIDS | tr ' ' '|'))," "$OUT/listeners.txt") listeners of $(wc -w <<<"$PIDS") cluster processes, all on loopback"
WORKER_ID=$(get "$ADDRESS/api/v0/nodes?limit=100" | python3 -c "
import json, sys
nodes = json.load(sys.stdin)['data']['result']['result']
print(next(n['node_id'] for n in nodes if not n['is_head_node']))")
echo "   worker node $WORKER_ID"

echo "== the sweep on the cluster (the worker node is stopped once a job runs there)"
T0=$(t)
"$STRETCH" sweep "$OUT/sweep.toml" -o "$OUT/cluster" --ray "$ADDRESS" --poll 0.5 --retries 2 \
  --json "$OUT/cluster.json" >"$OUT/cluster.log" 2>&1 &
SWEEP=$!
STOPPED=""
while kill -0 "$SWEEP" 2>/dev/null; do
  if [[ -z "$STOPPED" ]]; then
    ON_WORKER=$(get "$ADDRESS/api/jobs/" 2>/dev/null | python3 -c "
import json, sys
jobs = json.load(sys.stdin)
print(sum(1 for j in jobs if j.get('status') == 'RUNNING' and j.get('driver_node_id') == '$WORKER_ID'))" 2>/dev/null || echo 0)
    if [[ "$ON_WORKER" -gt 0 ]]; then
      kill_matching "node_manager_port=$WORKER_NM_PORT"
      STOPPED="$(since "$T0")"
      echo "   stopped the worker node at $STOPPED s, with $ON_WORKER job(s) running on it"
    fi
  fi
  sleep 0.5
done
set +e
wait "$SWEEP"
RC=$?
set -e
CLUSTER_S=$(since "$T0")
echo "   sweep exited $RC after $CLUSTER_S s"
tail -n 30 "$OUT/cluster.log"

echo "== checks"
get "$ADDRESS/api/jobs/" >"$OUT/ray-jobs.json"
CHECK=0
python3 - "$OUT" "$STOPPED" <<'PY' || CHECK=$?
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
stopped = sys.argv[2]
ok = True
jobs = json.load(open(out / "ray-jobs.json"))
state = json.load(open(out / "cluster" / "state.json"))["jobs"]
succeeded = {}
attempts = {}
for j in jobs:
    name = (j.get("metadata") or {}).get("stretch_job")
    if not name:
        continue
    attempts[name] = attempts.get(name, 0) + 1
    if j["status"] == "SUCCEEDED":
        succeeded[name] = succeeded.get(name, 0) + 1
for name, s in sorted(state.items()):
    once = succeeded.get(name, 0) == 1 and s["phase"] == "succeeded"
    ok &= once
    print(f"   {name:28s} {s['phase']:9s} submissions {attempts.get(name, 0)}  succeeded {succeeded.get(name, 0)}")
if not stopped:
    print("   the worker node was never seen running a job: it was not stopped")
    ok = False
retried = [n for n, a in attempts.items() if a > 1]
print(f"   jobs submitted again after the node stopped: {', '.join(sorted(retried)) or 'none'}")
local = json.load(open(out / "local.json"))
cluster = json.load(open(out / "cluster.json"))
keys = ["label", "params", "macs", "top1", "top5", "best_top1", "gap_top1", "file_bytes"]
for ls, cs in zip(local["seeds"], cluster["seeds"]):
    for lr, cr in zip(ls["rows"], cs["rows"]):
        same = all(lr[k] == cr[k] for k in keys)
        ok &= same
        if not same:
            print(f"   seed {ls['seed']} {lr['label']}: local {lr} vs cluster {cr}")
    ok &= len(ls["rows"]) == len(cs["rows"])
for f in sorted((out / "local").glob("seed*/*.onnx")):
    g = out / "cluster" / f.relative_to(out / "local")
    if f.name.endswith(".onnx") and not f.name.endswith((".branched.onnx", ".original.onnx")):
        same = g.exists() and f.read_bytes() == g.read_bytes()
        ok &= same
        if not same:
            print(f"   {f.relative_to(out)} differs on the cluster")
print("   every job finished exactly once, rows and models equal to the local run" if ok else "   CHECKS FAILED")
sys.exit(0 if ok else 1)
PY
echo
printf '%-40s %10s\n' "run" "wall s"
printf '%-40s %10s\n' "local pool, 2 jobs at a time" "$LOCAL_S"
printf '%-40s %10s\n' "Ray, 2 nodes x 1 CPU, one node stopped" "$CLUSTER_S"
exit "$CHECK"
