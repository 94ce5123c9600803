#!/usr/bin/env python3
"""A small ONNX model whose activation meets its kink exactly, for scripts/torch/check_gradients.py.

    python scripts/torch/kink_model.py ACT OUT.onnx     (ACT: leaky, hswish, hsig, abs, elu)

Input 1x3x16x16 -> 3x3 conv (bias -1.5) -> Relu -> 3x3 conv with a zero
bias -> ACT -> 1x1 conv -> global average pool -> Gemm (10 classes). The
first ReLU leaves whole windows at zero, so the second convolution gives
exactly 0 there: the kink of LeakyRelu and Abs, and the lower bound of
HardSigmoid (alpha 0.5, beta 0), where a framework's convention for the
derivative decides the gradient. Weights from a fixed seed. Needs numpy
and onnx.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
rng=np.random.default_rng(0)
act, out = sys.argv[1], sys.argv[2]
C, HW = 8, 16
nodes=[]; inits=[]
def W(name, a): inits.append(nh.from_array(np.asarray(a,dtype=np.float32),name)); return name
def conv(x,name,ci,co,k,bias):
    ins=[x,W(name+".w",rng.normal(0,np.sqrt(2/(ci*k*k)),[co,ci,k,k]))]
    ins.append(W(name+".b",bias*np.ones(co)))
    nodes.append(h.make_node("Conv",ins,[name],kernel_shape=[k,k],pads=[k//2]*4,name=name)); return name
nodes.append(h.make_node("Relu",[conv("input","c0",3,C,3,-1.5)],["r0"],name="r0"))
y=conv("r0","c1",C,C,3,0.0)
if act=="leaky": nodes.append(h.make_node("LeakyRelu",[y],["a1"],alpha=0.1,name="a1"))
elif act=="hswish": nodes.append(h.make_node("HardSwish",[y],["a1"],name="a1"))
elif act=="hsig": nodes.append(h.make_node("HardSigmoid",[y],["a1"],alpha=0.5,beta=0.0,name="a1"))
elif act=="abs": nodes.append(h.make_node("Abs",[y],["a1"],name="a1"))
elif act=="elu": nodes.append(h.make_node("Elu",[y],["a1"],name="a1"))
y=conv("a1","c2",C,C,1,0.1)
nodes.append(h.make_node("GlobalAveragePool",[y],["gap"],name="gap"))
nodes.append(h.make_node("Flatten",["gap"],["flat"],name="flat"))
nodes.append(h.make_node("Gemm",["flat",W("fc.w",rng.normal(0,0.3,[10,C])),W("fc.b",np.zeros(10))],["logits"],transB=1,name="fc"))
g=h.make_graph(nodes,"g",[h.make_tensor_value_info("input",T.FLOAT,[1,3,HW,HW])],[h.make_tensor_value_info("logits",T.FLOAT,[1,10])],inits)
m=h.make_model(g,opset_imports=[h.make_opsetid("",17)]); onnx.checker.check_model(m); onnx.save(m, out)
