"""Random integer inputs (issue 17, point 7): token ids within the embedding they index, a small
range otherwise, ``--val-range`` as Polygraphy spells it, and an index error that names them."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dml_ep.runtime.inputs import make_feeds, random_inputs
from cli_runs import one_line_error, run_cli

VOCAB, TYPES, HIDDEN = 100, 2, 8


def text_model() -> onnx.ModelProto:
    """A BERT-like front: input_ids index a [100, 8] embedding, token_type_ids (through a Cast) a
    [2, 8] one, and attention_mask (cast to float, unsqueezed) masks their sum."""
    rng = np.random.default_rng(0)
    words = numpy_helper.from_array(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32), "words")
    types = numpy_helper.from_array(rng.standard_normal((TYPES, HIDDEN)).astype(np.float32), "types")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"]),
        helper.make_node("Cast", ["token_type_ids"], ["t32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["types", "t32"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["h"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axes"], ["m3"]),
        helper.make_node("Mul", ["h", "m3"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, [1, "S"])
              for name in ("input_ids", "token_type_ids", "attention_mask")]
    graph = helper.make_graph(nodes, "text", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "S", HIDDEN])],
                              [words, types, axes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


SHAPES = ["--shape", "input_ids=1,512", "--shape", "token_type_ids=1,512", "--shape", "attention_mask=1,512"]


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "text.onnx"
    onnx.save(text_model(), path)
    return path


def test_run_on_random_token_ids_stays_within_the_embedding(capsys, model_path):
    status, out, err = run_cli(capsys, "run", model_path, *SHAPES)
    assert status == 0, err
    assert "[1, 512, 8]" in out
    feeds, sources = make_feeds(text_model(), 0, shapes={name: (1, 512) for name in ("input_ids", "token_type_ids", "attention_mask")})
    assert feeds["input_ids"].dtype == np.int64 and (feeds["input_ids"].min(), feeds["input_ids"].max()) == (0, VOCAB - 1)
    assert set(np.unique(feeds["token_type_ids"])) == {0, 1}  # within the [2, 8] embedding, through the Cast
    assert set(np.unique(feeds["attention_mask"])) == {0, 1}  # no Gather: Polygraphy's default [0, 1]
    assert sources["input_ids"] == "random (seed 0), integers in [0, 99]"
    again, _ = make_feeds(text_model(), 0, shapes={name: (1, 512) for name in feeds})
    np.testing.assert_array_equal(again["input_ids"], feeds["input_ids"])  # seeded


def test_quantized_embedding_bounds_the_ids_through_dequantize_and_unsqueeze():
    table = numpy_helper.from_array(np.zeros((50, 4), np.uint8), "table")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "scale")
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    graph = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["table", "scale"], ["dq"]),
         helper.make_node("Unsqueeze", ["ids", "axes"], ["ids2"]),
         helper.make_node("Gather", ["dq", "ids2"], ["y"])],
        "g", [helper.make_tensor_value_info("ids", TensorProto.INT32, [4096])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table, scale, axes])
    ids = random_inputs(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), seed=2)["ids"]
    assert ids.dtype == np.int32 and (ids.min(), ids.max()) == (0, 49)


def test_val_range_sets_the_random_values():
    shapes = {name: (1, 512) for name in ("input_ids", "token_type_ids", "attention_mask")}
    feeds, sources = make_feeds(text_model(), 3, shapes=shapes,
                                val_ranges=["input_ids=10,20", "attention_mask:[1,1]", "[0,0]"])
    assert (feeds["input_ids"].min(), feeds["input_ids"].max()) == (10, 20)  # inclusive bounds, as Polygraphy's
    assert (feeds["attention_mask"] == 1).all()
    assert (feeds["token_type_ids"] == 0).all()  # the unnamed range: every input not named
    assert sources["input_ids"] == "random (seed 3), integers in [10, 20]"


@pytest.mark.parametrize("text, message", [
    ("nope=0,1", "no model input named 'nope'"),
    ("input_ids=5,1", "LO 5 is above HI 1"),
    ("input_ids=a,1", "the range is two numbers"),
    ("input_ids=0,1,2", "the range is two numbers"),
    ("input_ids", "expected NAME=LO,HI"),
    ("input_ids=0,1e30", "int64, whose values lie in"),
    ("input_ids=0.5,3", "give integer bounds"),
])
def test_a_bad_val_range_is_a_one_line_error(capsys, model_path, text, message):
    status, _, err = run_cli(capsys, "run", model_path, "--val-range", text)
    assert status == 2 and one_line_error(err) and message in err and "--val-range" in err


def test_an_index_out_of_range_names_the_random_ids_and_val_range(capsys, model_path):
    status, _, err = run_cli(capsys, "run", model_path, "--val-range", "input_ids=200,300")
    assert status == 2 and one_line_error(err)
    assert "Gather node: an index is outside [-100, 99]" in err  # the embedding's Gather runs on DirectML
    assert "input_ids (random (seed 0), integers in [200, 300]" in err
    assert "give their values with --val-range NAME=LO,HI or --input NAME=FILE" in err
    assert "--shape NAME=" not in err
