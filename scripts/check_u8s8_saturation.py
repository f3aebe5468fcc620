"""Check dml_ep's emulation of onnxruntime's saturating uint8 x int8 GEMMs against the real thing.

On CPUs with AVX2 but no VNNI, MLAS sums pairs of uint8 x int8 products into int16 with saturation
(see docs/onnxruntime_arithmetic.md). A VNNI machine cannot show it, but QEMU's user-mode emulator
can present a Haswell CPU to onnxruntime, whose MLAS then picks its AVX2 kernels:

    apt-get install qemu-user
    qemu-x86_64 -cpu Haswell .venv/bin/python scripts/check_u8s8_saturation.py

Random QLinearConv (group 1, grouped, depthwise, 1-D; odd and even channel counts) and
QLinearMatMul models with full-range codes are run by onnxruntime and by dml_ep with
``arithmetic="onnxruntime", u8s8_saturation=True``; the script prints, per case, how many outputs
onnxruntime's saturation changed and whether dml_ep matches every one. Exit status 1 on a mismatch.
"""

from __future__ import annotations

import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.reference import cpu_session

CONV_CASES = {
    "conv 3x3, 8 channels": dict(x=(1, 8, 6, 6), w=(8, 8, 3, 3), pads=[1, 1, 1, 1]),
    "conv 3x3, 3 channels (pairs straddle taps)": dict(x=(1, 3, 6, 6), w=(4, 3, 3, 3), pads=[1, 1, 1, 1]),
    "conv 1x1, 16 -> 16 (symmetric-conv path)": dict(x=(1, 16, 5, 5), w=(16, 16, 1, 1)),
    "conv grouped, 4 groups of 3": dict(x=(1, 12, 5, 5), w=(8, 3, 3, 3), group=4),
    "conv depthwise (exact kernel)": dict(x=(1, 16, 5, 5), w=(16, 1, 3, 3), group=16),
    "conv 1-D, stride 2": dict(x=(2, 5, 9), w=(6, 5, 3), strides=[2]),
}
MATMUL_CASES = {
    "matmul 7x33 @ 33x5": ((7, 33), (33, 5)),
    "matmul batched 2x4x16 @ 16x8": ((2, 4, 16), (16, 8)),
}


def model(node, inputs, output, initializers):
    graph = helper.make_graph([node], node.op_type, inputs, [output], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def conv_case(rng, x_shape, w_shape, **attributes):
    # Large weights and activations, so that pairs saturate often; zero weight zero point (symmetric).
    w = rng.integers(60, 128, w_shape).astype(np.int8) * rng.choice(np.array([-1, 1], np.int8), w_shape)
    inits = [
        numpy_helper.from_array(np.float32(0.05), "xs"), numpy_helper.from_array(np.uint8(7), "xz"),
        numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "ws"),
        numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.float32(40.0), "ys"),
        numpy_helper.from_array(np.uint8(128), "yz"),
    ]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], **attributes)
    x = rng.integers(150, 256, x_shape).astype(np.uint8)
    rank = len(x_shape)
    return model(node, [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)],
                 helper.make_tensor_value_info("y", TensorProto.UINT8, [None] * rank), inits), {"x": x}


def matmul_case(rng, a_shape, b_shape):
    b = rng.integers(60, 128, b_shape).astype(np.int8) * rng.choice(np.array([-1, 1], np.int8), b_shape)
    inits = [
        numpy_helper.from_array(np.float32(0.05), "as"), numpy_helper.from_array(np.uint8(3), "az"),
        numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.float32(0.01), "bs"),
        numpy_helper.from_array(np.int8(0), "bz"), numpy_helper.from_array(np.float32(20.0), "ys"),
        numpy_helper.from_array(np.uint8(128), "yz"),
    ]
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    a = rng.integers(150, 256, a_shape).astype(np.uint8)
    return model(node, [helper.make_tensor_value_info("a", TensorProto.UINT8, a_shape)],
                 helper.make_tensor_value_info("y", TensorProto.UINT8, [None] * len(a_shape)), inits), {"a": a}


def main() -> int:
    rng = np.random.default_rng(0)
    cases = {name: conv_case(rng, spec.pop("x"), spec.pop("w"), **spec) for name, spec in CONV_CASES.items()}
    cases.update({name: matmul_case(rng, *shapes) for name, shapes in MATMUL_CASES.items()})
    failed = False
    for name, (onnx_model, feeds) in cases.items():
        expected = cpu_session(onnx_model).run(None, feeds)[0]
        saturated = dml_ep.InferenceSession(onnx_model, arithmetic="onnxruntime", u8s8_saturation=True).run(None, feeds)[0]
        exact = dml_ep.InferenceSession(onnx_model, arithmetic="onnxruntime", u8s8_saturation=False).run(None, feeds)[0]
        moved = int(np.count_nonzero(expected != exact))
        wrong = int(np.count_nonzero(expected != saturated))
        failed |= wrong > 0
        print(f"{name:45s} {expected.size:6d} outputs, {moved:5d} changed by saturation, dml_ep mismatches: {wrong}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
