#!/usr/bin/env python3
"""Check a stretch bundle's LiteRT (.tflite) files against its ONNX files.

  check_litert.py BUNDLE_DIR... [--json OUT.json] [--rtol 1e-5] [--steps 1] [--chain-steps K]

Uses only numpy, onnx/onnxruntime and LiteRT's own interpreter
(ai_edge_litert), never stretch's code. Every file it reads must lie inside
BUNDLE_DIR and match bundle.json's sha256 and size.

1. Runs the ONNX subgraph files in onnxruntime (CPU, one thread) in manifest
   order on the bundle's reference inputs, keeping every tensor.
2. Per subgraph: feeds its .tflite file (LiteRT interpreter, one thread) the
   ONNX chain's inputs of that subgraph converted to the file's form (NCHW ->
   NHWC for layout "nhwc"; float <-> int8 through scale/zero point, round half
   to even, clamp; u8 -> i8 through the real value, i.e. q - 128 at equal
   scales) and compares each output, converted back, with the ONNX output:
   - integer output (u8/i8): max |q_tflite - q_onnx| <= --steps steps;
   - float output made by a DequantizeLinear (or an i8 .tflite output):
     max |a - b| / scale <= --steps;
   - other float output: max |a - b| <= --rtol * max |onnx|; for a subgraph
     of an fp16 processor (ONNX computes in float16, the .tflite in float32
     with float16 weights) the bundle's fp16 tolerance 1/256 instead.
3. Whole chain: runs every .tflite in order on its own earlier outputs
   (hand-offs converted through the real value where producer and consumer
   differ in dtype or quantization) and compares the model outputs with the
   ONNX chain's (rules above; 1/256 if any processor is fp16) and with the
   bundle's reference outputs: max |a - ref| <= atol + (rtol + float
   tolerance) * max |ref| (atol, rtol from bundle.json's reference).

Prints one line per subgraph and one for the chain; exit 0 if all pass, 1 on
a failure (one-line reason on stderr), 2 if the bundle has no .tflite files.
"""
import argparse
import hashlib
import io
import json
import os
import sys

import numpy as np

SCHEMA = "stretch.litert-check/1"
FP16_TOL = 1.0 / 256
NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "u8": np.uint8, "i8": np.int8,
      "i16": np.int16, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
QRANGE = {"u8": (0, 255), "i8": (-128, 127)}


class Fail(Exception):
    pass


def bundle_file(root, ref, what):
    """Path and bytes of a file the manifest names, checked against its entry."""
    name = ref["file"]
    if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
        raise Fail(f"{what} names {name!r}: not a relative path inside the bundle")
    path = os.path.join(root, name)
    if not os.path.realpath(path).startswith(os.path.realpath(root) + os.sep):
        raise Fail(f"{what} names {name!r}, which leads outside the bundle")
    try:
        with open(path, "rb") as f:
            data = f.read(int(ref["bytes"]) + 1)
    except OSError as e:
        raise Fail(f"{name}: cannot read it ({e.strerror})")
    if len(data) != ref["bytes"] or hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise Fail(f"{name}: altered since export (size or sha256 differs from bundle.json {what})")
    return path, data


def onnx_quant(model_bytes, quant, dq_step):
    """Collect (scale, zero point) of each tensor a QuantizeLinear makes or a
    DequantizeLinear reads, and the scale of each DequantizeLinear output."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load_from_string(model_bytes)
    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            consts.update({n.output[0]: numpy_helper.to_array(a.t) for a in n.attribute if a.name == "value"})
    for n in m.graph.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or len(n.input) < 2:
            continue
        s = consts.get(n.input[1])
        z = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if s is None or s.size != 1:
            continue
        scale, zp = np.float32(s.reshape(-1)[0]), int(z.reshape(-1)[0]) if z is not None else 0
        quant.setdefault(n.output[0] if n.op_type == "QuantizeLinear" else n.input[0], (scale, zp))
        if n.op_type == "DequantizeLinear":
            dq_step.setdefault(n.output[0], scale)


def lite_q(t):
    q = t.get("quantization")
    return (np.float32(q["scale"]), int(q["zero_point"])) if q else None


def convert(x, dt_from, q_from, dt_to, q_to):
    """x of dtype dt_from (quantized by q_from) as dtype dt_to (q_to)."""
    if dt_from in QRANGE and dt_to in QRANGE and q_from[0] == q_to[0]:
        y = x.astype(np.int32) - q_from[1] + q_to[1]
    else:
        real = ((x.astype(np.int32) - q_from[1]).astype(np.float32) * q_from[0]
                if dt_from in QRANGE else x.astype(np.float32))
        if dt_to not in QRANGE:
            return real.astype(NP[dt_to])
        y = np.rint(real / q_to[0]) + q_to[1]
    return np.clip(y, *QRANGE[dt_to]).astype(NP[dt_to])


def to_lite(x, dt, q, t):
    if t["layout"] == "nhwc" and x.ndim != 4:
        raise Fail(f"`{t['name']}` has layout nhwc but rank {x.ndim} in ONNX")
    y = convert(x, dt, q, t["dtype"], lite_q(t))
    y = y.transpose(0, 2, 3, 1) if t["layout"] == "nhwc" else y
    if list(y.shape) != list(t["shape"]):
        raise Fail(f"`{t['name']}` is {list(x.shape)} in ONNX, {list(y.shape)} as {t['layout']}, "
                   f"but the manifest gives the .tflite shape {t['shape']}")
    return np.ascontiguousarray(y)


def from_lite(y, t, dt, q):
    y = y.transpose(0, 3, 1, 2) if t["layout"] == "nhwc" else y
    return convert(y, t["dtype"], lite_q(t), dt, q)


def check_detail(d, t, io_):
    """LiteRT's own view of a boundary tensor agrees with the manifest's."""
    q, got_q, bad = lite_q(t), d.get("quantization", (0.0, 0)), []
    if d["dtype"] != NP[t["dtype"]]:
        bad.append(f"dtype {np.dtype(d['dtype']).name} (manifest {t['dtype']})")
    if list(d["shape"]) != list(t["shape"]):
        bad.append(f"shape {list(d['shape'])} (manifest {t['shape']})")
    if q and (not np.isclose(got_q[0], q[0], rtol=1e-6, atol=0) or got_q[1] != q[1]):
        bad.append(f"scale {got_q[0]:.9g}, zero point {got_q[1]} (manifest {q[0]:.9g}, {q[1]})")
    if bad:
        raise Fail(f"LiteRT's {io_} `{t['name']}` has " + ", ".join(bad))


def run_lite(path, tm, feeds):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=path, num_threads=1)
    it.allocate_tensors()
    ins = {d["name"]: d for d in it.get_input_details()}
    outs = {d["name"]: d for d in it.get_output_details()}
    for io_, have, want in (("inputs", ins, tm["inputs"]), ("outputs", outs, tm["outputs"])):
        names = [t["name"] for t in want]
        if sorted(have) != sorted(names):
            raise Fail(f"LiteRT names its {io_} {sorted(have)}, the manifest {names}")
        for t in want:
            check_detail(have[t["name"]], t, io_[:-1])
    for t in tm["inputs"]:
        it.set_tensor(ins[t["name"]]["index"], feeds[t["name"]])
    it.invoke()
    return {t["name"]: it.get_tensor(outs[t["name"]]["index"]).copy() for t in tm["outputs"]}


def compare(name, got, want, dt, q, step, tol, steps):
    """One output's figures (got, want in ONNX form), with a hint on failure."""
    r = {"tensor": name}
    if got.shape != want.shape:
        return dict(r, kind="shape", max_abs=None, ok=False, why=f"shape {list(got.shape)} != {list(want.shape)}")
    a, b = got.astype(np.float64), want.astype(np.float64)
    if dt in QRANGE or step is not None:
        unit = 1.0 if dt in QRANGE else float(step)
        dev, limit = np.abs(a - b) / unit, steps + (0 if dt in QRANGE else 1e-3)
        st = float(np.max(dev, initial=0))
        r = dict(r, kind="steps", max_abs=st * unit * (float(q[0]) if dt in QRANGE else 1.0), steps=st, tol=steps)
    else:
        mag = float(np.max(np.abs(b), initial=0))
        dev, limit = np.abs(a - b) / (mag if mag > 0 else 1.0), tol
        rel = float(np.max(dev, initial=0))
        r = dict(r, kind="rel", max_abs=rel * (mag if mag > 0 else 1.0), rel=rel, tol=tol)
        unit = mag if mag > 0 else 1.0
    r["ok"] = bool(np.all(dev <= limit))
    if not r["ok"]:
        hint = f"{int(np.sum(~(dev <= limit)))} of {dev.size} elements beyond it"
        off = (a - b) / unit
        if r["kind"] == "steps" and off.size and np.ptp(off) < 1e-3 and abs(off.flat[0]) >= 1:
            hint += f"; every element off by {off.min():+g} steps (a zero point?)"
        elif np.all(np.abs(np.sort(a, axis=None) - np.sort(b, axis=None)) / unit <= limit):
            hint += "; the same values in other positions (a layout/transpose?)"
        r["hint"] = hint
    return r


def figure(c):
    if c["kind"] == "shape":
        return c["why"]
    f = f"steps {c['steps']:.3g} (<= {c['tol']:g})" if c["kind"] == "steps" else f"rel {c['rel']:.3g} (<= {c['tol']:.3g})"
    return f + (f" [{c['hint']}]" if "hint" in c else "")


def line(label, cs, ok):
    worst = max((c["max_abs"] for c in cs if c["max_abs"] is not None), default=float("nan"))
    figs = "; ".join((f"{c['tensor']}: " if len(cs) > 1 else "") + figure(c) for c in cs)
    return f"{label}  max|d| {worst:.3e}  {figs}  {'PASS' if ok else 'FAIL'}"


def where(s):
    tm = s.get("tflite_model")
    return f"{s['name']} ({tm['model']['file']})" if tm else s["name"]


class Check:
    """A bundle, its ONNX chain's tensors, and the figures found so far."""

    def __init__(self, root, m, args):
        self.root, self.m, self.a = root, m, args
        self.precision = {p["name"]: p["precision"] for p in m["processors"]}
        self.files, self.quant, self.dq_step, self.dtype, self.env = {}, {}, {}, {}, {}
        self.failures = []
        self.report = {"schema": SCHEMA, "bundle": root, "model": m.get("model"), "subgraphs": [], "chain": None}
        for i, s in enumerate(m["subgraphs"]):
            self.files[s["name"]] = bundle_file(root, s["model"], f"subgraphs[{i}].model")
            if s.get("tflite_model"):
                self.files[s["name"] + ".tflite"] = bundle_file(root, s["tflite_model"]["model"], f"subgraphs[{i}].tflite_model")
        load = lambda what: [np.load(io.BytesIO(bundle_file(root, r, f"reference.{what}[{i}]")[1]), allow_pickle=False)
                             for i, r in enumerate(m["reference"][what])]
        self.refs_in, self.refs_out = load("inputs"), load("outputs")

    def onnx_chain(self):
        import onnxruntime as ort
        for t, x in zip(self.m["inputs"], self.refs_in):
            dt = self.dtype[t["name"]] = t["dtype"]
            self.env[t["name"]] = np.clip(np.rint(x), *QRANGE[dt]).astype(NP[dt]) if dt in QRANGE else x.astype(NP[dt])
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        for s in self.m["subgraphs"]:
            data = self.files[s["name"]][1]
            onnx_quant(data, self.quant, self.dq_step)
            sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            outs = sess.run([t["name"] for t in s["outputs"]], {t["name"]: self.env[t["name"]] for t in s["inputs"]})
            for t, y in zip(s["outputs"], outs):
                self.env[t["name"]], self.dtype[t["name"]] = y, t["dtype"]

    def oq(self, name, t):
        """The ONNX tensor's quantization, or the contract's (u8 zp = i8 zp + 128)."""
        dt = self.dtype[name]
        if dt not in QRANGE or name in self.quant:
            return self.quant.get(name)
        if lite_q(t) is None:
            raise Fail(f"no scale/zero point for the {dt} tensor `{name}` in the ONNX files or the manifest")
        return (lite_q(t)[0], lite_q(t)[1] + (128 if dt == "u8" and t["dtype"] == "i8" else 0))

    def outputs(self, louts, got, tol, steps=None):
        cs = []
        for t in louts:
            n, dt = t["name"], self.dtype[t["name"]]
            step = None if dt in QRANGE else self.dq_step.get(n, lite_q(t)[0] if t["dtype"] in QRANGE else None)
            y = from_lite(got[n], t, dt, self.oq(n, t))
            cs.append(compare(n, y, self.env[n], dt, self.oq(n, t), step, tol, self.a.steps if steps is None else steps))
        return cs

    def subgraph(self, s):
        """Step 3: the subgraph's .tflite on the ONNX chain's inputs."""
        tm, prec = s.get("tflite_model"), self.precision.get(s["processor"], "?")
        label = f"{s['name']:<12} {s['processor']:<5} {prec:<5}"
        rec = {"name": s["name"], "processor": s["processor"], "precision": prec,
               "file": tm["model"]["file"] if tm else None, "outputs": [], "ok": False}
        self.report["subgraphs"].append(rec)
        try:
            if not tm:
                raise Fail("no .tflite file")
            feeds = {t["name"]: to_lite(self.env[t["name"]], self.dtype[t["name"]], self.oq(t["name"], t), t)
                     for t in tm["inputs"]}
            got = run_lite(self.files[s["name"] + ".tflite"][0], tm, feeds)
            rec["outputs"] = self.outputs(tm["outputs"], got, FP16_TOL if prec == "fp16" else self.a.rtol)
        except Fail as e:
            rec["why"] = f"{where(s)}: {e}"
            self.failures.append(rec["why"])
            return print(f"{label}  {rec['why']}  FAIL")
        rec["ok"] = all(c["ok"] for c in rec["outputs"])
        print(line(label, rec["outputs"], rec["ok"]))
        for c in rec["outputs"]:
            if not c["ok"]:
                self.failures.append(f"{where(s)}: output `{c['tensor']}` {figure(c)}")

    def chain(self):
        """Step 4: every .tflite on its own earlier outputs."""
        rec = self.report["chain"] = {"outputs": [], "reference": [], "ok": False}
        fp16 = any(self.precision.get(s["processor"]) == "fp16" for s in self.m["subgraphs"])
        tol = FP16_TOL if fp16 else self.a.rtol
        lite = {}  # name -> (tflite array, its LiteTensor)
        try:
            for s in self.m["subgraphs"]:
                if not s.get("tflite_model"):
                    raise Fail("no .tflite file")
                feeds = {}
                for t in s["tflite_model"]["inputs"]:
                    n = t["name"]
                    if n in lite:  # a hand-off: the producer's tensor, in this file's form
                        y, pt = lite[n]
                        feeds[n] = to_lite(y.transpose(0, 3, 1, 2) if pt["layout"] == "nhwc" else y, pt["dtype"], lite_q(pt), t)
                    else:
                        feeds[n] = to_lite(self.env[n], self.dtype[n], self.oq(n, t), t)
                got = run_lite(self.files[s["name"] + ".tflite"][0], s["tflite_model"], feeds)
                lite.update({t["name"]: (got[t["name"]], t) for t in s["tflite_model"]["outputs"]})
        except Fail as e:
            rec["why"] = f"{where(s)}: {e}"
            self.failures.append(f"whole chain: {rec['why']}")
            return print(f"{'whole chain':<24}  {rec['why']}  FAIL")
        outs = [lite[t["name"]][1] for t in self.m["outputs"]]
        rec["outputs"] = self.outputs(outs, {t["name"]: lite[t["name"]][0] for t in outs}, tol, self.a.chain_steps)
        ref = self.m["reference"]
        for t, r in zip(outs, self.refs_out):
            n = t["name"]
            for who, y in (("litert", from_lite(lite[n][0], t, self.dtype[n], self.oq(n, t))), ("onnx", self.env[n])):
                d = float(np.max(np.abs(y.astype(np.float64) - r), initial=0)) if y.shape == r.shape else float("inf")
                allowed = ref["atol"] * max(1.0, self.a.chain_steps) + (ref["rtol"] + tol) * float(np.max(np.abs(r), initial=0))
                rec["reference"].append({"tensor": n, "run": who, "max_abs": d, "tol": allowed, "ok": d <= allowed})
        judged = rec["outputs"] + [c for c in rec["reference"] if c["run"] == "litert"]
        rec["ok"] = all(c["ok"] for c in judged)
        refs = "; ".join(f"{c['run']} vs reference {c['max_abs']:.3e} (<= {c['tol']:.3e})" for c in rec["reference"])
        print(line(f"{'whole chain':<24}", rec["outputs"], rec["ok"]) + f"  [{refs}; onnx's is for information]")
        for c in judged:
            if not c["ok"]:
                why = figure(c) if "kind" in c else f"differs from the reference by {c['max_abs']:.3e} > {c['tol']:.3e}"
                self.failures.append(f"whole chain: output `{c['tensor']}` {why}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", nargs="+", help="bundle directories (bundle.json and its files)")
    ap.add_argument("--json", help=f"write the figures as JSON (schema {SCHEMA}; one bundle only)")
    ap.add_argument("--rtol", type=float, default=1e-5,
                    help="float outputs: max |a - b| relative to max |onnx| (default 1e-5; fp16 processors: 1/256)")
    ap.add_argument("--steps", type=float, default=1, help="quantized outputs of each subgraph: integer steps (default 1)")
    ap.add_argument("--chain-steps", type=float, default=None,
                    help="quantized outputs of the whole chain, and its distance to the reference in steps of the "
                         "reference's atol (default: --steps); rounding differences of two int8 kernels compound "
                         "through the subgraphs after them")
    a = ap.parse_args()
    if a.chain_steps is None:
        a.chain_steps = a.steps
    if a.json and len(a.bundle) > 1:
        sys.exit("check_litert: --json takes one bundle")
    worst = 0
    for d in a.bundle:
        if len(a.bundle) > 1:
            print(f"== {d}")
        worst = max(worst, check(d, a))
    return worst


def check(bundle, a):
    """Checks one bundle: 0 when every comparison passes, 1 when one fails, 2 without .tflite files."""
    try:
        with open(os.path.join(bundle, "bundle.json")) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_litert: {bundle}: cannot read bundle.json ({e})", file=sys.stderr)
        return 1
    if not any(s.get("tflite_model") for s in m["subgraphs"]):
        print(f"{bundle} has no .tflite files (export with --format onnx,tflite)", file=sys.stderr)
        return 2
    try:
        c = Check(bundle, m, a)
        c.onnx_chain()
    except Fail as e:
        print(f"check_litert: {e}", file=sys.stderr)
        return 1
    for s in m["subgraphs"]:
        c.subgraph(s)
    c.chain()
    c.report["ok"] = not c.failures
    if a.json:
        with open(a.json, "w") as f:
            json.dump(c.report, f, indent=1)
    if c.failures:
        more = f" (and {len(c.failures) - 1} more)" if len(c.failures) > 1 else ""
        print(f"check_litert: {bundle}: {c.failures[0]}{more}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
