#!/usr/bin/env python3
"""One training step's gradients in PyTorch (model.py) against burn's (`stretch gradients`).

    python scripts/torch/check_gradients.py MODEL.onnx TORCH_DIR --stretch PATH/stretch \
        [--batch 8] [--tolerance 1e-4] [--seed 0]

TORCH_DIR is what `stretch export MODEL.onnx --format torch` wrote. A batch
of uniform images in [-1, 1) and random labels is written to a safetensors
file; `stretch gradients` takes burn's gradients of the mean cross entropy
in training mode (BatchNorm on batch statistics), as one step of `stretch
train` does before weight decay and momentum, and model.py takes PyTorch's
on the same batch in train mode. Each learnable tensor's largest
difference, relative to the largest magnitude of its gradient, must be
within the tolerance; the loss too. A tensor whose gradient is zero in
exact arithmetic (a bias before a BatchNorm in training mode, or before
a merge's: below 1e-6 of the model's largest in float64, which PyTorch
also computes here) holds only rounding on both sides, so its difference
is taken relative to the model's largest gradient instead and it is
counted as zero. Prints the worst tensors, and how far burn's and
PyTorch's float32 gradients each are from the float64 ones (where float32
itself is not within the tolerance of exact arithmetic, the two cannot be
within it of each other either); exits 1 when one is over, or when the two
sides do not hold gradients for the same keys. Needs torch, safetensors
and numpy.
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import exported


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx")
    p.add_argument("dir")
    p.add_argument("--stretch", required=True, help="the stretch binary")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    mod = exported.module(a.dir)
    model = exported.model(mod, a.dir).train()
    manifest = exported.manifest(a.dir)
    x, y = exported.random_batch(manifest, a.batch, a.seed)
    with tempfile.TemporaryDirectory() as tmp:
        save_file({"images": x, "labels": y}, f"{tmp}/batch.safetensors")
        subprocess.run([a.stretch, "gradients", a.onnx, "--batch", f"{tmp}/batch.safetensors",
                        "-o", f"{tmp}/grads.safetensors"], check=True, stdout=subprocess.DEVNULL)
        burn = load_file(f"{tmp}/grads.safetensors")
        with safe_open(f"{tmp}/grads.safetensors", "pt") as f:
            burn_loss = float(f.metadata()["stretch.loss"])
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    params = dict(model.named_parameters())
    exact = exported.model(mod, a.dir).double().train()
    F.cross_entropy(exact(x.double()), y).backward()
    exact_grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in exact.named_parameters()}
    peaks = {k: float(g.abs().max()) for k, g in exact_grads.items()}
    name = Path(a.onnx).name
    rows, bad = [], []
    for k in manifest["keys"]:
        if k["role"] != "learnable":
            continue
        prm, want = params.get(k["key"]), burn.get(k["initializer"])
        if prm is None or want is None:
            bad.append(f"{k['key']} ({k['initializer']}): {'no parameter in model.py' if prm is None else 'no gradient from stretch'}")
            continue
        got = prm.grad if prm.grad is not None else torch.zeros_like(prm)
        got = got.detach().reshape(want.shape)
        ref = exact_grads[k["key"]].reshape(want.shape)
        rows.append((float((got - want).abs().max()), peaks[k["key"]], k["key"],
                     float((want.double() - ref).abs().max()), float((got.double() - ref).abs().max())))
    extra = set(burn) - {k["initializer"] for k in manifest["keys"] if k["role"] == "learnable"}
    bad += [f"{i}: a gradient from stretch, not a learnable key of model.py" for i in sorted(extra)]
    largest = max([r[1] for r in rows] + [1e-30])
    zero = sum(1 for r in rows if r[1] < 1e-6 * largest)
    scale = lambda peak: peak if peak >= 1e-6 * largest else largest
    burn64 = max([b / scale(peak) for _, peak, _, b, _ in rows] + [0.0])
    torch64 = max([t / scale(peak) for _, peak, _, _, t in rows] + [0.0])
    rows = sorted(((diff / scale(peak), diff, key) for diff, peak, key, _, _ in rows), reverse=True)
    loss_rel = abs(loss.item() - burn_loss) / max(abs(burn_loss), 1e-12)
    worst = max([r[0] for r in rows] + [loss_rel])
    print(f"{name}: {len(rows)} gradients ({zero} zero), loss {loss.item():.6f} vs {burn_loss:.6f} (relative {loss_rel:.1e}); "
          f"worst relative {worst:.2e} ({'within' if worst <= a.tolerance and not bad else 'OVER'} {a.tolerance:g}); "
          f"from float64: burn {burn64:.2e}, PyTorch float32 {torch64:.2e}")
    for rel, diff, key in rows[:3]:
        print(f"  {key}: max |d| {diff:.3e}, relative {rel:.2e}")
    for b in bad:
        print(f"  {b}")
    sys.exit(0 if worst <= a.tolerance and not bad else 1)


if __name__ == "__main__":
    main()
