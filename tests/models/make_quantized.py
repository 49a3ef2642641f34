"""Makes the quantized test models in this folder from float models with seeded random
weights, with ORT's own quantization tool (`onnxruntime.quantization`, in the pinned
wheel). Run from the repository root with the project's venv:

    .venv/bin/python tests/models/make_quantized.py

The outputs are committed; the tests and the bench read them and never run this.

- qdq_cnn.onnx: a small residual CNN (3x64x64 -> 10 classes), static QDQ quantization,
  uint8 activations and per-channel int8 weights (the u8s8 kernels ORT has on x86), calibrated on seeded random images.
- dynamic_mlp.onnx: a transformer feed-forward block on [1, 64, 128] (MatMul, Add, Relu,
  MatMul, Add, residual Add), dynamic quantization (MatMulInteger with uint8 activations).
"""

import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20261201)


def weight(name, shape, fan_in):
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)


def cnn():
    inits, nodes = [], []

    def conv(x, cin, cout, k, name, relu=True):
        inits.append(weight(f"{name}_w", (cout, cin, k, k), cin * k * k))
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}_b"))
        pad = k // 2
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[pad] * 4))
        if not relu:
            return f"{name}_c"
        nodes.append(helper.make_node("Relu", [f"{name}_c"], [f"{name}_r"]))
        return f"{name}_r"

    h = conv("x", 3, 32, 3, "c1")
    h = conv(h, 32, 32, 3, "c2")
    r = conv(h, 32, 32, 3, "c3", relu=False)
    nodes.append(helper.make_node("Add", [h, r], ["res"]))
    nodes.append(helper.make_node("Relu", ["res"], ["res_r"]))
    nodes.append(helper.make_node("MaxPool", ["res_r"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]))
    h = conv("pool", 32, 64, 1, "c4")
    nodes.append(helper.make_node("GlobalAveragePool", [h], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    inits.append(weight("fc_w", (10, 64), 64))
    inits.append(numpy_helper.from_array(np.zeros(10, np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1))
    graph = helper.make_graph(
        nodes,
        "qdq_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mlp():
    d, ff = 128, 512
    inits = [
        weight("w1", (d, ff), d),
        numpy_helper.from_array((0.1 * rng.standard_normal(ff)).astype(np.float32), "b1"),
        weight("w2", (ff, d), ff),
        numpy_helper.from_array((0.1 * rng.standard_normal(d)).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["h4"]),
        helper.make_node("Add", ["x", "h4"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamic_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, d])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class Images(CalibrationDataReader):
    def __init__(self):
        self.batches = iter([{"x": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.batches, None)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        float_cnn = os.path.join(tmp, "cnn.onnx")
        onnx.save(cnn(), float_cnn)
        quantize_static(
            float_cnn,
            os.path.join(HERE, "qdq_cnn.onnx"),
            Images(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
        float_mlp = os.path.join(tmp, "mlp.onnx")
        onnx.save(mlp(), float_mlp)
        quantize_dynamic(float_mlp, os.path.join(HERE, "dynamic_mlp.onnx"), weight_type=QuantType.QUInt8)
    for name in ["qdq_cnn.onnx", "dynamic_mlp.onnx"]:
        m = onnx.load(os.path.join(HERE, name))
        ops = {}
        for n in m.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        print(name, os.path.getsize(os.path.join(HERE, name)), "bytes", ops)


if __name__ == "__main__":
    main()
