#!/usr/bin/env python3
"""Summarises logs of scripts/benchmarks/puzzle_host.sh: per log and plan,
the served median makespan against the analyzer's and the re-timed
simulation's figure (their median where the log has it, else their mean), the
served mean against the analyzer's mean, and per build each piece's served median engine time
over its re-timed one (pieces of at least 0.1 ms re-timed); where the log has
each piece's fastest and slowest median of 100 runs in a row, the runs in
which a piece of at least 0.1 ms ran a window 1.5x slower than another
(a phase at another speed).

    puzzle_summary.py A1.log A2.log ... [-- B1.log B2.log ...]   (.log.gz too)
"""
import gzip
import re
import statistics
import sys

# "predicted by analyze 2.29 ms; ..." (mean only) or "predicted by analyze mean 2.29 ms, p50 2.27 ms; ..."
ANALYZE = re.compile(
    r"predicted by analyze (?:mean )?([\d.]+) ms(?:, p50 ([\d.]+) ms)?; "
    r"measured mean [\d.]+ ms \(([-+\d.]+)%\), p50 ([\d.]+) ms \(([-+\d.]+)%\)"
)
RETIMED = re.compile(
    r"re-timed before each round (?:mean )?([\d.]+) ms(?:, p50 [\d.]+ ms)? at the served period; "
    r"measured mean ([-+\d.]+)%, p50 ([-+\d.]+)%"
)
PIECES = re.compile(r"^\s+(\S+)\s+pieces, median ms served \(simulated with the pieces re-timed now\): (.*)$")
WINDOWS = re.compile(r"^\s+(\S+)\s+pieces, fastest-slowest median of 100 runs in a row: (.*)$")
PLAN = re.compile(r"^plan (\S+) \(static\)")


def parse(path):
    """{plan name: {analyze, p50, vs_analyze, retimed, vs_retimed, pieces}}"""
    plans, cur = {}, None
    opener = gzip.open if path.endswith(".gz") else open
    try:
        lines = opener(path, "rt", encoding="utf-8").readlines()
    except OSError as e:
        sys.exit(f"puzzle_summary.py: cannot read {path}: {e}")
    for line in lines:
        m = PLAN.match(line)
        if m:
            cur = plans.setdefault(m.group(1).rsplit("/", 1)[-1], {"pieces": [], "phases": []})
            continue
        if line.startswith("Band lst"):
            cur = None
        if cur is None:
            continue
        if m := ANALYZE.search(line):
            cur.update(
                analyze=float(m.group(1)),
                mean_vs_analyze=float(m.group(3)),
                p50=float(m.group(4)),
                vs_analyze=float(m.group(5)),
            )
        elif m := RETIMED.search(line):
            cur.update(retimed=float(m.group(1)), vs_retimed=float(m.group(3)))
        elif m := WINDOWS.match(line):
            for i, (lo, ratio) in enumerate(re.findall(r"([\d.]+)-[\d.]+ \(x([\d.]+)\)", m.group(2))):
                if float(lo) >= 0.1 and float(ratio) >= 1.5:
                    cur["phases"].append(f"{m.group(1)}[{i}] x{ratio}")
        elif m := PIECES.match(line):
            for served, retimed in re.findall(r"([\d.]+) \(([\d.]+)\)", m.group(2)):
                cur["pieces"].append((m.group(1), float(served), float(retimed)))
    return plans


def summarise(label, logs):
    print(f"== {label}: {len(logs)} run(s)")
    within = {}
    ratios = {}
    for path in logs:
        for name, p in sorted(parse(path).items()):
            if "p50" not in p:
                print(f"{path}: {name}: no makespan lines (run failed?)")
                continue
            print(
                f"{path}: {name:24} analyze {p['analyze']:6.2f}  re-timed {p.get('retimed', float('nan')):6.2f}  "
                f"p50 {p['p50']:6.2f}  vs analyze {p['vs_analyze']:+6.1f}%  vs re-timed {p.get('vs_retimed', float('nan')):+6.1f}%"
                + (f"  phases: {', '.join(p['phases'])}" if p["phases"] else "")
            )
            w = within.setdefault(name, [0, 0, 0, 0])
            w[0] += 1
            w[1] += abs(p["vs_analyze"]) <= 10
            w[2] += abs(p.get("vs_retimed", 1e9)) <= 10
            w[3] += abs(p["mean_vs_analyze"]) <= 10
            ratios.setdefault(name, []).extend(s / r for _, s, r in p["pieces"] if r >= 0.1)
    for name, (n, a, r, mean) in within.items():
        rs = ratios.get(name, [])
        spread = (
            f"pieces served / re-timed: median {statistics.median(rs):.3f}, range {min(rs):.2f}-{max(rs):.2f} over {len(rs)}"
            if rs
            else "no pieces of 0.1 ms or more"
        )
        print(f"  {name}: p50 within 10% of analyze {a}/{n}, of re-timed {r}/{n}; mean within 10% of analyze {mean}/{n}; {spread}")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    if "--" in argv:
        k = argv.index("--")
        summarise("A", argv[:k])
        summarise("B", argv[k + 1 :])
    else:
        summarise("logs", argv)


if __name__ == "__main__":
    main(sys.argv[1:])
