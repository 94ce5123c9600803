#!/usr/bin/env python3
"""Prints the table of scripts/benchmarks/precision_accuracy.sh.

Usage: precision_table.py OUT_DIR SEED...

Reads OUT_DIR/MODEL-seedS.json (stretch.compare-accuracy/1 with
--precision profile) for resnet-mini and mbnet-mini and every seed: per
model and row kind (fp32 original, fp32 branched, post-training quantized,
quantization-aware fine-tuned) the validation top-1 per seed and its mean,
the mean gap to the fp32 branched model, and the file size.
"""
import json
import os
import sys

KINDS = [("original", "fp32 original"), ("fp32", "fp32 branched"), ("ptq", "branched, PTQ"), ("qat", "branched, QAT")]


def kind(row):
    if row["label"] == "original":
        return "original"
    return row.get("precision", "fp32") if not row["distilled"] else None


def main():
    out, seeds = sys.argv[1], sys.argv[2:]
    print(f"{'model':<12} {'version':<15} {'params':>8} {'MACs':>8} {'file':>8}  " + "  ".join(f"seed {s:>2}" for s in seeds) + "     mean  vs fp32 branched")
    goals = []
    for model in ["resnet-mini", "mbnet-mini"]:
        reports = {}
        for s in seeds:
            path = os.path.join(out, f"{model}-seed{s}.json")
            if os.path.exists(path):
                with open(path) as f:
                    reports[s] = json.load(f)
        if not reports:
            print(f"{model:<12} (no results)")
            continue
        by_kind = {}
        for s, rep in reports.items():
            for row in rep["rows"]:
                k = kind(row)
                if k:
                    by_kind.setdefault(k, {})[s] = row
        base = by_kind.get("fp32", {})
        for k, name in KINDS:
            rows = by_kind.get(k, {})
            if not rows:
                continue
            any_row = next(iter(rows.values()))
            tops = [rows[s]["top1"] if s in rows else float("nan") for s in seeds]
            present = [rows[s]["top1"] for s in seeds if s in rows]
            mean = sum(present) / len(present)
            gaps = [rows[s]["top1"] - base[s]["top1"] for s in seeds if s in rows and s in base]
            gap = f"{sum(gaps) / len(gaps):+.2f}" if k in ("ptq", "qat") and gaps else "-"
            if k in ("ptq", "qat") and gaps:
                goals.append((model, k, min(gaps)))
            print(
                f"{model:<12} {name:<15} {any_row['params'] / 1e3:7.1f}K {any_row['macs'] / 1e6:7.2f}M "
                f"{any_row.get('file_bytes', 0) / 1e6:6.2f}MB  " + "  ".join(f"{t:6.2f}%" for t in tops) + f"  {mean:6.2f}%  {gap:>8}"
            )
    rep = next(iter(reports.values())) if reports else None
    if rep and "recipe" in rep:
        r = rep["recipe"]
        print(
            f"validation: {rep['val_images']} images ({rep['val_source']}); trained on {rep['train_images']} images, "
            f"{rep['epochs']} epochs, lr {r['lr']}, batch {r['batch_size']}; QAT and PTQ files run by tract"
        )
    for model, k, worst in goals:
        limit = 1.0 if k == "ptq" else 0.3
        verdict = "met" if worst >= -limit else "not met"
        print(f"goal {model} {k}: within {limit} point of fp32 branched on every seed: {verdict} (worst {worst:+.2f})")


if __name__ == "__main__":
    main()
