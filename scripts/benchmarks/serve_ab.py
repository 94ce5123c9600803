"""Compares two settings A and B of `stretch serve --plan` run in
interleaved pairs: reads OUT/PREFIX_{A,B}_{1..ROUNDS}.txt (serve's stdout),
and for each served block (every `plan NAME (static)` and `Band lst
(online)`) prints each metric's value per run and the B/A ratios (min and
median over the pairs).

    serve_ab.py OUT ROUNDS PREFIX A B METRIC...

METRIC: alloc, kb, mean, p50 or overhead (see LEGEND).
"""
import re
import statistics
import sys

PATTERNS = {
    "alloc": r"([\d.]+) buffer allocations",
    "kb": r"and ([\d.]+) KB copied",
    "mean": r"makespan mean\s+([\d.]+)",
    "p50": r"makespan mean\s+[\d.]+\s+p50\s+([\d.]+)",
    "overhead": r"driver overhead ([\d.]+) ms per subgraph",
}
LEGEND = {
    "alloc": "engine-boundary buffer allocations per request",
    "kb": "KB copied per request",
    "mean": "the group's mean makespan in ms",
    "p50": "the group's median makespan in ms",
    "overhead": "the driver's ms around each subgraph",
}
HEADER = re.compile(r"^(?:plan (\S+) \(static\)|(Band lst) \(online\))", re.M)


def blocks(path):
    """Served block name -> its text, in the order serve printed them."""
    text = open(path).read()
    heads = list(HEADER.finditer(text))
    out = {}
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[h.group(1) or "lst"] = text[h.start():end]
    return out


def value(block, metric):
    m = re.search(PATTERNS[metric], block)
    return float(m.group(1)) if m else float("nan")


def main():
    out, rounds, prefix, a, b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    metrics = sys.argv[6:]
    unknown = [m for m in metrics if m not in PATTERNS]
    if not metrics or unknown:
        sys.exit(f"serve_ab.py: metrics must be among {', '.join(PATTERNS)}; got {' '.join(metrics) or 'none'}")
    runs = {s: [blocks(f"{out}/{prefix}_{s}_{r}.txt") for r in range(1, rounds + 1)] for s in (a, b)}
    for who in runs[a][0]:
        print(f"{who}:")
        for k in metrics:
            va = [value(r[who], k) for r in runs[a]]
            vb = [value(r[who], k) for r in runs[b]]
            ratios = [y / x for x, y in zip(va, vb) if x > 0]
            ratio = f"{b}/{a} min {min(ratios):.3f}, median {statistics.median(ratios):.3f}" if ratios else "-"
            print(f"  {k:>8}: {a} {' '.join(f'{v:.3f}' for v in va)} | {b} {' '.join(f'{v:.3f}' for v in vb)} | {ratio}")
    print("(" + "; ".join(f"{k} = {LEGEND[k]}" for k in metrics) + "; measured)")


main()
