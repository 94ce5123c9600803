#!/usr/bin/env python3
"""onnxruntime with 2 intra-op threads, its threads spinning or not.

For each ONNX model given: three sessions of it (intra-op spinning on, as
onnxruntime's defaults have it; off; on with session.force_spinning_stop,
the runtime's `spin=run`), timed interleaved in rounds (one untimed run,
then a block of timed runs of each, a pause after each block), on one
random input. Prints min / p50 / p90 latency per session and the CPU time
the session's other threads used in the 20 ms after a block (read from
/proc/self/task/*/schedstat): spinning threads go on burning a core after
a run ends.

    .venv/bin/python scripts/benchmarks/ort_spinning.py MODEL.onnx... [--rounds 10] [--block 5]
"""

import argparse
import os
import threading
import time

import numpy as np
import onnxruntime as ort

MODES = {
    "spinning (onnxruntime's default)": {"session.intra_op.allow_spinning": "1"},
    "not spinning": {"session.intra_op.allow_spinning": "0"},
    "spinning within a run only": {
        "session.intra_op.allow_spinning": "1",
        "session.force_spinning_stop": "1",
    },
}


def session(model, entries):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 2
    o.inter_op_num_threads = 1
    for k, v in entries.items():
        o.add_session_config_entry(k, v)
    return ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])


def others_cpu_ms(me):
    total = 0
    for t in os.listdir("/proc/self/task"):
        if t == me:
            continue
        try:
            with open(f"/proc/self/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--block", type=int, default=5)
    a = ap.parse_args()
    me = str(threading.get_native_id())
    print(f"onnxruntime {ort.__version__}, 2 intra-op threads, {a.rounds} rounds of {a.block} runs")
    for model in a.models:
        sessions = {name: session(model, e) for name, e in MODES.items()}
        first = next(iter(sessions.values())).get_inputs()[0]
        shape = [d if isinstance(d, int) else 1 for d in first.shape]
        x = {first.name: np.random.default_rng(1).random(shape, dtype=np.float32)}
        times = {k: [] for k in sessions}
        after = {k: [] for k in sessions}
        for s in sessions.values():
            for _ in range(5):
                s.run(None, x)
            time.sleep(0.1)
        for r in range(a.rounds):
            names = list(sessions)
            names = names[r % len(names):] + names[: r % len(names)]
            for k in names:
                s = sessions[k]
                s.run(None, x)
                for _ in range(a.block):
                    t = time.perf_counter()
                    s.run(None, x)
                    times[k].append((time.perf_counter() - t) * 1e3)
                c = others_cpu_ms(me)
                time.sleep(0.02)
                after[k].append(others_cpu_ms(me) - c)
                time.sleep(0.1)
        print(f"== {model}")
        for k, v in times.items():
            v = sorted(v)
            print(
                f"{k:34} min {v[0]:8.2f} ms  p50 {v[len(v) // 2]:8.2f} ms  p90 {v[int(len(v) * 0.9)]:8.2f} ms"
                f"  other threads' CPU in the 20 ms after a block: {np.median(after[k]):5.1f} ms (median)"
            )


if __name__ == "__main__":
    main()
