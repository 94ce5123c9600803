#!/usr/bin/env python3
"""Independent reference checks for ONNX files written by stretch.

Uses only `onnx`, `onnxruntime` and `numpy` (installed by scripts/setup.sh),
never stretch's own code, so it can judge what stretch writes.

  check_onnx.py check FILE...             onnx.checker (full_check=True) on each file
  check_onnx.py fill STRUCTURE OUT --seed S
                                          give every data-less initializer of a
                                          structure-only model random values
  check_onnx.py run FILE...               run each file in onnxruntime on a random
                                          input; fail unless every output is finite
  check_onnx.py compare A B [--atol 1e-5] [--seed S]
                                          run A and B in onnxruntime on the same
                                          random input(s); fail if any output
                                          differs by more than atol (max abs)
  check_onnx.py expect MODEL IN.npy OUT.npy [--rtol 1e-4]
                                          run MODEL in onnxruntime on the input
                                          IN.npy; fail unless its first output
                                          matches OUT.npy within rtol times the
                                          reference's max abs value
  check_onnx.py expect-list LIST [--rtol 1e-4]
                                          `expect` for every line "MODEL IN.npy OUT.npy"
                                          of LIST, in one process; fails after
                                          reporting every line
  check_onnx.py testdata-list LIST [--rtol 1e-3] [--atol 1e-4] [--or-original]
                                          for every line "MODEL CASE_DIR" of LIST
                                          (a case of the ONNX package's backend
                                          test data), run MODEL in onnxruntime on
                                          each CASE_DIR/test_data_set_*/input_K.pb
                                          and compare every output with the stored
                                          output_K.pb: |got - want| <= atol +
                                          rtol |want| element-wise; each MODEL
                                          must pass the full onnx.checker. With
                                          --or-original, a case whose own model
                                          onnxruntime cannot reproduce is compared
                                          with that model's onnxruntime outputs
Exit status is non-zero on any failure, with the reason on stderr.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def cmd_check(args):
    for path in args.files:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        print(f"checker ok: {path}")


def bn_positive_inputs(graph):
    """Names of BatchNormalization scale and variance initializers (must be > 0)."""
    names = set()
    for node in graph.node:
        if node.op_type == "BatchNormalization":
            names.add(node.input[1])
            names.add(node.input[4])
    return names


def has_data(t):
    return bool(t.raw_data) or any(
        len(getattr(t, f)) for f in ("float_data", "int32_data", "int64_data", "double_data")
    )


def cmd_fill(args):
    model = onnx.load(args.structure)
    rng = np.random.default_rng(args.seed)
    positive = bn_positive_inputs(model.graph)
    for i, t in enumerate(model.graph.initializer):
        refill = args.refill and t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) > 64
        if has_data(t) and not refill:
            continue
        dims = tuple(t.dims)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        if t.name in positive:
            values = rng.uniform(0.5, 1.5, dims)
        elif len(dims) >= 2:
            fan_in = int(np.prod(dims[1:])) if len(dims) > 2 else dims[-1]
            bound = np.sqrt(3.0 / max(fan_in, 1))
            values = rng.uniform(-bound, bound, dims)
        else:
            values = rng.uniform(-0.1, 0.1, dims)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(values.astype(dtype), t.name))
    onnx.save(model, args.out)
    print(f"filled: {args.out}")


def run(path, feeds):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds), sess


def make_feeds(path, seed):
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def cmd_run(args):
    for path in args.files:
        outs, _ = run(path, make_feeds(path, args.seed))
        for k, x in enumerate(outs):
            if not np.all(np.isfinite(x)):
                sys.exit(f"{path}: output {k} has non-finite values")
            print(f"{path}: output {k} shape {list(x.shape)}, finite, max abs {float(np.max(np.abs(x))):.3e}")


def cmd_compare(args):
    feeds = make_feeds(args.a, args.seed)
    out_a, _ = run(args.a, feeds)
    out_b, _ = run(args.b, feeds)
    if len(out_a) != len(out_b):
        sys.exit(f"{args.a} has {len(out_a)} outputs, {args.b} has {len(out_b)}")
    for k, (x, y) in enumerate(zip(out_a, out_b)):
        if x.shape != y.shape:
            sys.exit(f"output {k}: shape {x.shape} vs {y.shape}")
        diff = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
        scale = float(np.max(np.abs(x))) if x.size else 0.0
        print(f"output {k}: shape {list(x.shape)}, max abs diff {diff:.3e} (output scale {scale:.3e})")
        limit = max(args.atol, args.rtol * scale)
        if not diff <= limit:
            sys.exit(f"output {k}: max abs diff {diff:.3e} exceeds {limit:.1e} (atol {args.atol:.1e}, rtol {args.rtol:.1e})")
    print(f"equal within atol {args.atol:.1e} or rtol {args.rtol:.1e} of each output's scale: {args.a} vs {args.b}")


def expect_one(model, input, output, rtol, index=0):
    """None if OUTPUT matches output INDEX of onnxruntime's run of MODEL on INPUT, else the reason."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = np.load(input)
    outputs = sess.get_outputs()
    if index >= len(outputs):
        return f"{model} has {len(outputs)} outputs, no output {index}"
    (ref,) = sess.run([outputs[index].name], {sess.get_inputs()[0].name: x})
    got = np.load(output)
    if got.shape != ref.shape:
        return f"{output}: shape {list(got.shape)}, onnxruntime gives {list(ref.shape)}"
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    print(f"{output}: max abs diff {diff:.3e}, reference scale {scale:.3e}, relative {diff / max(scale, 1e-12):.3e}")
    if not diff <= rtol * max(scale, 1e-12):
        return f"{output}: differs from onnxruntime by {diff:.3e} > {rtol:.1e} x {scale:.3e}"
    return None


def cmd_expect(args):
    failures = [expect_one(args.model, args.input, out, args.rtol, k) for k, out in enumerate(args.output)]
    failures = [f for f in failures if f]
    if failures:
        sys.exit("\n".join(failures))


def cmd_expect_list(args):
    failures = []
    with open(args.list) as f:
        for line in f:
            if line.strip():
                model, input, output = line.split()
                failure = expect_one(model, input, output, args.rtol)
                if failure:
                    failures.append(failure)
    if failures:
        sys.exit("\n".join(failures))


def outputs_differ(ds, gots, wants, rtol, atol):
    """None if every output of GOTS equals WANTS within atol + rtol |want|,
    else the first difference, named after the data set DS."""
    for k, (got, want) in enumerate(zip(gots, wants)):
        if got.shape != want.shape:
            return f"{ds}: output {k} shape {list(got.shape)}, stored {list(want.shape)}"
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = np.abs(g - w) > atol + rtol * np.abs(w)
        if np.any(bad):
            diff = float(np.max(np.abs(g - w)))
            return f"{ds}: output {k} differs in {int(bad.sum())} of {w.size} values (max abs {diff:.3e})"
    return None


def testdata_one(model, case, rtol, atol, or_original=False):
    """None if MODEL passes the full ONNX checker and reproduces every stored
    output of CASE, else the reason. With OR_ORIGINAL, where onnxruntime does
    not reproduce the stored outputs from the case's own model either (the
    reference and onnxruntime read the spec differently), MODEL must give
    what onnxruntime gives for the case's model instead."""
    import glob
    import os

    import onnxruntime as ort

    def load(path):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    try:
        onnx.checker.check_model(onnx.load(model), full_check=True)
    except Exception as e:
        return f"{model}: onnx.checker (full_check) refuses it: {e}"
    ort.set_default_logger_severity(3)
    try:
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    except Exception as e:
        return f"{model}: onnxruntime refuses it: {e}"
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    if not sets:
        return f"{case}: no test_data_set_* folder"
    for ds in sets:
        count = lambda kind: len(glob.glob(os.path.join(ds, f"{kind}_*.pb")))
        inputs = [load(os.path.join(ds, f"input_{k}.pb")) for k in range(count("input"))]
        wants = [load(os.path.join(ds, f"output_{k}.pb")) for k in range(count("output"))]
        names = [i.name for i in sess.get_inputs()]
        if len(names) != len(inputs):
            return f"{ds}: {len(inputs)} stored inputs, the model takes {len(names)}"
        try:
            gots = sess.run(None, dict(zip(names, inputs)))
        except Exception as e:
            return f"{ds}: onnxruntime fails: {e}"
        if len(gots) != len(wants):
            return f"{ds}: {len(wants)} stored outputs, the model gives {len(gots)}"
        original = os.path.join(case, "model.onnx")
        if or_original and model != original:
            ref = ort.InferenceSession(original, providers=["CPUExecutionProvider"])
            theirs = ref.run(None, dict(zip([i.name for i in ref.get_inputs()], inputs)))
            if outputs_differ(ds, theirs, wants, rtol, atol):
                wants = theirs
                print(f"{case}: onnxruntime differs from the stored outputs; compared with the original model")
        failure = outputs_differ(ds, gots, wants, rtol, atol)
        if failure:
            return failure
    return None


def cmd_testdata_list(args):
    failures = []
    with open(args.list) as f:
        for line in f:
            if line.strip():
                model, case = line.split()
                failure = testdata_one(model, case, args.rtol, args.atol, args.or_original)
                print(f"{case}: {'ok' if failure is None else 'MISMATCH'}")
                if failure:
                    failures.append(failure)
    if failures:
        sys.exit("\n".join(failures))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("files", nargs="+")
    f = sub.add_parser("fill")
    f.add_argument("structure")
    f.add_argument("out")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument(
        "--refill",
        action="store_true",
        help="also redraw float initializers of more than 64 elements that hold data (degenerate test weights)",
    )
    r = sub.add_parser("run")
    r.add_argument("files", nargs="+")
    r.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("compare")
    m.add_argument("a")
    m.add_argument("b")
    m.add_argument("--atol", type=float, default=1e-5)
    m.add_argument("--rtol", type=float, default=0.0, help="or this fraction of the output's largest magnitude")
    m.add_argument("--seed", type=int, default=0)
    e = sub.add_parser("expect")
    e.add_argument("model")
    e.add_argument("input")
    e.add_argument("output", nargs="+", help="output k of the model is compared with the k-th file")
    e.add_argument("--rtol", type=float, default=1e-4)
    el = sub.add_parser("expect-list")
    el.add_argument("list")
    el.add_argument("--rtol", type=float, default=1e-4)
    t = sub.add_parser("testdata-list")
    t.add_argument("list")
    t.add_argument("--rtol", type=float, default=1e-3)
    t.add_argument("--atol", type=float, default=1e-4)
    t.add_argument("--or-original", action="store_true")
    args = p.parse_args()
    commands = {
        "check": cmd_check,
        "fill": cmd_fill,
        "run": cmd_run,
        "compare": cmd_compare,
        "expect": cmd_expect,
        "expect-list": cmd_expect_list,
        "testdata-list": cmd_testdata_list,
    }
    commands[args.cmd](args)


if __name__ == "__main__":
    main()
