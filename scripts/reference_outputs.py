#!/usr/bin/env python3
"""Whole-model onnxruntime outputs of many models on many inputs, in one call.

  reference_outputs.py INPUTS.npy OUT_DIR MODEL...

INPUTS.npy holds K inputs stacked on a new first axis (float32,
[K, *input shape]). For each MODEL, OUT_DIR/<model file stem>.npy gets its
first output on each input, stacked the same way ([K, *output shape]).
Uses only onnxruntime and numpy (installed by scripts/setup.sh), one
intra-op thread per session, CPU execution provider, two models at a time.
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    inputs = np.load(sys.argv[1])
    out_dir = sys.argv[2]

    def reference(path):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        output = sess.get_outputs()[0].name
        outs = np.stack([sess.run([output], {name: x})[0] for x in inputs])
        stem = os.path.splitext(os.path.basename(path))[0]
        np.save(os.path.join(out_dir, f"{stem}.npy"), outs.astype(np.float32))
        return f"{path}: {len(inputs)} outputs of shape {list(outs.shape[1:])}"

    with ThreadPoolExecutor(max_workers=2) as pool:
        for line in pool.map(reference, sys.argv[3:]):
            print(line)


if __name__ == "__main__":
    main()
