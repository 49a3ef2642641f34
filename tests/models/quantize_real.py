"""Quantizes one of the project's real models (a float model refilled by
`rivet::int8_models`) with ORT's own quantization tool (`onnxruntime.quantization`, in the
pinned wheel), as a user would:

    quantize_real.py static IN.onnx OUT.onnx    # QDQ, uint8 activations, int8 weights per channel
    quantize_real.py qoperator IN.onnx OUT.onnx # the same as QLinear ops (QOperator format)
    quantize_real.py dynamic IN.onnx OUT.onnx   # MatMulInteger, uint8 activations, int8 weights

Static quantization calibrates on 4 seeded random inputs (normal, the float input's own
shape). Deterministic: the same input model gives the same bytes. Nothing is downloaded.
"""

import os
import sys

import numpy as np
import onnx
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)


class Images(CalibrationDataReader):
    def __init__(self, model):
        rng = np.random.default_rng(20261203)
        inits = {i.name for i in model.graph.initializer}
        feeds = []
        for _ in range(4):
            feed = {}
            for i in model.graph.input:
                if i.name in inits:
                    continue
                shape = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
                feed[i.name] = rng.standard_normal(shape).astype(np.float32)
            feeds.append(feed)
        self.feeds = iter(feeds)

    def get_next(self):
        return next(self.feeds, None)


def main():
    mode, src, dst = sys.argv[1:4]
    tmp = f"{dst}.{os.getpid()}.part"
    if mode in ("static", "qoperator"):
        model = onnx.load(src)
        quantize_static(
            src,
            tmp,
            Images(model),
            quant_format=QuantFormat.QDQ if mode == "static" else QuantFormat.QOperator,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
        )
    elif mode == "dynamic":
        quantize_dynamic(src, tmp, weight_type=QuantType.QInt8)
    else:
        sys.exit(f"unknown mode {mode}")
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
