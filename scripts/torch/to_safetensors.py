#!/usr/bin/env python3
"""A torch.save checkpoint as a safetensors state dict for `stretch import-weights`.

    python scripts/torch/to_safetensors.py CHECKPOINT.pt -o WEIGHTS.safetensors [--like weights.safetensors]

Reads a state dict, or a dict holding one under `state_dict`, `model` or
`module`; strips DDP's `module.` prefix; writes float tensors as float32.
With --like (the `weights.safetensors` that `stretch export --format torch`
wrote) its metadata, the structure fingerprint among it, is kept so that
`import-weights` can refuse weights of another model. Needs torch and
safetensors.
"""
import argparse
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def state_dict(obj):
    if isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    for key in ("state_dict", "model", "module"):
        if isinstance(obj, dict) and key in obj:
            return state_dict(obj[key])
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    sys.exit(f"error: no state dict in the checkpoint (keys: {list(obj)[:8] if isinstance(obj, dict) else type(obj)})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--like", help="weights.safetensors whose metadata to keep")
    a = p.parse_args()
    sd = state_dict(torch.load(a.checkpoint, map_location="cpu", weights_only=False))
    if sd and all(k.startswith("module.") for k in sd):
        sd = {k[len("module."):]: v for k, v in sd.items()}
    out = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
    meta = {"format": "pt"}
    if a.like:
        with safe_open(a.like, "pt") as f:
            meta.update(f.metadata() or {})
    save_file(out, a.output, metadata=meta)
    print(f"wrote {a.output}: {len(out)} tensors from {a.checkpoint}")


if __name__ == "__main__":
    main()
