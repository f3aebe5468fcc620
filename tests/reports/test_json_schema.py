"""The JSON reports of ``inspect --json`` and ``compare --json`` against their published schema
(dml_ep/reports/schemas/reports.schema.json, docs/json_reports.md): the schema is a valid draft 2020-12
schema, every report the CLI writes on the shipped models validates, a report with an unknown key
or a wrong type does not, and the schema's closed sets are the code's."""

import contextlib
import copy
import io
import json
import shutil
from importlib.resources import files
from pathlib import Path

import numpy as np
import onnx
import pytest
from jsonschema import Draft202012Validator
from onnx import numpy_helper
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from dml_ep.cli.commands import main
from dml_ep.conformance.causes import describe_arithmetic
from dml_ep.conformance.compare import CANDIDATES
from dml_ep.core.enums import DML_FEATURE_LEVEL, DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from dml_ep.numerics.arithmetic import ARITHMETICS, Arithmetic
from dml_ep.ort.reference import REFERENCES, cpu_session
from dml_ep.passes import RELEASES
from dml_ep.realep.placement import CPU_CLASSES, PLACEMENTS, REASON_CLASSES
from dml_ep.reports.meta import SCHEMA_IDS, SCHEMA_VERSION
from dml_ep.reports.report import CAUSES, HISTOGRAM_STEPS, compare_tensors
from dml_ep.runtime.inputs import random_inputs

MODELS = Path(__file__).resolve().parents[2] / "models"
LLM = MODELS / "llm" / "tiny_llm.int4.dml.onnx"
LLM_INPUTS = ["--shape=input_ids=1,8", "--shape=attention_mask=1,8", "--shape=position_ids=1,8", "--val-range=attention_mask=1,1",
              "--val-range=position_ids=0,7", "--val-range=input_ids=0,255",
              *(f"--shape=past_key_values.{layer}.{kind}=1,2,0,16" for layer in range(2) for kind in ("key", "value"))]
SCHEMA = json.loads(files("dml_ep.reports").joinpath("schemas/reports.schema.json").read_text())
DEFS = SCHEMA["$defs"]
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)


def run(*argv) -> tuple[int, dict]:
    """``dml-ep ARGV --json FILE`` in this process (its text discarded): the exit status and the report."""
    *argv, path = [str(a) for a in argv]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main([*argv, "--json", path])
    return status, json.loads(Path(path).read_text())


def errors(report: dict) -> list[str]:
    """Where and why ``report`` fails the schema: each error, and within an anyOf or oneOf, each
    alternative's."""
    def flattened(found):
        for error in found:
            yield f"{error.json_path}: {error.message}"
            yield from flattened(error.context or ())

    return list(flattened(VALIDATOR.iter_errors(report)))


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(SCHEMA)


def test_each_report_names_its_schema_whose_id_is_in_the_file():
    base = SCHEMA["$id"].rpartition("/")[0]
    assert {f"{base}/{DEFS[f'{command}_report']['$id']}" for command in SCHEMA_IDS} == set(SCHEMA_IDS.values())
    assert SCHEMA["properties"]["$schema"]["enum"] == list(SCHEMA_IDS.values())
    for command, schema_id in SCHEMA_IDS.items():
        assert DEFS[f"{command}_report"]["properties"]["$schema"]["const"] == schema_id
    assert DEFS["report_meta"]["properties"]["schema_version"]["const"] == SCHEMA_VERSION


def test_each_report_schema_is_usable_alone_by_its_id():
    """A tool that picks the schema by the report's "$schema" finds it in the file."""
    registry = Registry().with_resource(SCHEMA["$id"], DRAFT202012.create_resource(SCHEMA))
    inspect = Draft202012Validator({"$ref": SCHEMA_IDS["inspect"]}, registry=registry)
    compare = Draft202012Validator({"$ref": SCHEMA_IDS["compare"]}, registry=registry)
    report = {"$schema": SCHEMA_IDS["compare"], "schema_version": SCHEMA_VERSION, "versions": {}, "cpu": {}}
    assert any("'dml_ep' is a required property" in e.message for e in compare.iter_errors(report))
    assert any("was expected" in e.message for e in inspect.iter_errors(report))  # the other "$schema"


def property_schemas(schema, path="#"):
    """Every (path, schema) of a property the schema names, walked through every subschema."""
    if isinstance(schema, dict):
        for name, value in schema.items():
            if name == "properties":
                for key, sub in value.items():
                    yield f"{path}/properties/{key}", sub
            yield from property_schemas(value, f"{path}/{name}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from property_schemas(value, f"{path}/{index}")


def test_every_field_is_described():
    """Directly, or by the definition it refers to (the properties of if/then are restrictions, not fields)."""
    def described(sub):
        target = sub.get("$ref", "").rpartition("/$defs/")[2]
        return "description" in sub or "description" in DEFS.get(target, {})

    fields = [(path, sub) for path, sub in property_schemas(SCHEMA) if not any(f"/{k}/" in path for k in ("if", "then", "else"))]
    assert len(fields) > 100
    assert [path for path, sub in fields if not described(sub)] == []


@pytest.mark.parametrize("definition, code", [
    (DEFS["placement"]["enum"], list(PLACEMENTS)),
    (DEFS["reason_class"]["enum"], list(REASON_CLASSES)),
    (DEFS["cpu_reason_class"]["enum"], list(CPU_CLASSES)),
    (DEFS["cause"]["enum"], list(CAUSES)),
    (DEFS["feature_level"]["enum"], [str(level) for level in DML_FEATURE_LEVEL]),
    (DEFS["operator_type"]["enum"], [str(operator) for operator in DML_OPERATOR_TYPE]),
    (DEFS["tensor_desc"]["properties"]["DataType"]["enum"], [data_type.name for data_type in DML_TENSOR_DATA_TYPE]),
    (DEFS["tensor_desc"]["properties"]["Flags"]["enum"], list(DML_TENSOR_FLAGS.__members__)),
    (DEFS["plan_summary"]["properties"]["qdq_rules"]["enum"], [*RELEASES, None]),
    (DEFS["reference"]["enum"], list(REFERENCES)),
    (DEFS["model_report"]["properties"]["candidate"]["enum"], list(CANDIDATES)),
    (DEFS["model_report"]["properties"]["arithmetic"]["enum"],
     list(dict.fromkeys([describe_arithmetic(Arithmetic(mode, saturation)) for mode in ARITHMETICS for saturation in (False, True)]
                        + [f"onnxruntime {candidate}" for candidate in CANDIDATES if candidate != "dml_ep"]))),
    (DEFS["tensor_comparison"]["properties"]["histogram"]["required"], [f"{step:+d}" for step in HISTOGRAM_STEPS] + ["other"]),
    (DEFS["tensor_comparison"]["properties"]["unit"]["enum"],
     [compare_tensors("t", np.zeros(1), np.zeros(1), step).unit for step in (1.0, None)]),
], ids=["placement", "reason_class", "cpu_reason_class", "cause", "feature_level", "operator_type", "DataType", "Flags", "qdq_rules",
        "reference", "candidate", "arithmetic", "histogram", "unit"])
def test_the_schema_s_closed_sets_are_the_code_s(definition, code):
    assert definition == code


INSPECTED = {
    "qoperator": [MODELS / "small_cnn.onnx", "--nodes", "--descs"],
    "qdq": [MODELS / "small_cnn.qdq.onnx"],
    "dynamic": [MODELS / "transformer_block.dynamic.onnx"],
    "symbolic": [MODELS / "mlp.onnx"],
    "shape": [MODELS / "mlp.onnx", "--shape", "input=4,64", "--feature-level", "2_1"],
    "4-bit": [LLM],
}


@pytest.mark.parametrize("case", INSPECTED)
def test_inspect_reports_validate(case, tmp_path):
    status, report = run("inspect", *INSPECTED[case], tmp_path / "plan.json")
    assert status == 0
    assert report["$schema"] == SCHEMA_IDS["inspect"]
    assert errors(report) == []
    placements = {row["placement"] for row in report["nodes"]}
    expected = {"qoperator": {"modelled"}, "qdq": {"modelled"}, "dynamic": {"modelled"}, "symbolic": {"modelled"},
                "shape": {"modelled", "real-ep-dml"}, "4-bit": {"modelled", "cpu"}}  # its GroupQueryAttention: planned when run
    assert placements == expected[case]
    assert bool(report["assumed"]) == (case in ("symbolic", "4-bit")) and bool(report["input_shapes"]) == (case == "shape")


def test_a_desc_s_array_of_tensor_descs_validates(tmp_path):
    """DEQUANTIZE's QuantizationTensors, a tuple of tensor descs, is written as tensor descs."""
    _, report = run("inspect", LLM, tmp_path / "plan.json")
    descs = [row["desc"]["Desc"] for row in report["nodes"] if row.get("desc", {}).get("Type") == "DML_OPERATOR_DEQUANTIZE"]
    assert descs and all(desc["QuantizationTensors"][0]["DataType"] == "FLOAT16" for desc in descs)


@pytest.fixture
def zoo(tmp_path):
    """A model zoo directory of small_cnn.qdq.onnx, one data set whose shipped output is onnxruntime's."""
    root = tmp_path / "zoo"
    (root / "test_data_set_0").mkdir(parents=True)
    shutil.copy(MODELS / "small_cnn.qdq.onnx", root / "model.onnx")
    model = onnx.load(root / "model.onnx")
    feeds = random_inputs(model, seed=0)
    session = cpu_session(model, "ort-exact")
    for kind, tensors in (("input", feeds), ("output", dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds))))):
        for position, (name, array) in enumerate(tensors.items()):
            (root / "test_data_set_0" / f"{kind}_{position}.pb").write_bytes(numpy_helper.from_array(array, name).SerializeToString())
    return root


@pytest.mark.host_sensitive
def test_compare_reports_validate(tmp_path, zoo):
    """Without and with --per-node, several models and iterations, another candidate, named tolerances,
    a model zoo data set, a 4-bit model, and a directory with a model that fails."""
    broken = tmp_path / "models"
    broken.mkdir()
    shutil.copy(MODELS / "mlp.onnx", broken / "mlp.onnx")
    (broken / "broken.onnx").write_bytes(b"not an ONNX model")
    cases = {
        "outputs only": ([MODELS / "small_cnn.onnx", "--reference", "ort-exact"], 0),
        "per node": ([MODELS / "small_cnn.qdq.onnx", "--per-node", "--reference", "ort-exact"], 0),
        "several": ([MODELS / "mlp.onnx", MODELS / "transformer_block.onnx", "--per-node", "--iterations", "2", "--atol", "output:0.5",
                     "--rtol", "1e-3", "--steps", "1"], None),
        "candidate": ([MODELS / "small_cnn.qdq.onnx", "--candidate", "ort", "--reference", "ort-unfused"], None),
        "zoo": ([zoo, "--reference", "ort-exact"], 0),
        "4-bit": ([LLM, "--per-node", *LLM_INPUTS], None),
        "errors": ([broken, "--reference", "ort-exact"], 2),
    }
    reports = {}
    for case, (argv, expected_status) in cases.items():
        status, reports[case] = run("compare", *argv, tmp_path / f"{case}.json")
        assert expected_status is None or status == expected_status, case
        assert reports[case]["$schema"] == SCHEMA_IDS["compare"]
        assert errors(reports[case]) == [], case
    # each case holds what it is there for
    assert reports["outputs only"]["models"][0]["nodes"] is None and reports["per node"]["models"][0]["nodes"]
    assert len(reports["several"]["models"]) == 4 and reports["several"]["models"][0]["tolerance"]["atol"] == {"output": 0.5}
    assert reports["candidate"]["models"][0]["arithmetic"] == "onnxruntime ort"
    assert reports["zoo"]["models"][0]["shipped"][0]["name"] == "output"
    assert any(node["isolated"] and node["isolated"]["max_ulps"] is not None for node in reports["4-bit"]["models"][0]["nodes"])
    assert [e["model"] for e in reports["errors"]["errors"]] == [str(broken / "broken.onnx")] and not reports["errors"]["ok"]


@pytest.mark.host_sensitive
def test_a_difference_and_its_cause_validate(tmp_path, break_dml_node):
    """A node one step off: first_divergent, the causes and the histogram filled."""
    break_dml_node("block1.conv1_quant")
    status, report = run("compare", MODELS / "small_cnn.onnx", "--reference", "ort-exact", tmp_path / "r.json")
    assert status == 1
    (model,) = report["models"]
    assert model["first_divergent"]["node"] == "block1.conv1_quant" and model["cause_counts"]
    assert model["first_divergent"]["isolated"]["histogram"]["+1"] + model["first_divergent"]["isolated"]["histogram"]["-1"] > 0
    assert errors(report) == []


@pytest.mark.host_sensitive
def test_polygraphy_s_outputs_as_the_reference_validate(tmp_path):
    model = MODELS / "mlp.onnx"
    inputs, outputs = tmp_path / "inputs.json", tmp_path / "outputs.json"
    # ort-exact: bit-exact on every host (plain "ort" saturates mlp's uint8 x int8 pairs on AVX2 without VNNI)
    status, _ = run("compare", model, "--save-inputs", inputs, "--save-outputs", outputs, "--reference", "ort-exact", tmp_path / "first.json")
    assert status == 0
    status, report = run("compare", model, "--load-inputs", inputs, "--load-outputs", outputs, tmp_path / "r.json")
    assert status == 0
    assert report["models"][0]["reference"].startswith("Polygraphy runner '") and report["models"][0]["inputs"] == {"input": str(inputs)}
    assert errors(report) == []


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """An inspect and a compare report to break."""
    path = tmp_path_factory.mktemp("reports")
    return {"inspect": run("inspect", MODELS / "mlp.onnx", path / "plan.json")[1],
            "compare": run("compare", MODELS / "mlp.onnx", "--per-node", "--reference", "ort-exact", path / "r.json")[1]}


DELETE = object()  # a key taken out


@pytest.mark.host_sensitive
@pytest.mark.parametrize("kind, path, value, expected", [
    ("compare", ("surprise",), 1, "Unevaluated properties are not allowed ('surprise' was unexpected)"),
    ("inspect", ("summary", "dml", "surprise"), 1, "Additional properties are not allowed ('surprise' was unexpected)"),
    ("compare", ("models", 0, "outputs", 0, "surprise"), 1, "Additional properties are not allowed ('surprise' was unexpected)"),
    ("compare", ("models", 0, "ok"), "yes", "'yes' is not of type 'boolean'"),
    ("compare", ("models", 0, "nodes", 0, "isolated", "shape"), "1x64", "'1x64' is not of type 'array'"),
    ("inspect", ("nodes", 0, "macs"), 1.5, "1.5 is not of type 'integer'"),
    ("inspect", ("nodes", 0, "placement"), "gpu", "'gpu' is not one of"),
    ("inspect", ("nodes", 0, "desc", "Desc", "InputTensor", "DataType"), "BFLOAT16", "'BFLOAT16' is not one of"),
    ("inspect", ("nodes", 0, "reason"), "a reason beside a desc", "should not be valid under {'required': ['reason']}"),
    ("compare", ("models", 0, "cause_counts"), {"cosmic rays": 1}, "'cosmic rays' is not one of"),
    ("compare", ("errors",), DELETE, "'errors' is a required property"),
    ("compare", ("schema_version",), SCHEMA_VERSION + 1, "was expected"),
    ("compare", ("$schema",), SCHEMA_IDS["inspect"], "'model' is a required property"),
], ids=["unknown key", "unknown nested key", "unknown key in an output", "wrong type", "wrong shape", "float MACs", "unknown placement",
        "unknown data type", "desc and reason", "unknown cause", "missing key", "other schema version", "other report's schema"])
def test_a_broken_report_fails(reports, kind, path, value, expected):
    report = copy.deepcopy(reports[kind])
    assert errors(report) == []
    *parents, key = path
    container = report
    for step in parents:
        container = container[step]
    if value is DELETE:
        del container[key]
    else:
        container[key] = value
    found = errors(report)
    assert any(expected in error for error in found), found
