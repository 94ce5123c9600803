#!/usr/bin/env python3
"""Independent reference checks for quantized ONNX files written by stretch.

Uses only `onnx`, `onnxruntime` (and its `quantization` package) and
`numpy`, installed by scripts/setup.sh; never stretch's own code.

  check_quantized.py expect MODEL IN.npy OUT.npy [--steps K]
        run MODEL in onnxruntime on IN.npy; fail unless every element of its
        first output is within K quantization steps of OUT.npy (plus 1e-6
        of the largest magnitude: float32 rounding of the values), a step being the scale of the
        DequantizeLinear that produces the output (a float
        output is compared within 1e-4 of its largest magnitude)
  check_quantized.py reference MODEL IN.npy OUT.npy [--steps K]
        as `expect`, with MODEL run in ONNX's reference evaluator
        (onnx.reference: numpy, the same arithmetic on every CPU, where
        onnxruntime's integer kernels differ by instruction set), its
        default-domain opset raised to 21 (the evaluator has no
        DequantizeLinear before 21; none of the operators stretch writes
        changes meaning from 17 to 21): for the file tract runs for a
        quantized model (graph_ir::onnx::fuse_qdq's rewrite, in
        onnxruntime's arithmetic)
  check_quantized.py scales FP32 SAMPLES.npy QUANTIZED [--tolerance 0.05]
        quantize FP32 with onnxruntime's quantize_static (QDQ, MinMax,
        uint8 activations, int8 per-channel weights) on the images in
        SAMPLES.npy ([n, C, H, W], fed one at a time), leaving float the
        nodes of processors that QUANTIZED's `stretch.precisions` metadata
        does not run in int8 (those of fp16 processors computing in float16:
        float16 initializers, Casts around each node), then compare the
        scale of every activation both files quantize: fail unless each
        differs by at most the tolerance (relative), or none is shared;
        with --validation VAL.npy also run both quantized files on those
        images and fail unless their top-1 classes agree on at least
        --min-agreement of them (default 0.99)
  check_quantized.py quantize FP32 SAMPLES.npy OUT
        write onnxruntime's quantize_static of FP32 (as `scales` makes it)
  check_quantized.py time MODEL... [--threads 2] [--runs 100]
        time each MODEL in onnxruntime on a random input, runs interleaved
        (min and median, ms; ratios to the first)
  check_quantized.py info MODEL
        print the QuantizeLinear/DequantizeLinear count and the element
        types of the initializers
  check_quantized.py batch FILE
        run each line of FILE (one of the commands above) in this one
        process; fail, listing the failed lines, after all have run

Exit status is non-zero on any failure, with the reason on stderr.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper


def initializers(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def output_step(model, name):
    """Scale of the DequantizeLinear producing graph output NAME, or None."""
    inits = initializers(model)
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] == name:
            scale = inits.get(node.input[1])
            if scale is not None:
                return float(np.max(scale))
    return None


def cmd_expect(args):
    import onnxruntime as ort

    model = onnx.load(args.model)
    so = ort.SessionOptions()
    if args.literal:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    x = np.load(args.input)
    out = sess.get_outputs()[0].name
    (ref,) = sess.run([out], {sess.get_inputs()[0].name: x})
    run = "onnxruntime with graph optimizations off" if args.literal else "onnxruntime"
    compare(args, model, out, ref, run)


def cmd_reference(args):
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(args.model)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < 21:
            opset.version = 21
    x = np.load(args.input)
    out = model.graph.output[0].name
    (ref,) = ReferenceEvaluator(model).run([out], {model.graph.input[0].name: x})
    compare(args, model, out, np.asarray(ref), "ONNX's reference evaluator")


def compare(args, model, out, ref, run):
    """Fails unless OUT.npy is within --steps of REF, the output OUT of MODEL
    as RUN computes it."""
    got = np.load(args.output)
    if got.shape != ref.shape:
        sys.exit(f"{args.output}: shape {list(got.shape)}, {run} gives {list(ref.shape)}")
    diff = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) if ref.size else 0.0
    step = output_step(model, out)
    if step is None:
        limit = 1e-4 * max(float(np.max(np.abs(ref))), 1e-12)
        what = "1e-4 of its largest magnitude (the output is float)"
    else:
        limit = args.steps * step + 1e-6 * float(np.max(np.abs(ref)))
        what = f"{args.steps} step(s) of the output scale {step:.3e}, plus float32 rounding of the values"
    print(f"{args.output}: max abs diff {diff:.3e} from {run}, limit {limit:.3e} ({what})")
    if not diff <= limit:
        sys.exit(f"{args.output}: differs from {run} by {diff:.3e} > {limit:.3e} ({what})")


class Samples:
    """onnxruntime's CalibrationDataReader over the images of SAMPLES.npy."""

    def __init__(self, name, images):
        self.name = name
        self.images = list(images)

    def get_next(self):
        if not self.images:
            return None
        return {self.name: self.images.pop(0)[None, ...].astype(np.float32)}

    def rewind(self):
        pass


def activation_scales(model):
    """Tensor quantized by each QuantizeLinear -> its scale (one value)."""
    inits = initializers(model)
    out = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":
            scale = inits.get(node.input[1])
            if scale is not None and scale.size == 1:
                out[node.input[0]] = float(scale.reshape(-1)[0])
    return out


def processor_precisions(fp32, quantized):
    """Node name -> the precision QUANTIZED's `stretch.precisions` metadata
    gives its processor in FP32 (nodes without a processor are left out)."""
    meta = {p.key: p.value for p in quantized.metadata_props}
    table = dict(kv.split("=", 1) for kv in meta.get("stretch.precisions", "").split(",") if "=" in kv)
    out = {}
    for node in fp32.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        processor = props.get("processor")
        if processor is not None:
            out[node.name] = table.get(processor, "int8")
    return out


def to_fp16(path, names):
    """Rewrites the nodes NAMES of the model at PATH (in place) to compute in
    float16, as onnxruntime runs a float16 node: float initializers they read
    stored as float16, every other float input cast to float16 and every
    output cast back to float32."""
    from onnx import TensorProto, helper, shape_inference

    model = onnx.load(path)
    inferred = shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    inits = {t.name: t for t in model.graph.initializer}
    added = set()
    nodes = []
    for node in model.graph.node:
        if node.name not in names:
            nodes.append(node)
            continue
        for i, x in enumerate(node.input):
            if x in inits:
                t = inits[x]
                if t.data_type == TensorProto.FLOAT and not (node.op_type == "Resize" and i > 0):
                    half = x + "_fp16"
                    if half not in added:
                        arr = numpy_helper.to_array(t).astype(np.float16)
                        model.graph.initializer.append(numpy_helper.from_array(arr, half))
                        added.add(half)
                    node.input[i] = half
            elif x and types.get(x) == TensorProto.FLOAT and not (node.op_type == "Resize" and i > 0):
                cast = f"{x}_to_fp16_for_{node.name}"
                nodes.append(helper.make_node("Cast", [x], [cast], to=TensorProto.FLOAT16))
                node.input[i] = cast
        outputs = list(node.output)
        for j, y in enumerate(outputs):
            node.output[j] = y + "_fp16"
        nodes.append(node)
        for y in outputs:
            nodes.append(helper.make_node("Cast", [y + "_fp16"], [y], to=TensorProto.FLOAT))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {x for n in model.graph.node for x in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    onnx.save(model, path)


def reference_quantize(fp32_path, input_name, samples, out_path, excluded=()):
    """onnxruntime's quantize_static of FP32_PATH on SAMPLES into OUT_PATH."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    quantize_static(
        fp32_path,
        out_path,
        Samples(input_name, samples),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
        nodes_to_exclude=list(excluded),
    )


def cmd_quantize(args):
    fp32 = onnx.load(args.fp32)
    reference_quantize(args.fp32, fp32.graph.input[0].name, np.load(args.samples), args.out)
    print(f"wrote {args.out} (onnxruntime quantize_static: QDQ, MinMax, uint8 activations, int8 per-channel weights)")


def cmd_time(args):
    """Times each model in onnxruntime, runs interleaved round-robin (the
    first model is the baseline of the printed ratios)."""
    import time

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    spin = len(args.model) == 1
    if not spin:
        # Idle sessions' spinning pools would take the cores from the one running.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    runs = []
    for path in args.model:
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        inp = sess.get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        for _ in range(5):
            sess.run(None, {inp.name: x})
        runs.append((path, sess, {inp.name: x}, []))
    for _ in range(args.runs):
        for _, sess, feed, times in runs:
            t = time.perf_counter()
            sess.run(None, feed)
            times.append((time.perf_counter() - t) * 1e3)
    base = float(np.median(runs[0][3]))
    for path, _, _, times in runs:
        med = float(np.median(times))
        ratio = f", {base / med:.2f}x the first's speed (median)" if len(runs) > 1 else ""
        mode = "" if spin else ", spinning off"
        print(f"{path}: onnxruntime {ort.__version__}, {args.threads} threads{mode}, {args.runs} runs: min {min(times):.3f} ms, median {med:.3f} ms (measured){ratio}")


def cmd_scales(args):
    fp32 = onnx.load(args.fp32)
    samples = np.load(args.samples)
    name = fp32.graph.input[0].name
    precisions = processor_precisions(fp32, onnx.load(args.quantized))
    excluded = [n for n, p in precisions.items() if p != "int8"]
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "reference.onnx")
        reference_quantize(args.fp32, name, samples, ref_path, excluded)
        to_fp16(ref_path, {n for n, p in precisions.items() if p == "fp16"})
        ref = activation_scales(onnx.load(ref_path))
        if args.validation:
            top1_agreement(ref_path, args.quantized, np.load(args.validation), args.min_agreement)
    ours = activation_scales(onnx.load(args.quantized))
    shared = sorted(set(ref) & set(ours))
    if not shared:
        sys.exit(f"no activation is quantized by both: ours {sorted(ours)[:5]}..., quantize_static's {sorted(ref)[:5]}...")
    worst = (0.0, "")
    bad = []
    for t in shared:
        rel = abs(ours[t] - ref[t]) / max(abs(ref[t]), 1e-12)
        worst = max(worst, (rel, t))
        if rel > args.tolerance:
            bad.append(f"{t}: ours {ours[t]:.6e}, quantize_static {ref[t]:.6e} ({100 * rel:.1f}%)")
    print(
        f"{len(shared)} activations quantized by both ({len(ours)} ours, {len(ref)} quantize_static's); "
        f"largest scale difference {100 * worst[0]:.3f}% ({worst[1]})"
    )
    if bad:
        sys.exit(f"{len(bad)} scale(s) differ by more than {100 * args.tolerance:.0f}%:\n" + "\n".join(bad[:20]))


def top1_agreement(reference, ours, images, least):
    import onnxruntime as ort

    def classes(path):
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return np.array([int(np.argmax(sess.run(None, {name: x[None, ...].astype(np.float32)})[0])) for x in images])

    a, b = classes(reference), classes(ours)
    share = float(np.mean(a == b)) if len(a) else 0.0
    print(f"top-1 agrees with quantize_static's model on {int(np.sum(a == b))} of {len(a)} validation images ({100 * share:.2f}%)")
    if not len(a) or share < least:
        sys.exit(f"top-1 agreement {100 * share:.2f}% is below {100 * least:.2f}%")


def cmd_info(args):
    model = onnx.load(args.model)
    ops = [n.op_type for n in model.graph.node]
    types = sorted({onnx.TensorProto.DataType.Name(t.data_type) for t in model.graph.initializer})
    print(
        f"{args.model}: {ops.count('QuantizeLinear')} QuantizeLinear, {ops.count('DequantizeLinear')} DequantizeLinear, "
        f"{len(ops)} nodes; initializer types {', '.join(types)}"
    )


def run_line(line):
    """Runs one batch line; returns (its printed text, its failure or None)."""
    import contextlib
    import io
    import shlex

    out = io.StringIO()
    failure = None
    with contextlib.redirect_stdout(out):
        sub = build_parser().parse_args(shlex.split(line))
        try:
            COMMANDS[sub.cmd](sub)
        except SystemExit as e:
            if e.code not in (None, 0):
                failure = f"{line}: {e.code}"
    return out.getvalue(), failure


def cmd_batch(args):
    """Runs every line of FILE as a command of this script, JOBS lines at a
    time in worker processes; prints each line's output in file order and
    fails after all of them ran, listing the lines that failed."""
    from concurrent.futures import ProcessPoolExecutor

    with open(args.file) as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    jobs = max(1, args.jobs or os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_line, lines))
    failures = []
    for text, failure in results:
        print(text, end="")
        if failure:
            failures.append(failure)
    print(f"batch: {len(lines) - len(failures)} of {len(lines)} checks passed")
    if failures:
        sys.exit("\n".join(failures))


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("expect")
    e.add_argument("model")
    e.add_argument("input")
    e.add_argument("output")
    e.add_argument("--steps", type=float, default=1.0)
    e.add_argument(
        "--literal",
        action="store_true",
        help="run the file as written (graph optimizations off: float kernels on dequantized values, "
        "the form tract runs) instead of onnxruntime's fused integer kernels",
    )
    r = sub.add_parser("reference")
    r.add_argument("model")
    r.add_argument("input")
    r.add_argument("output")
    r.add_argument("--steps", type=float, default=1.0)
    s = sub.add_parser("scales")
    s.add_argument("fp32")
    s.add_argument("samples")
    s.add_argument("quantized")
    s.add_argument("--tolerance", type=float, default=0.05)
    s.add_argument("--validation")
    s.add_argument("--min-agreement", type=float, default=0.99)
    q = sub.add_parser("quantize")
    q.add_argument("fp32")
    q.add_argument("samples")
    q.add_argument("out")
    t = sub.add_parser("time")
    t.add_argument("model", nargs="+")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--runs", type=int, default=100)
    i = sub.add_parser("info")
    i.add_argument("model")
    b = sub.add_parser("batch")
    b.add_argument("file")
    b.add_argument("--jobs", type=int, default=0, help="worker processes (default: one per core)")
    return p


COMMANDS = {
    "expect": cmd_expect,
    "reference": cmd_reference,
    "scales": cmd_scales,
    "quantize": cmd_quantize,
    "time": cmd_time,
    "info": cmd_info,
    "batch": cmd_batch,
}


def main():
    args = build_parser().parse_args()
    COMMANDS[args.cmd](args)


if __name__ == "__main__":
    main()
