"""Check dml_ep's emulation of onnxruntime's saturating uint8 x int8 GEMMs against the real thing.

On CPUs with AVX2 but no VNNI, MLAS sums pairs of uint8 x int8 products into int16 with saturation
(see docs/onnxruntime_arithmetic.md). A VNNI machine cannot show it, but QEMU's user-mode emulator
can present a Haswell CPU to onnxruntime, whose MLAS then picks its AVX2 kernels:

    apt-get install qemu-user
    qemu-x86_64 -cpu Haswell .venv/bin/python scripts/check_u8s8_saturation.py

Random QLinearConv (group 1, grouped, depthwise, 1-D; odd and even channel counts) and
QLinearMatMul models with full-range codes are run by onnxruntime and by dml_ep with
``arithmetic="onnxruntime", u8s8_saturation=True``; the script prints, per case, how many outputs
onnxruntime's saturation changed and whether dml_ep matches every one; then whether
``host_saturates_u8s8()``, dml_ep's probe of the host, agrees that onnxruntime saturates here.
Exit status 1 on a mismatch or a disagreement.
"""

from __future__ import annotations

import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.ort.reference import cpu_session

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


def saturating_case(rng, op_type, x_shape, w_shape, output_scale, **attributes):
    """A QLinearConv or QLinearMatMul (same input order) with large codes, so that pairs saturate
    often: activations 150..255, weights +-(60..127) with zero point 0 (symmetric)."""
    w = rng.integers(60, 128, w_shape).astype(np.int8) * rng.choice(np.array([-1, 1], np.int8), w_shape)
    parameters = {
        "xs": np.float32(0.05), "xz": np.uint8(7), "w": w, "ws": np.float32(0.01),
        "wz": np.int8(0), "ys": np.float32(output_scale), "yz": np.uint8(128),
    }
    node = helper.make_node(op_type, ["x", *parameters], ["y"], **attributes)
    graph = helper.make_graph(
        [node],
        op_type,
        [helper.make_tensor_value_info("x", TensorProto.UINT8, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [None] * len(x_shape))],
        [numpy_helper.from_array(value, name) for name, value in parameters.items()],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return onnx_model, {"x": rng.integers(150, 256, x_shape).astype(np.uint8)}


def main() -> int:
    rng = np.random.default_rng(0)
    cases = {name: saturating_case(rng, "QLinearConv", spec.pop("x"), spec.pop("w"), 40.0, **spec) for name, spec in CONV_CASES.items()}
    cases.update({name: saturating_case(rng, "QLinearMatMul", *shapes, 20.0) for name, shapes in MATMUL_CASES.items()})
    failed = False
    ort_saturates = False
    for name, (onnx_model, feeds) in cases.items():
        expected = cpu_session(onnx_model).run(None, feeds)[0]
        saturated = dml_ep.InferenceSession(onnx_model, arithmetic="onnxruntime", u8s8_saturation=True).run(None, feeds)[0]
        exact = dml_ep.InferenceSession(onnx_model, arithmetic="onnxruntime", u8s8_saturation=False).run(None, feeds)[0]
        moved = int(np.count_nonzero(expected != exact))
        wrong = int(np.count_nonzero(expected != saturated))
        failed |= wrong > 0
        ort_saturates |= moved > 0
        print(f"{name:45s} {expected.size:6d} outputs, {moved:5d} changed by saturation, dml_ep mismatches: {wrong}")
    probe = host_saturates_u8s8()
    failed |= probe != ort_saturates
    print(f"host_saturates_u8s8(): {probe}, onnxruntime saturated here: {ort_saturates}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
