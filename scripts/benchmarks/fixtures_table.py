#!/usr/bin/env python3
"""The acceptance table rows of docs/runtime.md from runtime_fixtures.sh logs.

    python3 scripts/benchmarks/fixtures_table.py RUN1.log [RUN2.log ...]

One Markdown row per model and log (the run is the log's position):
original on 1 core and branched on cpu0+cpu1 (tract, p50), their ratio at
p50 (at the minimum in brackets), tract over its ideal as beside x spread x
runtime, onnxruntime's 2-thread original and the branched model on the ort
engine (p50), the reference over it (p50, minimum), ort over its ideal,
the MACs ratio and the CPU time stolen.
"""
import re
import sys


def row(run, block):
    model = block.split("\n")[0].strip()

    def conf(name):
        m = re.search(r"^" + re.escape(name) + r"\s+([\d.]+)\s+([\d.]+)", block, re.M)
        if not m:
            sys.exit(f"{model}: no '{name}' configuration")
        return float(m.group(1)), float(m.group(2))

    o1, b = conf("original, 1 core"), conf("branched, 2 processors")
    ref, bo = conf("original, onnxruntime 2 threads"), conf("branched, 2 processors, ort")
    over = {
        k: float(v)
        for k, v in re.findall(
            r"^ideal     (branched, 2 processors(?:, ort)?): p50 [\d.]+ ms, ideal [\d.]+ ms \(([\d.]+)x", block, re.M
        )
    }
    parts = {
        k: (a, s, r)
        for k, a, s, r in re.findall(
            r"^in-run    (branched, 2 processors(?:, ort)?):.*?beside each other ([\d.]+)x, "
            r"their spread ([\d.]+)x, the runtime between them ([\d.]+)x",
            block,
            re.M,
        )
    }
    macs = re.search(r"^work .*?([\d.]+)x the original", block, re.M)
    steal = re.search(r"^steal .*?: (.*?) of", block, re.M)
    t, o = parts["branched, 2 processors"], parts["branched, 2 processors, ort"]
    return (
        f"| {run} | {model} | {o1[1]:.1f} ms | {b[1]:.1f} ms | {o1[1] / b[1]:.2f}x ({o1[0] / b[0]:.2f}x) | "
        f"{over['branched, 2 processors']:.2f}x = {t[0]} × {t[1]} × {t[2]} | {ref[1]:.1f} ms | {bo[1]:.1f} ms | "
        f"{ref[1] / bo[1]:.2f}x ({ref[0] / bo[0]:.2f}x) | {over['branched, 2 processors, ort']:.2f}x = "
        f"{o[0]} × {o[1]} × {o[2]} | {macs.group(1) if macs else '?'}x | {steal.group(1) if steal else '?'} |"
    )


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for run, path in enumerate(sys.argv[1:], 1):
        blocks = [b for b in re.split(r"^== ", open(path).read(), flags=re.M) if "original, 1 core" in b]
        if not blocks:
            sys.exit(f"{path}: no model's bench in it (not a runtime_fixtures.sh log?)")
        for block in blocks:
            print(row(run, block))


if __name__ == "__main__":
    main()
