"""The integer engines: both give the exact ``sum (a - za) * (b - zb)``, whatever the operand
types, zero-point shapes and host; the choice of engine changes no result."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import dml_ep
from dml_ep.core.errors import DmlEpError
from dml_ep.numerics.arithmetic import host_saturates_u8s8
from dml_ep.numerics.engines import ENGINES, get_engine
from dml_ep.numerics.kernels.u8s8 import matmul_correction
from dml_ep.ort.reference import cpu_session
from dml_ep.runtime.inputs import random_inputs
from onnx_builders import qlinear_conv, scale_bench

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "models").glob("*.onnx"))
CODES = {np.uint8: (0, 256), np.int8: (-128, 128)}


def exact(a, za, b, zb):
    """The hand reference: int64 arithmetic on small matrices."""
    zb = np.asarray(zb, np.int64)
    centred_b = b.astype(np.int64) - (np.expand_dims(zb, -2) if zb.ndim else zb)
    return np.matmul(a.astype(np.int64) - int(za), centred_b)


def codes(rng, dtype, shape):
    return rng.integers(*CODES[dtype], shape).astype(dtype)


@pytest.fixture(params=["numpy", "onnxruntime", "onnxruntime u8u8"])
def engine(request, monkeypatch):
    """Each engine; onnxruntime's both ways: as the host allows (uint8 x int8 where its kernel is
    exact) and uint8 x uint8 with int8 weights shifted (what a saturating host gets)."""
    name, _, operands = request.param.partition(" ")
    chosen = get_engine(name)
    if operands:
        monkeypatch.setattr(type(chosen), "signed_b", False)
    return chosen


@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
def test_products_are_exact(engine, a_type, b_type):
    rng = np.random.default_rng(0)
    a = codes(rng, a_type, (3, 5, 300))
    cases = [
        (codes(rng, b_type, (300, 7)), codes(rng, b_type, 7), True),  # per-column zero points
        (codes(rng, b_type, (300, 7)), codes(rng, b_type, ()), True),
        (codes(rng, b_type, (3, 300, 7)), codes(rng, b_type, (3, 7)), True),  # batched, per column
        (codes(rng, b_type, (3, 300, 7)), codes(rng, b_type, ()), False),  # B bound at run time
    ]
    za = int(codes(rng, a_type, ()))
    for b, zb, constant in cases:
        product = engine.product(b, zb, constant)
        got = product(a, za) if constant else product(a, za, b)
        np.testing.assert_array_equal(got, exact(a, za, b, zb))


@pytest.mark.host_sensitive
@pytest.mark.parametrize("constant", [True, False])
def test_saturating_product_is_the_hosts_onnxruntime(constant):
    """Where the host's onnxruntime saturates uint8 x int8 pairs, the onnxruntime engine's
    saturating product gives its sums: the exact ones plus kernels/u8s8.py's correction on the raw
    codes (the numpy engine's arithmetic). Where it does not, no engine offers one."""
    rng = np.random.default_rng(4)
    a, b, zb = codes(rng, np.uint8, (2, 6, 64)), codes(rng, np.int8, (64, 9)), codes(rng, np.int8, 9)
    engine = get_engine("onnxruntime")
    assert engine.saturates_u8s8 == host_saturates_u8s8()
    assert not get_engine("numpy").saturates_u8s8
    if not engine.saturates_u8s8:
        with pytest.raises(ValueError, match="no saturating"):
            engine.product(b, zb, constant, saturating=True)
        return
    product = engine.product(b, zb, constant, saturating=True)
    got = product(a, 17) if constant else product(a, 17, b)
    expected = exact(a, 17, b, zb) + matmul_correction(a, b)
    assert np.any(matmul_correction(a, b))  # the case saturates
    np.testing.assert_array_equal(got, expected)


def test_saturating_pairs_are_exact(engine):
    """255 x 127 pairs, which onnxruntime's AVX2 u8s8 kernel saturates: every engine path is exact."""
    a = np.full((2, 64), 255, np.uint8)
    b = np.tile(np.array([[127], [-128]], np.int8), (32, 3))
    product = engine.product(b, np.int8(0))
    np.testing.assert_array_equal(product(a, 0), exact(a, 0, b, 0))


def test_float32_only_where_every_sum_fits_it(engine):
    """The numpy engine's product comes back as float32 only where |sum| < 2^24 for any input
    codes, else int32; onnxruntime's as int32 (MatMulInteger) always."""
    rng = np.random.default_rng(1)
    small = codes(rng, np.int8, (64, 4))
    large = np.full((600, 4), 127, np.int8)  # 600 * 255 * 128 > 2^24
    a = np.full((2, 600), 255, np.uint8)
    for b, expected in ((small, np.float32 if engine.name == "numpy" else np.int32), (large, np.int32)):
        result = engine.product(b, np.int8(-1))(a[:, : b.shape[0]], 0)
        assert result.dtype == expected
        np.testing.assert_array_equal(result, exact(a[:, : b.shape[0]], 0, b, -1))


def test_unknown_engine_is_a_typed_error():
    with pytest.raises(DmlEpError, match="unknown engine 'blas'"):
        get_engine("blas")


def test_engine_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("DML_EP_ENGINE", "numpy")
    assert get_engine().name == "numpy"
    monkeypatch.delenv("DML_EP_ENGINE")
    assert get_engine().name == "onnxruntime"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("arithmetic", ["directml", "onnxruntime"])
def test_engines_give_the_same_outputs(path, arithmetic):
    model = onnx.load(path)
    feeds = random_inputs(model, seed=3)
    outputs = [dml_ep.InferenceSession(model, arithmetic=arithmetic, engine=name).run(None, feeds) for name in ENGINES]
    for ours, theirs in zip(*outputs):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.host_sensitive
def test_cli_takes_the_engine(tmp_path):
    for name in ENGINES:
        done = subprocess.run([sys.executable, "-m", "dml_ep", "compare", str(SHIPPED[0]), "--reference", "ort-exact",
                               "--arithmetic", "onnxruntime", "--engine", name], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    refused = subprocess.run([sys.executable, "-m", "dml_ep", "run", str(SHIPPED[0]), "--engine", "blas"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--engine" in refused.stderr


def test_engine_sessions_sleep_instead_of_spinning():
    b = np.ones((64, 64), np.int8)
    for rows in (1, 10**6):  # on the calling thread, and on a pool
        options = get_engine("onnxruntime").product(b, np.int8(0), rows=rows).session.get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
        assert options.get_session_config_entry("session.use_env_allocators") == "1"
        assert options.intra_op_num_threads == (1 if rows == 1 else os.cpu_count())


@pytest.mark.host_sensitive
def test_a_users_onnxruntime_session_is_untouched_by_ours():
    """The shared arena is opt-in: sessions the host program makes afterwards work as before."""
    x = np.full((1, 2, 4, 4), 200, np.uint8)
    w = np.ones((2, 2, 1, 1), np.int8)
    model, feeds = qlinear_conv(x, np.float32(0.1), np.uint8(0), w, np.float32(0.1), np.int8(0), np.float32(0.5), np.uint8(0))
    ours = dml_ep.InferenceSession(model, arithmetic="onnxruntime").run(None, feeds)[0]
    theirs = cpu_session(model).run(None, feeds)[0]
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.host_sensitive
@pytest.mark.parametrize("runtime", ["w", "b", "w b"])
def test_conv_filter_or_bias_bound_at_run_time(engine, runtime):
    """A QLinearConv whose filter or bias is a graph input (not a constant): one product, fed the
    filter at each run; the bias added after it."""
    rng = np.random.default_rng(2)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])
    w, b = codes(rng, np.int8, (4, 3, 3, 3)), rng.integers(-3000, 3000, 4).astype(np.int32)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 6, 6])]
        + [helper.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in
           (("w", TensorProto.INT8, [4, 3, 3, 3]), ("b", TensorProto.INT32, [4])) if name in runtime.split()],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 4, 6, 6])],
        [numpy_helper.from_array(np.float32(v), n) for n, v in (("xs", 0.05), ("ws", 0.02), ("ys", 0.1))]
        + [numpy_helper.from_array(np.uint8(7), "xz"), numpy_helper.from_array(np.int8(0), "wz"), numpy_helper.from_array(np.uint8(3), "yz")]
        + [numpy_helper.from_array(value, name) for name, value in (("w", w), ("b", b)) if name not in runtime.split()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = dml_ep.InferenceSession(model, arithmetic="onnxruntime", engine=engine.name)
    reference = cpu_session(model, "ort")  # the host's onnxruntime, saturating where it does
    for _ in range(2):
        feeds = {"x": codes(rng, np.uint8, (1, 3, 6, 6)), "w": codes(rng, np.int8, (4, 3, 3, 3)), "b": rng.integers(-3000, 3000, 4).astype(np.int32)}
        feeds = {name: value for name, value in feeds.items() if name == "x" or name in runtime.split()}
        np.testing.assert_array_equal(session.run(None, feeds)[0], reference.run(None, feeds)[0])
    assert session.plan.entries[0].operator == "DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION"


@pytest.mark.parametrize("name", ENGINES)
def test_equal_filters_share_one_product(name):
    """A weight read by many QDQ Conv groups (quantize_static's shared weight DQ, copied per Conv
    by EnsureUniqueDQForNodeUnit) is one product per engine, not one per node: one session and one
    prepacked B. Another weight or zero point is another product."""
    rng = np.random.default_rng(3)
    b, zb = codes(rng, np.int8, (16, 8)), np.zeros(8, np.int8)
    engine = get_engine(name)
    first = engine.product(b, zb)
    assert engine.product(b.copy(), zb.copy()) is first
    changed = b.copy()
    changed[0, 0] ^= 1
    assert engine.product(changed, zb) is not first
    assert engine.product(b, zb + 1) is not first


@pytest.mark.host_sensitive
def test_a_shared_weight_makes_one_session(handed_to_onnxruntime):
    """End to end: scripts/scale_bench.py's shared-dq graph (one weight DQ read by 30 QDQ Conv
    groups, each one QUANTIZED_LINEAR_CONVOLUTION) makes one integer_product session, and the
    products still give onnxruntime's numbers."""
    model = scale_bench.shared_dq(93)
    feeds = {"x": np.random.default_rng(0).standard_normal((1, 4, 4, 4)).astype(np.float32)}
    got = dml_ep.InferenceSession(model, engine="onnxruntime").run(None, feeds)[0]
    want = cpu_session(model, "ort-exact").run(None, feeds)[0]  # exact sums, as the "directml" arithmetic's
    products = [m for m in handed_to_onnxruntime if m.graph.name == "integer_product"]
    assert len(products) == 1
    np.testing.assert_array_equal(got, want)
