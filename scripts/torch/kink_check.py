#!/usr/bin/env python3
"""How close a model's ReLU and ReLU6 inputs come to their kinks on check_gradients.py's batch, in float32 and float64.

    python scripts/torch/kink_check.py TORCH_DIR [--seed 0] [--batch 8]

TORCH_DIR is what `stretch export --format torch` wrote. Runs model.py in
train mode on the same batch as scripts/torch/check_gradients.py (same
seed and size) in float64 and in float32, records every F.relu and
F.relu6 input, and prints how many of their decisions (input > 0, and
input < 6 for ReLU6) differ between the two, and the smallest nonzero
distance of an input from a kink relative to its layer's largest input. A decision that
float32 rounding can flip switches a unit's whole gradient on or off, so
two float32 implementations that sum in different orders can differ by
far more than rounding on such a batch. Needs torch, safetensors, numpy.
"""
import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

import exported


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args()
    d = Path(a.dir)
    mod = exported.module(d)
    x, _ = exported.random_batch(exported.manifest(d), a.batch, a.seed)
    inputs = {}
    relu, relu6 = F.relu, F.relu6
    for dtype in (torch.float64, torch.float32):
        seen = inputs[dtype] = []

        def record(kinks, real):
            return lambda t, *rest, **kw: (seen.append((kinks, t.detach().double())), real(t, *rest, **kw))[1]

        mod.F.relu, mod.F.relu6 = record((0.0,), relu), record((0.0, 6.0), relu6)
        model = exported.model(mod, d)
        with torch.no_grad():
            model.to(dtype).train()(x.to(dtype))
        mod.F.relu, mod.F.relu6 = relu, relu6
    flips, nearest = 0, 1.0
    for (kinks, exact), (_, rounded) in zip(inputs[torch.float64], inputs[torch.float32]):
        for k in kinks:
            flips += int(((exact > k) != (rounded > k)).sum())
            away = (exact - k).abs()
            away = away[away != 0]
            if away.numel():
                nearest = min(nearest, float(away.min()) / float(exact.abs().max()))
    print(f"{d.name} seed {a.seed}: {len(inputs[torch.float64])} ReLU(6)s, {flips} decisions differ between "
          f"float32 and float64; nearest input to a kink / layer peak {nearest:.1e}")


if __name__ == "__main__":
    main()
