"""Writes small ONNX models covering every operator the importer lowers or
folds, as seeds for the `import` fuzz target (the fixtures hold only a few op
types). Usage: python3 fuzz/make_seeds.py OUT_DIR (needs the `onnx` package).
"""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def model(name, nodes, inits, out_shape, opset=17, in_shape=(1, 2, 4, 4)):
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def cnn():
    """Conv, BatchNormalization, pooling and a classifier head."""
    n = helper.make_node
    return model(
        "cnn",
        [
            n("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
            n("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], name="bn"),
            n("Relu", ["bn"], ["r"], name="relu"),
            n("MaxPool", ["r"], ["mp"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
            n("Conv", ["mp", "w2"], ["c2"], name="dw", group=4, auto_pad="SAME_UPPER", kernel_shape=[3, 3]),
            n("AveragePool", ["c2"], ["ap"], name="avgpool", kernel_shape=[2, 2], ceil_mode=1),
            n("Add", ["ap", "ap"], ["res"], name="add"),
            n("GlobalAveragePool", ["res"], ["gap"], name="gap"),
            n("Flatten", ["gap"], ["f"], name="flatten", axis=1),
            n("Gemm", ["f", "fc", "fcb"], ["y"], name="fc", transB=1),
        ],
        [
            const("w", np.ones((4, 2, 3, 3))),
            const("b", np.zeros(4)),
            const("s", np.ones(4)),
            const("o", np.zeros(4)),
            const("m", np.zeros(4)),
            const("v", np.ones(4)),
            const("w2", np.ones((4, 1, 3, 3))),
            const("fc", np.ones((3, 4))),
            const("fcb", np.zeros(3)),
        ],
        [1, 3],
    )


def activations():
    """Element-wise ops, Clip with constant bounds, Identity and Dropout."""
    n = helper.make_node
    return model(
        "activations",
        [
            n("Clip", ["x", "lo", "hi"], ["a"], name="clip"),
            n("Sigmoid", ["a"], ["b"], name="sigmoid"),
            n("Tanh", ["b"], ["c"], name="tanh"),
            n("HardSigmoid", ["c"], ["d"], name="hsig", alpha=0.1),
            n("HardSwish", ["d"], ["e"], name="hswish"),
            n("Identity", ["e"], ["f"], name="identity"),
            n("Dropout", ["f"], ["g"], name="dropout"),
            n("Sub", ["g", "k"], ["h"], name="sub"),
            n("Mul", ["h", "k"], ["i"], name="mul"),
            n("Div", ["i", "k"], ["y"], name="div"),
        ],
        [const("lo", 0.0), const("hi", 6.0), const("k", [2.0])],
        [1, 2, 4, 4],
    )


def layout():
    """Transpose, Split, Slice, Pad, Concat, ReduceMean, MatMul."""
    n = helper.make_node
    i64 = np.int64
    return model(
        "layout",
        [
            n("Transpose", ["x"], ["t"], name="transpose", perm=[0, 1, 3, 2]),
            n("Split", ["t", "sizes"], ["s0", "s1"], name="split", axis=1),
            n("Slice", ["s0", "starts", "ends", "axes", "steps"], ["sl"], name="slice"),
            n("Pad", ["sl", "pads", "pv"], ["p"], name="pad", mode="constant"),
            n("Concat", ["p", "s1"], ["cat"], name="concat", axis=1),
            n("ReduceMean", ["cat", "raxes"], ["rm"], name="mean", keepdims=1),
            n("MatMul", ["rm", "mm"], ["y"], name="matmul"),
        ],
        [
            const("sizes", [1, 1], i64),
            const("starts", [0], i64),
            const("ends", [2], i64),
            const("axes", [2], i64),
            const("steps", [1], i64),
            const("pads", [0, 0, 1, 0, 0, 0, 1, 0], i64),
            const("pv", 0.0),
            const("raxes", [2], i64),
            const("mm", np.ones((4, 5))),
        ],
        [1, 2, 1, 5],
        opset=18,
    )


def shape_arithmetic():
    """A constant subgraph folded at import: Shape, Gather, Unsqueeze, Concat,
    Cast, ConstantOfShape, Squeeze, arithmetic and Reshape."""
    n = helper.make_node
    i64 = np.int64
    return model(
        "shape_arithmetic",
        [
            n("Shape", ["x"], ["shape"], name="shape"),
            n("Gather", ["shape", "zero"], ["batch"], name="gather", axis=0),
            n("Unsqueeze", ["batch", "axis0"], ["batch1"], name="unsqueeze"),
            n("Mul", ["batch1", "one"], ["batch2"], name="mul"),
            n("Add", ["batch2", "zero1"], ["batch3"], name="add"),
            n("Div", ["batch3", "one"], ["batch4"], name="div"),
            n("Sub", ["batch4", "zero1"], ["batch5"], name="sub"),
            n("Concat", ["batch5", "minus1"], ["target"], name="concat", axis=0),
            n("Cast", ["target"], ["target64"], name="cast", to=TensorProto.INT64),
            n("ConstantOfShape", ["target_len"], ["ones"], name="cos", value=helper.make_tensor("v", 7, [1], [1])),
            n("Squeeze", ["ones", "axis0"], ["scalar"], name="squeeze"),
            n("Constant", [], ["c"], name="constant", value_ints=[1]),
            n("Reshape", ["x", "target64"], ["y"], name="reshape"),
        ],
        [
            const("zero", 0, i64),
            const("axis0", [0], i64),
            const("one", [1], i64),
            const("zero1", [0], i64),
            const("minus1", [-1], i64),
            const("target_len", [1], i64),
        ],
        [1, 32],
    )


def old_opset():
    """Opset 9 forms: attribute-based Pad, Slice and Clip."""
    n = helper.make_node
    return model(
        "old_opset",
        [
            n("Pad", ["x"], ["p"], name="pad", pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="edge"),
            n("Slice", ["p"], ["s"], name="slice", starts=[0], ends=[4], axes=[2]),
            n("Clip", ["s"], ["y"], name="clip", min=0.0, max=6.0),
        ],
        [],
        [1, 2, 4, 6],
        opset=9,
    )


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for make in [cnn, activations, layout, shape_arithmetic, old_opset]:
        onnx.save(make(), out / f"seed_{make.__name__}.onnx")


if __name__ == "__main__":
    main()
