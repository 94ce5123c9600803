"""Writes configs/devices/host-SLUG.toml from a scripts/profile_host.sh run
and names it in configs/devices/host.toml's `per_cpu` table.

Reads DIR/cpuN/fit.txt (`stretch fit`'s `[processors.cpuN]` blocks),
DIR/cpu0/run.json (when and on what the kernels were measured) and
LINKS/link-0-1.txt, LINKS/link-1-0.txt (`stretch profile --link`'s piecewise
fit; LINKS is DIR unless --links-dir says otherwise). Every figure written
cites the file it came from.

With --engine ort it writes the onnxruntime profile instead
(configs/devices/host-SLUG-ort.toml, from core 0's kernels only: cpu1
takes cpu0's figures), named after its file and left out of `per_cpu`:
plans for `engine=ort` processors name it with --device.
"""

import argparse
import json
import os
import re
import sys

HOST = "configs/devices/host.toml"


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}; run the steps of scripts/profile_host.sh that write it")


def block(fit_txt, path, proc):
    """The `[processors.cpuN]` lines of `stretch fit`'s output, minus regressors."""
    start = fit_txt.find(f"[processors.{proc}]")
    if start < 0:
        fail(f"{path}: no [processors.{proc}] block (is it `stretch fit` output?)")
    lines = fit_txt[start:].strip().splitlines()
    return [ln for ln in lines if not ln.startswith("regressors")]


def link(path):
    m = re.search(r"up to it ([0-9.]+) us \+ bytes / ([0-9.]+) GB/s", read(path))
    if not m:
        fail(f"{path}: no piecewise fit line (is it `stretch profile --link` output?)")
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="the CPU model as /proc/cpuinfo names it")
    ap.add_argument("--dir", required=True, help="data/profiles/host-SLUG")
    ap.add_argument("--out", required=True, help="configs/devices/host-SLUG.toml")
    ap.add_argument("--engine", choices=["tract", "ort"], default="tract", help="the engine DIR's kernels ran on")
    ap.add_argument("--links-dir", help="where link-0-1.txt and link-1-0.txt are (default: DIR)")
    a = ap.parse_args()
    links = a.links_dir or a.dir
    rel = os.path.relpath(a.dir, os.path.dirname(a.out))
    run_path = os.path.join(a.dir, "cpu0", "run.json")
    try:
        run = json.loads(read(run_path))
        day = run["finished"][:10]
        measured = run["host"]["cpu_model"]
    except (ValueError, KeyError) as e:
        fail(f"{run_path}: not a finished `stretch profile` run ({e})")
    if measured != a.model:
        fail(f"{run_path}: measured on `{measured}`, but this CPU is `{a.model}`")
    (l01, b01), (l10, b10) = link(os.path.join(links, "link-0-1.txt")), link(os.path.join(links, "link-1-0.txt"))
    if a.engine == "ort":
        name = os.path.splitext(os.path.basename(a.out))[0]
        out = [
            f"# This machine's CPU ({a.model}, 2 logical CPUs) as two processors, one",
            "# per core, each running onnxruntime (the runtime's `engine=ort`) on one",
            "# pinned thread: for plans whose processors run onnxruntime. Written by",
            f"# scripts/profile_host.sh (step 6) on {day} from core 0's isolated kernels",
            "# (each its own session); cpu1 uses cpu0's figures and forests (the same",
            "# silicon). The links are the hand-offs between the cores measured for",
            "# the tract profile (the same threads and buffers whatever the engine).",
            "",
            f'name = "{name}"',
            'description = "this machine: two cores running onnxruntime on one thread each (measured)"',
            f'measured_on = {{ cpu = "{a.model}", date = "{day}", source = "{a.dir}/cpu0/run.json (host.cpu_model, finished)" }}',
        ]
        fit_path = os.path.join(a.dir, "cpu0", "fit.txt")
        cpu0 = block(read(fit_path), fit_path, "cpu0")
        for proc in ["cpu0", "cpu1"]:
            out.append("")
            out.append(f"[processors.{proc}]")
            out.extend(cpu0[1:])
            out.append(f'regressors = "{rel}/cpu0/regressors.json"')
    else:
        out = [
            f"# This machine's CPU ({a.model}, 2 logical CPUs) as two processors, one",
            "# per core, each running tract 0.23 on one pinned thread. Written by",
            f"# scripts/profile_host.sh on {day}; configs/devices/host.toml reads this file",
            "# on this CPU (its per_cpu table). cpu1 uses cpu0's forests (and calibration, if named):",
            "# the cores are the same silicon, and rows timed minutes apart on a drifting",
            "# VM differ by the drift.",
            "",
            'name = "host"',
            'description = "this machine: two cores running tract on one thread each (measured)"',
            f'measured_on = {{ cpu = "{a.model}", date = "{day}", source = "{a.dir}/cpu*/run.json (host.cpu_model, finished)" }}',
        ]
        for proc in ["cpu0", "cpu1"]:
            fit_path = os.path.join(a.dir, proc, "fit.txt")
            out.append("")
            out.extend(block(read(fit_path), fit_path, proc))
            out.append(f'regressors = "{rel}/cpu0/regressors.json"')
            if os.path.exists(os.path.join(a.dir, "cpu0", "calibration.json")):
                out.append(f'calibration = "{rel}/cpu0/calibration.json"')
    src = f"{links}/link-0-1.csv and link-1-0.csv (stretch profile --link; piecewise fit up to 1 MiB"
    out += [
        "",
        "[[links]]",
        'between = ["cpu0", "cpu1"]',
        f'latency_us = {{ value = {(l01 + l10) / 2:.2f}, source = "measured: {src}: {l01:.2f} us and {l10:.2f} us)" }}',
        f'bandwidth_gbs = {{ value = {(b01 + b10) / 2:.2f}, source = "measured: {src}: {b01:.2f} and {b10:.2f} GB/s)" }}',
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {a.out}")
    if a.engine == "ort":
        return

    host = read(HOST)
    name = os.path.basename(a.out)
    entry = f'"{a.model}" = "{name}"'
    m = re.search(r"^per_cpu = \{(.*)\}$", host, re.M)
    if m:
        if entry in m.group(1):
            return
        items = [s.strip() for s in m.group(1).split(",") if s.strip() and not s.strip().startswith(f'"{a.model}"')]
        host = host[: m.start()] + "per_cpu = { " + ", ".join(items + [entry]) + " }" + host[m.end() :]
    else:
        m = re.search(r"^measured_on = .*$", host, re.M) or fail(f"{HOST}: no measured_on line to add per_cpu after")
        host = host[: m.end()] + "\nper_cpu = { " + entry + " }" + host[m.end() :]
    with open(HOST, "w") as f:
        f.write(host)
    print(f"{HOST}: per_cpu names {name} for `{a.model}`")


if __name__ == "__main__":
    main()
