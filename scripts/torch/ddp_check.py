#!/usr/bin/env python3
"""DDP against one process: after STEPS steps on the same global batches, the weights agree.

    torchrun --nproc-per-node 2 scripts/torch/ddp_check.py DIR [--steps 20] [--batch 16] [--tolerance 1e-5]

DIR is what `stretch export --format torch` wrote. Every process trains the
module under DistributedDataParallel (gloo on CPUs, NCCL on GPUs) on its
share of each global batch; rank 0 also trains a copy alone on the whole
batch, with the same SGD (lr 0.01, momentum 0.9, weight decay 5e-4). BatchNorm
layers use their running statistics in both (eval mode): a process's
batch statistics are those of its share, not of the whole batch, unless
SyncBatchNorm replaces them (which needs GPUs). Inputs are uniform in
[-1, 1) and labels random, from a fixed seed, or with --data
fashion-mnist:DIR the first training images (normalised as
stretch-torch.json says) and their labels. Rank 0 prints the largest
difference of any parameter, relative to that parameter's largest
magnitude, and exits 1 over the tolerance. Needs torch and safetensors.
"""
import argparse
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import exported
from train import dataset


DOUBLE = False


def build(d):
    m = exported.model(exported.module(d), d)
    return m.eval().double() if DOUBLE else m.eval()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--data", help="fashion-mnist:DIR: real images and labels instead of random ones")
    p.add_argument("--double", action="store_true", help="train in float64: tells rounding apart from a real difference")
    a = p.parse_args()
    global DOUBLE
    DOUBLE = a.double
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.batch % world:
        sys.exit(f"error: --batch {a.batch} does not split over {world} processes")
    dev = torch.device(f"cuda:{rank}" if cuda else "cpu")
    d = Path(a.dir)
    manifest = exported.manifest(d)
    shape = manifest["inputs"][0]["shape"]
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    ddp = torch.nn.parallel.DistributedDataParallel(build(d).to(dev))
    if a.data:
        norm = manifest.get("normalisation")
        if not norm:
            sys.exit(f"error: {d / 'stretch-torch.json'} records no input normalisation for --data")
        xs, ys = dataset(a.data, True, shape, a.steps * a.batch)
        mean, std = (torch.tensor([float(v) for v in norm[k].split(",")]).view(1, -1, 1, 1) for k in ("mean", "std"))
        xs = ((xs - mean) / std).double()
    else:
        xs = torch.rand([a.steps * a.batch] + shape[1:], generator=gen, dtype=torch.float64) * 2 - 1
        classes = ddp(xs[:1].float().to(dev) if not a.double else xs[:1].to(dev)).shape[1]
        ys = torch.randint(0, classes, (a.steps * a.batch,), generator=gen)
    xs = xs if a.double else xs.float()
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    o_ddp = opt(ddp)
    alone = build(d).to(dev) if rank == 0 else None
    o_alone = opt(alone) if alone is not None else None
    share = a.batch // world
    for s in range(a.steps):
        lo = s * a.batch
        x, y = xs[lo + rank * share: lo + (rank + 1) * share].to(dev), ys[lo + rank * share: lo + (rank + 1) * share].to(dev)
        o_ddp.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        o_ddp.step()
        if alone is not None:
            o_alone.zero_grad()
            F.cross_entropy(alone(xs[lo: lo + a.batch].to(dev)), ys[lo: lo + a.batch].to(dev)).backward()
            o_alone.step()
    worst = 0.0
    if rank == 0:
        with torch.no_grad():
            pairs = list(zip(ddp.module.named_parameters(), alone.parameters()))
            bad = [n for (n, w), v in pairs if not (torch.isfinite(w).all() and torch.isfinite(v).all())]
            if bad:
                print(f"error: parameter {bad[0]} is not finite after {a.steps} steps (lower --lr)")
                worst = float("inf")
            else:
                where = ""
                for (name, w), v in pairs:
                    rel = float((w - v).abs().max()) / max(float(v.abs().max()), 1e-12)
                    if rel > worst:
                        worst, where = rel, name
                start = build(d).to(dev)
                moved = max(float((w - v).abs().max()) for w, v in zip(ddp.module.parameters(), start.parameters()))
                print(f"{world} processes vs 1, {a.steps} steps of global batch {a.batch}: largest relative "
                      f"difference {worst:.2e} ({where}); weights moved up to {moved:.3e} from the start "
                      f"({'within' if worst <= a.tolerance else 'OVER'} {a.tolerance:g})")
    ok = torch.tensor([1 if rank != 0 or worst <= a.tolerance else 0])
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    sys.exit(0 if ok.item() == 1 else 1)


if __name__ == "__main__":
    main()
