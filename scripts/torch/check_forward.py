#!/usr/bin/env python3
"""model.py's forward (eval mode) against onnxruntime on the ONNX file it was exported from.

    python scripts/torch/check_forward.py MODEL.onnx TORCH_DIR [--tolerance 1e-5] [--seed 0]

TORCH_DIR is what `stretch export MODEL.onnx --format torch` wrote. Both run
on the same uniform input in [-1, 1); each output's largest difference,
relative to the reference's largest magnitude, must be within the
tolerance. Prints one line per output; exits 1 when one is over. Needs
torch, safetensors, numpy and onnxruntime.
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

import exported


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("onnx")
    p.add_argument("dir")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    model = exported.model(exported.module(a.dir), a.dir).eval()
    manifest = exported.manifest(a.dir)
    rng = np.random.default_rng(a.seed)
    xs = [rng.uniform(-1, 1, i["shape"]).astype(np.float32) for i in manifest["inputs"]]
    sess = ort.InferenceSession(a.onnx, providers=["CPUExecutionProvider"])
    want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
    with torch.no_grad():
        got = model(*[torch.from_numpy(x) for x in xs])
    got = got if isinstance(got, tuple) else (got,)
    worst = 0.0
    for k, (w, g) in enumerate(zip(want, got)):
        g = g.numpy()
        if g.shape != w.shape:
            print(f"{a.onnx}: output {k}: shape {g.shape}, onnxruntime {w.shape}")
            sys.exit(1)
        peak = float(np.abs(w).max()) or 1.0
        rel = float(np.abs(w - g).max()) / peak
        worst = max(worst, rel)
        print(f"{Path(a.onnx).name}: output {k}: max |d| {np.abs(w - g).max():.3e}, relative {rel:.2e} "
              f"({'within' if rel <= a.tolerance else 'OVER'} {a.tolerance:g})")
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
