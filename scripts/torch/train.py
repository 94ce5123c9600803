#!/usr/bin/env python3
"""Train a model that `stretch export --format torch` wrote, data-parallel.

    torchrun --nproc-per-node N scripts/torch/train.py DIR --data fashion-mnist:/usr/share/datasets/fashion-mnist \
        --epochs 5 -o trained.safetensors
    stretch import-weights BRANCHED.onnx --from trained.safetensors -o TRAINED.onnx

DIR holds model.py, weights.safetensors and stretch-torch.json. DDP over
NCCL on GPUs and gloo on CPUs; `stretch train`'s recipe (SGD, momentum
0.9, cosine schedule per batch, weight decay 5e-4, lr 0.05 at batch 64, no
label smoothing); AMP on GPUs; distillation from a teacher exported the
same way (--teacher DIR). Data: `fashion-mnist:DIR` (the IDX files),
`folder:DIR` (torchvision ImageFolder) or `torchvision:NAME:ROOT`. Images
are resized to the model's input and normalised as stretch-torch.json
says, or else, as `stretch train` does, by the training images' mean and
deviation per channel. Rank 0 writes the trained state dict with the
export's metadata and that normalisation, which `stretch import-weights`
records in the model.
An example of integration to copy into a pipeline, not a second trainer.
"""
import argparse
import gzip
import importlib.util
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load(dirname):
    d = Path(dirname)
    spec = importlib.util.spec_from_file_location(f"stretch_model_{d.name}", d / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.build()
    model.load_state_dict(load_file(d / "weights.safetensors"))
    with safe_open(d / "weights.safetensors", "pt") as f:
        meta = f.metadata() or {}
    return model, json.loads((d / "stretch-torch.json").read_text()), meta


def idx(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def dataset(spec, train, shape, limit=None):
    kind, _, rest = spec.partition(":")
    if kind == "fashion-mnist":
        part = "train" if train else "t10k"
        find = lambda s: next(p for p in Path(rest).iterdir() if p.name.startswith(f"{part}-{s}"))
        x = torch.from_numpy(idx(find("images"))[:limit].copy()).float().div(255).unsqueeze(1)
        y = torch.from_numpy(idx(find("labels"))[:limit].astype(np.int64))
    else:
        import torchvision
        if kind == "folder":
            ds = torchvision.datasets.ImageFolder(os.path.join(rest, "train" if train else "val"),
                                                  transform=torchvision.transforms.ToTensor())
        else:
            name, _, root = rest.partition(":")
            ds = getattr(torchvision.datasets, name)(root, train=train, download=False,
                                                     transform=torchvision.transforms.ToTensor())
        n = len(ds) if limit is None else min(limit, len(ds))
        x = torch.stack([ds[i][0] for i in range(n)])
        y = torch.tensor([ds[i][1] for i in range(n)])
    _, c, h, w = shape
    x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False) if x.shape[2:] != (h, w) else x
    x = x.expand(-1, c, -1, -1) if x.shape[1] == 1 and c > 1 else x
    return x.contiguous(), y


def normalise(x, y, mean, std):
    return TensorDataset((x - mean.view(1, -1, 1, 1)) / std.view(1, -1, 1, 1), y)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="global batch, split over the processes")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--teacher", help="a directory exported from the original, for distillation")
    p.add_argument("--alpha", type=float, default=0.5, help="weight of the distillation loss")
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, help="train on the first LIMIT training images (stretch train --limit)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    torch.manual_seed(a.seed)
    model, manifest, meta = load(a.dir)
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) if cuda else model
    model = torch.nn.parallel.DistributedDataParallel(model.to(dev))
    teacher = load(a.teacher)[0].to(dev).eval() if a.teacher else None
    shape = manifest["inputs"][0]["shape"]
    (x, y), (tx, ty) = dataset(a.data, True, shape, a.limit), dataset(a.data, False, shape)
    norm = manifest.get("normalisation")
    if norm:
        mean, std = (torch.tensor([float(v) for v in norm[k].split(",")]) for k in ("mean", "std"))
    else:  # as stretch train: per channel over the training images, population deviation
        mean, std = x.mean((0, 2, 3), dtype=torch.float64), x.double().std((0, 2, 3), correction=0)
        mean, std = mean.float(), std.float()
    meta = {**meta, "stretch.input_mean": ",".join(f"{v:.9g}" for v in mean.tolist()),
            "stretch.input_std": ",".join(f"{v:.9g}" for v in std.tolist())}
    train, test = normalise(x, y, mean, std), normalise(tx, ty, mean, std)
    sampler = DistributedSampler(train, world, rank, shuffle=True, seed=a.seed)
    loader = DataLoader(train, batch_size=a.batch_size // world, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=a.weight_decay)
    steps = a.epochs * len(loader)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    scaler = torch.amp.GradScaler(enabled=cuda)
    for epoch in range(a.epochs):
        model.train()
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(dev), y.to(dev)
            with torch.autocast(dev.type, enabled=cuda):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                if teacher is not None:
                    with torch.no_grad():
                        t = teacher(x)
                    kd = F.kl_div(F.log_softmax(logits / a.temperature, 1), F.softmax(t / a.temperature, 1),
                                  reduction="batchmean") * a.temperature ** 2
                    loss = (1 - a.alpha) * loss + a.alpha * kd
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                hits = sum((model.module(x.to(dev)).argmax(1).cpu() == y).sum().item()
                           for x, y in DataLoader(test, batch_size=256))
            print(f"epoch {epoch + 1}/{a.epochs}: loss {loss.item():.4f}, top-1 {100 * hits / len(test):.2f}%", flush=True)
    if rank == 0:
        sd = {k: v.detach().float().cpu().contiguous() if v.is_floating_point() else v.cpu()
              for k, v in model.module.state_dict().items()}
        save_file(sd, a.output, metadata=meta)
        print(f"wrote {a.output}: {len(sd)} tensors")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
