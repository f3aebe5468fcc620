"""Cast and CastLike to bool as the DML EP builds them (DmlOperatorCast.cpp): CAST to UINT8, then
ELEMENT_WISE_CLIP1 to [0, 1], a bool output. Masks of 0 and 1 (what models cast) against
onnxruntime's CPU EP, bit for bit; other values against the graph's hand-computed result, which is
not ONNX's nonzero test, and compare's "graph" cause for them."""

from __future__ import annotations

import numpy as np
import pytest

import dml_ep
from dml_ep.conformance.compare import compare_model
from dml_ep.operators.graphs.cast_to_bool import DIFFERS
from onnx_builders import Feed, run_dml, run_ort, single_node_model

pytestmark = pytest.mark.host_sensitive
RNG = np.random.default_rng(60)
MASK_TYPES = [np.float16, np.float32, np.int32, np.int64, np.uint8, np.bool_]


def to_bool(x, op_type="Cast"):
    if op_type == "CastLike":
        return single_node_model("CastLike", [Feed(x), np.zeros(1, np.bool_)], np.bool_, x.ndim, opset=21)
    return single_node_model("Cast", [Feed(x)], np.bool_, x.ndim, opset=21, to=9)


@pytest.mark.parametrize("op_type", ["Cast", "CastLike"])
def test_a_cast_to_bool_is_cast_to_uint8_then_clip1(op_type):
    model, _ = to_bool(np.zeros((2, 3), np.float32), op_type)
    session = dml_ep.InferenceSession(model)
    cast, clip = session.plan.entries
    assert [cast.operator, clip.operator] == ["DML_OPERATOR_CAST", "DML_OPERATOR_ELEMENT_WISE_CLIP1"]
    assert cast.desc.OutputTensor.DataType.name == "UINT8" and clip.desc.OutputTensor.DataType.name == "UINT8"
    assert (clip.desc.Min, clip.desc.Max) == (0, 1) and cast.origin is clip.origin and clip.origin.rules[-1] == "DmlOperatorCast"


@pytest.mark.parametrize("mode", ["onnxruntime", "directml"])
@pytest.mark.parametrize("source", MASK_TYPES)
def test_masks_are_onnxruntimes_bools(source, mode):
    model, feeds = to_bool(RNG.integers(0, 2, (3, 40)).astype(source))
    ours = run_dml(model, feeds, mode)
    assert ours.dtype == np.bool_
    np.testing.assert_array_equal(ours, run_ort(model, feeds, "ort"))


CASES = np.array([0.0, -0.0, 1.0, 2.0, 255.0, 0.5, -0.5, 256.0, 300.0, -1.0, np.nan, np.inf], np.float32)
# CAST to UINT8 toward zero, then [0, 1]: 256 and 300 clamp to 255 ("directml", Direct3D's ftou) and wrap to their
# low 8 bits ("onnxruntime", x86-64's C conversion: 0 and 44); -1 clamps to 0 or wraps to 255; NaN is 0 in both.
DIRECTML = [False, False, True, True, True, False, False, True, True, False, False, True]
ONNX = [False, False, True, True, True, True, True, True, True, True, True, True]


def test_values_other_than_masks_are_the_graphs():
    model, feeds = to_bool(CASES.reshape(1, -1))
    np.testing.assert_array_equal(run_dml(model, feeds, "directml")[0], DIRECTML)
    np.testing.assert_array_equal(run_ort(model, feeds, "ort")[0], ONNX)


def test_integers_keep_their_low_bits():
    model, feeds = to_bool(np.array([[0, 1, 2, 255, 256, 512, 257, -1, -256]], np.int32))
    for arithmetic in ("onnxruntime", "directml"):
        np.testing.assert_array_equal(run_dml(model, feeds, arithmetic)[0], [False, True, True, True, False, False, True, True, False])


def test_compare_names_the_graph_as_the_cause():
    model, feeds = to_bool(CASES.reshape(1, -1))
    for arithmetic in ("onnxruntime", "directml"):
        report = compare_model(model, feeds, per_node=True, arithmetic=arithmetic)
        clip = report.nodes[-1]
        assert clip.op_type == "DmlClipToBool" and set(clip.causes) == {"graph"} and clip.graph == DIFFERS, arithmetic
