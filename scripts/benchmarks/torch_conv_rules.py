#!/usr/bin/env python3
"""Times, in PyTorch, the two ways of taking each convolution's weight
gradient in a network: PyTorch's own (aten.convolution_backward, cuDNN's
backward-filter on a GPU) and burn 0.22's generic rule, which stretch's
LibTorch training runs: a convolution of the input with batch and channels
swapped by the output gradient (as the kernel, as large as the feature
map), with the convolution's stride as its dilation. Also the input
gradient: PyTorch's own against the transposed convolution burn uses.

  torch_conv_rules.py STRUCTURE.json BATCH [DEVICE] [REPS]

STRUCTURE.json comes from torch_train_structure.py dump. Every convolution's
input and output shapes are taken from one forward pass at BATCH; each
gradient is timed REPS (20) times after 3 warm-ups, synchronised, and the
median is reported per convolution and summed over the network. The two
results of each rule are compared on whole tensors (max |difference| over
max |value|; TF32 may be on for cuDNN convolutions, so expect ~1e-3 on a GPU).
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from torch_train_structure import build  # noqa: E402
import json  # noqa: E402


def timed(fn, device, reps):
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    s = json.load(open(sys.argv[1]))
    batch = int(sys.argv[2])
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    reps = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    torch.manual_seed(0)
    net = build(s).to(device)
    shapes = []
    hooks = [m.register_forward_hook(lambda m, i, o: shapes.append((m, i[0].shape, o.shape)))
             for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        net(torch.randn(batch, *s["input_shape"], device=device))
    for h in hooks:
        h.remove()
    totals = {"w native": 0.0, "w burn": 0.0, "x native": 0.0, "x burn": 0.0}
    worst = {"w": 0.0, "x": 0.0}
    print(f"batch {batch} on {device} ({torch.__version__}): per convolution, median ms")
    for m, xs, ys in shapes:
        x = torch.randn(xs, device=device)
        dy = torch.randn(ys, device=device)
        w = m.weight.detach()
        st, pad, dil, g = list(m.stride), list(m.padding), list(m.dilation), m.groups

        def native(mask):
            return torch.ops.aten.convolution_backward(dy, x, w, None, st, pad, dil, False, [0, 0], g, mask)

        def burn_w():
            r = torch.conv2d(x.transpose(0, 1), dy.transpose(0, 1), None, dil, pad, st, 1).transpose(0, 1)
            return r[:, :, : w.shape[2], : w.shape[3]]

        def burn_x():
            out_pad = [xs[2 + k] - ((ys[2 + k] - 1) * st[k] - 2 * pad[k] + dil[k] * (w.shape[2 + k] - 1) + 1)
                       for k in range(2)]
            return torch.nn.functional.conv_transpose2d(dy, w, None, st, pad, out_pad, g, dil)

        row = {}
        row["w native"] = timed(lambda: native([False, True, False]), device, reps)
        row["x native"] = timed(lambda: native([True, False, False]), device, reps)
        row["x burn"] = timed(burn_x, device, reps)
        diff_x = (native([True, False, False])[0] - burn_x()).abs().max() / native([True, False, False])[0].abs().max()
        worst["x"] = max(worst["x"], diff_x.item())
        if g == 1:
            row["w burn"] = timed(burn_w, device, reps)
            want = native([False, True, False])[1]
            worst["w"] = max(worst["w"], ((want - burn_w()).abs().max() / want.abs().max()).item())
        else:
            row["w burn"] = float("nan")
        for k in totals:
            if row[k] == row[k]:
                totals[k] += row[k]
        print(f"  x {list(xs)} w {list(w.shape)} stride {st} groups {g}: "
              + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
    print("total: " + ", ".join(f"{k} {v:.2f} ms" for k, v in totals.items()))
    print(f"weight gradient, burn's rule / native: {totals['w burn'] / totals['w native']:.2f}x; "
          f"input gradient, transposed convolution / native: {totals['x burn'] / totals['x native']:.2f}x")
    print(f"largest relative difference: weight {worst['w']:.1e}, input {worst['x']:.1e}")


if __name__ == "__main__":
    main()
