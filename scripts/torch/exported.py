"""What `stretch export --format torch` wrote in a directory, for the check scripts beside this file.

model.py imported (`module`), a module built from it with the exported
weights (`model`), stretch-torch.json (`manifest`), and the random batch
the gradient checks share (`random_batch`). Needs torch, safetensors and
numpy.
"""
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file


def module(dirname):
    """model.py of `dirname`, imported under a name of its own per directory."""
    d = Path(dirname)
    spec = importlib.util.spec_from_file_location(f"stretch_model_{d.name}", d / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def model(mod, dirname):
    """A fresh module from `mod` (model.py) holding the weights of `dirname`."""
    m = mod.build()
    m.load_state_dict(load_file(Path(dirname) / "weights.safetensors"))
    return m


def manifest(dirname):
    return json.loads((Path(dirname) / "stretch-torch.json").read_text())


def random_batch(man, n, seed):
    """`n` images of the first input's shape, uniform in [-1, 1), and `n` labels, from numpy's generator `seed`."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.uniform(-1, 1, [n] + list(man["inputs"][0]["shape"][1:])).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, man["outputs"][0]["shape"][-1], n).astype(np.int64))
    return x, y
