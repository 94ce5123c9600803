#!/usr/bin/env python3
"""Prints the Fashion-MNIST table of scripts/benchmarks/fashion_mnist.sh.

Usage: fashion_table.py OUT_DIR SEED...

Reads OUT_DIR/seedS.json (stretch.compare-accuracy/1) for every seed, and per
branched model its plan (NAME.plan.json, predicted speedup) and bench
(NAME.bench.json, measured speedup against the original on one core at p50).
Top-1 and top-5 are means over the seeds, with each seed's value beside;
the spread is max - min over the seeds.
"""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def describe(recipe):
    """One line of a compare-accuracy recipe."""
    opt = recipe["optimizer"]
    name = next(iter(opt)) if isinstance(opt, dict) else str(opt)
    extra = ", ".join(f"{k} {v}" for k, v in (opt[name] or {}).items()) if isinstance(opt, dict) else ""
    aug = recipe.get("augment", {})
    augs = [f"crop:{aug['crop_padding']}"] if aug.get("crop_padding") else []
    augs += ["flip"] if aug.get("flip") else []
    kd = recipe.get("distill")
    return (
        f"{name} ({extra}), lr {recipe['lr']} {recipe['schedule'].lower()}, batch {recipe['batch_size']}, "
        f"weight decay {recipe['weight_decay']}, augmentation {','.join(augs) or 'none'}"
        + (f", distillation alpha {kd['alpha']} T {kd['temperature']}" if kd else "")
    )


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, seeds = sys.argv[1], sys.argv[2:]
    missing = [os.path.join(out, f"seed{s}.json") for s in seeds if not os.path.exists(os.path.join(out, f"seed{s}.json"))]
    if missing:
        sys.exit(f"no table: {', '.join(missing)} missing (the trainings write them; the benches, if any ran, are in {out})")
    runs = {s: load(os.path.join(out, f"seed{s}.json")) for s in seeds}
    first = runs[seeds[0]]
    print(
        f"Fashion-MNIST, {first['epochs']} epochs, trained on {first['train_images']} images, "
        f"validated on {first['val_images']} ({first['val_source']}); seeds {', '.join(seeds)}"
    )
    recipes = {s: {k: v for k, v in r.get("recipe", {}).items() if k != "seed"} for s, r in runs.items()}
    if any(recipes[s] != recipes[seeds[0]] for s in seeds):
        sys.exit("the seed files were trained with different recipes: " + "; ".join(f"seed {s}: {recipes[s]}" for s in seeds))
    if "recipe" in first:
        print(f"recipe: {describe(first['recipe'])}; backend {first.get('backend', '?')}")
    header = ["model", "kd", "params", "MACs", "top-1 mean", "per seed", "spread", "top-5 mean",
              "gap top-1", "gap per seed", "pred. speedup", "meas. speedup (p50)"]
    rows = [header]
    base_macs = first["rows"][0]["macs"]
    for i, r in enumerate(first["rows"]):
        per = [runs[s]["rows"][i] for s in seeds]
        if any(p["label"] != r["label"] for p in per):
            sys.exit(f"seed files list different models at row {i}")
        top1 = [p["top1"] for p in per]
        top5 = [p["top5"] for p in per]
        gaps = [p["gap_top1"] for p in per]
        name = os.path.splitext(os.path.basename(r["file"]))[0]
        pred = meas = "-"
        plan_path = os.path.join(out, name + ".plan.json")
        bench_path = os.path.join(out, name + ".bench.json")
        if r["label"] != "original" and os.path.exists(plan_path):
            t = load(plan_path)["totals"]
            pred = f"{t['speedup']:.2f}x"
        if r["label"] != "original" and os.path.exists(bench_path):
            b = load(bench_path)
            one = [s for s in b["speedups"] if s["versus"] == "original, 1 core"]
            if one:
                meas = f"{one[0]['p50']:.2f}x"
        rows.append([
            name, "yes" if r["distilled"] else "no",
            f"{r['params'] / 1e3:.1f} K", f"{r['macs'] / 1e6:.2f} M ({r['macs'] / base_macs:.2f}x)",
            f"{sum(top1) / len(top1):.2f}%", " / ".join(f"{v:.2f}" for v in top1),
            f"{max(top1) - min(top1):.2f}", f"{sum(top5) / len(top5):.2f}%",
            "-" if r["label"] == "original" else f"{sum(gaps) / len(gaps):+.2f}",
            "-" if r["label"] == "original" else " / ".join(f"{v:+.2f}" for v in gaps),
            pred, meas,
        ])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows[1:]:
        print("| " + " | ".join(row) + " |")
    secs = {s: sum(p["train_seconds"] for p in runs[s]["rows"]) for s in seeds}
    print("training time per seed, summed over its models (wall time is less where --jobs trained several at once): "
          + ", ".join(f"seed {s} {v / 60:.1f} min" for s, v in secs.items()))
    print("pred. speedup: the plan's prediction on the host profile (predicted, not measured); "
          "meas. speedup: stretch bench, branched on cpu0 + cpu1 vs the original on one core, tract, p50")


if __name__ == "__main__":
    main()
