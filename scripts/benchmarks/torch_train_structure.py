#!/usr/bin/env python3
"""PyTorch reference for training throughput: the same network as an ONNX
model, trained by PyTorch on random batches.

  torch_train_structure.py dump MODEL.onnx OUT.json [--drop-batchnorm [OUT.onnx]]
      (needs the onnx package) writes the model's structure: its nodes,
      attributes and initializer shapes, no weights. With --drop-batchnorm
      the BatchNormalization nodes are left out (their input feeds their
      consumers), for an ablation, and OUT.onnx, when named, gets the ONNX
      model without them.
  torch_train_structure.py train STRUCTURE.json BATCH SECONDS [DEVICE]
      (needs torch only) builds that network in PyTorch with fresh weights
      and trains it with SGD (lr 0.05, momentum 0.9, weight decay 5e-4) on
      random batches of BATCH inputs of the model's shape for SECONDS after
      5 warm-up steps, then prints `images/s N` (synchronised at the end).
  torch_train_structure.py train-host STRUCTURE.json BATCH SECONDS [DEVICE]
      the same, as a training loop with a data loader runs it: each step's
      inputs and labels come from pinned host memory (copied without
      blocking, as DataLoader(pin_memory=True) batches are) and the loss is
      read back every step (loss.item(), for logging), as stretch does.

Supports the operators of the zoo's resnet-mini: Conv, BatchNormalization,
Relu, Add, MaxPool, GlobalAveragePool, Flatten, Gemm.
"""
import json
import sys
import time


def dump(model_path, out_path, drop_bn, onnx_out=None):
    import onnx
    m = onnx.load(model_path)
    shapes = {i.name: list(i.dims) for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in shapes)
    dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rename, nodes = {}, []
    for n in m.graph.node:
        ins = [rename.get(x, x) for x in n.input]
        if drop_bn and n.op_type == "BatchNormalization":
            rename[n.output[0]] = ins[0]
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items()}
        nodes.append({"op": n.op_type, "inputs": ins, "outputs": list(n.output), "attrs": attrs,
                      "shapes": {x: shapes[x] for x in ins if x in shapes}})
    out = [rename.get(o.name, o.name) for o in m.graph.output]
    if onnx_out:
        keep = [n for n in m.graph.node if n.op_type != "BatchNormalization"]
        for n in keep:
            for k, x in enumerate(n.input):
                n.input[k] = rename.get(x, x)
        del m.graph.node[:]
        m.graph.node.extend(keep)
        for o in m.graph.output:
            assert o.name not in rename, "a BatchNormalization output is a graph output"
        used = {x for n in keep for x in n.input}
        inits = [i for i in m.graph.initializer if i.name in used]
        del m.graph.initializer[:]
        m.graph.initializer.extend(inits)
        del m.graph.value_info[:]
        onnx.checker.check_model(m)
        onnx.save(m, onnx_out)
    json.dump({"input": inp.name, "input_shape": dims[1:], "output": out[0], "nodes": nodes}, open(out_path, "w"))


def build(s):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mods = nn.ModuleDict()
            for k, n in enumerate(s["nodes"]):
                a, sh = n["attrs"], n["shapes"]
                if n["op"] == "Conv":
                    w = sh[n["inputs"][1]]
                    g = a.get("group", 1)
                    p = a.get("pads", [0, 0, 0, 0])
                    self.mods[str(k)] = nn.Conv2d(w[1] * g, w[0], w[2:], stride=a.get("strides", [1, 1]),
                                                  padding=(p[0], p[1]), dilation=a.get("dilations", [1, 1]),
                                                  groups=g, bias=len(n["inputs"]) > 2)
                elif n["op"] == "BatchNormalization":
                    self.mods[str(k)] = nn.BatchNorm2d(sh[n["inputs"][1]][0], eps=a.get("epsilon", 1e-5))
                elif n["op"] == "Gemm":
                    w = sh[n["inputs"][1]]
                    out_f, in_f = (w[0], w[1]) if a.get("transB", 0) else (w[1], w[0])
                    self.mods[str(k)] = nn.Linear(in_f, out_f, bias=len(n["inputs"]) > 2)

        def forward(self, x):
            env = {s["input"]: x}
            for k, n in enumerate(s["nodes"]):
                a, xs = n["attrs"], [env.get(i) for i in n["inputs"]]
                op = n["op"]
                if op in ("Conv", "BatchNormalization", "Gemm"):
                    y = self.mods[str(k)](xs[0])
                elif op == "Relu":
                    y = torch.relu(xs[0])
                elif op == "Add":
                    y = xs[0] + xs[1]
                elif op == "MaxPool":
                    p = a.get("pads", [0, 0, 0, 0])
                    y = nn.functional.max_pool2d(xs[0], a["kernel_shape"], a.get("strides", None), (p[0], p[1]))
                elif op == "GlobalAveragePool":
                    y = xs[0].mean((2, 3), keepdim=True)
                elif op == "Flatten":
                    y = torch.flatten(xs[0], a.get("axis", 1))
                else:
                    raise SystemExit(f"operator {op} (node {n['outputs'][0]}) is not supported here")
                env[n["outputs"][0]] = y
            return env[s["output"]]

    return Net()


def train(struct_path, batch, seconds, device, host=False):
    import torch
    s = json.load(open(struct_path))
    torch.manual_seed(0)
    net = build(s).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    pinned = host and device.startswith("cuda")
    x_host = torch.randn(batch, *s["input_shape"])
    x_host = x_host.pin_memory() if pinned else x_host
    x = x_host.to(device)
    classes = None
    y_host = None
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        nonlocal classes, y_host
        inp = x_host.to(device, non_blocking=pinned) if host else x
        out = net(inp)
        if classes is None:
            classes = out.shape[1]
            y_host = torch.randint(0, classes, (batch,))
            y_host = y_host.pin_memory() if pinned else y_host
        y = y_host.to(device, non_blocking=pinned) if host else torch.randint(0, classes, (batch,), device=device)
        opt.zero_grad()
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        if host:
            loss.item()

    for _ in range(5):
        step()
    torch.cuda.synchronize() if device.startswith("cuda") else None
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += batch
    torch.cuda.synchronize() if device.startswith("cuda") else None
    print(f"images/s {n / (time.perf_counter() - t0):.1f}")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "dump":
        rest = sys.argv[4:]
        drop = "--drop-batchnorm" in rest
        onnx_out = rest[rest.index("--drop-batchnorm") + 1] if drop and len(rest) > rest.index("--drop-batchnorm") + 1 else None
        dump(sys.argv[2], sys.argv[3], drop, onnx_out)
    elif len(sys.argv) >= 5 and sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "cuda")
    elif len(sys.argv) >= 5 and sys.argv[1] == "train-host":
        train(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "cuda", host=True)
    else:
        sys.exit(__doc__)
