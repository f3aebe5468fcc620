"""``--reference dml``, the real DML EP. No GPU here: its refusal, in one line, and its code path with
the CPU EP standing in for the DML EP (at one seam, ``reference.DML_PROVIDERS``), which must then
give what ``--reference ort`` gives."""

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from dml_ep.cli import commands as cli
from dml_ep.conformance import cases
from dml_ep.conformance.causes import alternative_arithmetics
from dml_ep.conformance.compare import compare_model
from dml_ep.core.errors import ReferenceUnavailableError
from dml_ep.core.graph import load_model
from dml_ep.numerics import arithmetic
from dml_ep.numerics.arithmetic import Arithmetic, host_saturates_u8s8
from dml_ep.ort import reference
from dml_ep.runtime.inputs import random_inputs
from onnx_builders import qlinear_matmul

MODELS = Path(__file__).resolve().parents[2] / "models"
DML_EP = Path(sys.executable).parent / "dml-ep"
VERSION = onnxruntime.__version__
NO_DML = ("reference dml runs the real DML EP, but the installed onnxruntime {} has no DmlExecutionProvider: on Windows, "
          "pip install dml_ep[directml] (onnxruntime-directml) in its place (uninstall it first: both install the onnxruntime module)")


@pytest.fixture(autouse=True)
def device_not_probed():
    """Each test probes the (stand-in or refused) DML device afresh: a process keeps a device that started."""
    reference.dml_device_starts.cache_clear()


@pytest.fixture
def dml_on_cpu(monkeypatch):
    """The "dml" reference's sessions, made by ``reference.dml_session``, on the CPU EP: the list of
    (SessionOptions, keyword arguments) of every onnxruntime session made during the test."""
    monkeypatch.setattr(reference, "DML_PROVIDERS", ("CPUExecutionProvider",))
    made, original = [], onnxruntime.InferenceSession

    def recording(*args, **kwargs):
        made.append((args[1] if len(args) > 1 else kwargs.get("sess_options"), kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording)
    return made


@pytest.fixture
def exact_dml_on_cpu(dml_on_cpu, monkeypatch):
    """``dml_on_cpu`` with exact u8s8 products, as the real DML EP's are: on AVX2 CPUs without VNNI
    the CPU EP saturates pairs of them to int16 and would stand in for another EP."""
    recording = onnxruntime.InferenceSession

    def exact(*args, **kwargs):
        options = args[1] if len(args) > 1 else kwargs.get("sess_options")
        if options is not None and not options.enable_mem_pattern:  # dml_session's (see dml_sessions)
            options.add_session_config_entry("session.x64quantprecision", "1")
        return recording(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", exact)
    return dml_on_cpu


def dml_sessions(made) -> list:
    """The sessions made with the options the DML EP requires (dml_session's)."""
    return [m for m in made if m[0] is not None and not m[0].enable_mem_pattern]


@pytest.mark.skipif("DmlExecutionProvider" in onnxruntime.get_available_providers(), reason="this onnxruntime has the DML EP")
@pytest.mark.skipif(importlib.metadata.packages_distributions().get("onnxruntime") != ["onnxruntime"],
                    reason="the message names the onnxruntime package installed")
def test_without_the_dml_ep_the_command_refuses_in_one_line():
    result = subprocess.run([DML_EP, "compare", MODELS / "mlp.onnx", MODELS / "small_cnn.onnx", "--reference", "dml"],
                            capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"dml-ep: error: {NO_DML.format(VERSION)}\n"  # once, not once per model


def test_the_refusal_comes_before_any_work(monkeypatch, capsys):
    def no_work(*args, **kwargs):
        pytest.fail("work done before the refusal")

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(cases, "compare_model", no_work)
    monkeypatch.setattr(cases, "comparison_cases", no_work)  # cli imports it from cases when compare runs
    assert cli.main(["compare", str(MODELS / "mlp.onnx"), "--reference", "dml"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    monkeypatch.setattr("dml_ep.conformance.compare.load_model", no_work)
    with pytest.raises(ReferenceUnavailableError, match="has no DmlExecutionProvider"):
        compare_model(MODELS / "mlp.onnx", {}, reference="dml", progress=no_work)


WINDOWS_ERROR = ("D:\\a\\_work\\1\\s\\onnxruntime\\core\\providers\\dml\\dml_provider_factory.cc(549)\\onnxruntime_pybind11_state.pyd"
                 "!00007FFB1C2D6F2A: (caller: 00007FFB1C2D4B11) Exception(1) tid(2a8c) 887A0004 The specified device\n"
                 "interface or feature level is not supported on this system.\r\n")


class CpuOnlySession:
    """A session that onnxruntime fell back to the CPU EP for."""

    def __init__(self, *args, **kwargs):
        pass

    def get_providers(self):
        return ["CPUExecutionProvider"]


def failing_session(*args, **kwargs):
    raise RuntimeError(WINDOWS_ERROR)


@pytest.mark.parametrize("session, problem", [
    (failing_session, "887A0004 The specified device interface or feature level is not supported on this system."),
    (CpuOnlySession, "onnxruntime ran the session on CPUExecutionProvider"),
])
def test_a_dml_ep_without_a_device_is_refused_in_one_line(monkeypatch, capsys, session, problem):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["DmlExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    assert cli.main(["compare", str(MODELS / "mlp.onnx"), "--reference", "dml"]) == 2
    installed = reference._installed_onnxruntime()
    assert capsys.readouterr().err == (f"dml-ep: error: reference dml: the DmlExecutionProvider of {installed} cannot start "
                                       f"a session (no DirectX 12 device?): {problem}\n")


@pytest.mark.host_sensitive
def test_dml_sessions_have_the_options_the_dml_ep_requires(dml_on_cpu):
    session = reference.dml_session(load_model(MODELS / "mlp.onnx"))
    assert session.get_providers() == ["CPUExecutionProvider"]
    (options, kwargs), = dml_on_cpu
    assert (options.enable_mem_pattern, options.execution_mode) == (False, onnxruntime.ExecutionMode.ORT_SEQUENTIAL)
    assert kwargs == {"providers": ["CPUExecutionProvider"], "enable_fallback": 0}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("name", ["small_cnn", "small_cnn.qdq", "transformer_block.dynamic"])
def test_the_dml_reference_on_the_cpu_stand_in_gives_what_ort_gives(dml_on_cpu, name):
    """Node by node too: the same values, verdicts and causes (onnxruntime's arithmetic, so that
    dml_ep matches on any CPU, saturating or not)."""
    model = load_model(MODELS / f"{name}.onnx")
    feeds = random_inputs(model, seed=0)
    options = dict(per_node=True, arithmetic="onnxruntime", u8s8_saturation=host_saturates_u8s8())
    dml = compare_model(model, feeds, reference="dml", **options)
    assert len(dml_sessions(dml_on_cpu)) == 2  # require_dml's probe, then the reference's run
    ort = compare_model(model, feeds, reference="ort", **options)
    assert len(dml_sessions(dml_on_cpu)) == 2
    compare_model(model, feeds, reference="dml", **options)
    assert len(dml_sessions(dml_on_cpu)) == 3  # the device probed once per process
    assert dml.ok and dml.on_dml
    for name in dml.reference_outputs:
        np.testing.assert_array_equal(dml.reference_outputs[name], ort.reference_outputs[name])
        np.testing.assert_array_equal(dml.candidate_outputs[name], ort.candidate_outputs[name])
    assert [o.to_dict() for o in dml.outputs] == [o.to_dict() for o in ort.outputs]
    assert [n.to_dict() for n in dml.nodes] == [n.to_dict() for n in ort.nodes]
    assert any(n.isolated is not None for n in dml.nodes)


def test_against_the_real_ep_u8s8_saturation_is_dml_eps_own():
    """The real DML EP's products are exact: no saturating arithmetic is tried as its cause."""
    labels = [(cause, a.mode, a.u8s8_saturation) for cause, a in alternative_arithmetics(Arithmetic("directml"), saturating=False)]
    assert labels == [("float32 rounding", "onnxruntime", False)]
    labels = [(cause, a.mode) for cause, a in alternative_arithmetics(Arithmetic("onnxruntime", True), saturating=False)]
    assert labels == [("u8s8 saturation", "onnxruntime"), ("u8s8 saturation", "directml")]


@pytest.mark.host_sensitive
def test_dml_ep_saturating_against_the_dml_reference_is_the_cause(exact_dml_on_cpu, monkeypatch):
    """K = 2, a = 255, b = 127: exact 200, saturated 101 (tests/numerics/test_u8s8.py's case). The default
    follows the real EP, not this CPU (made one that saturates): no saturation; dml_ep saturating
    on demand is named as the cause."""
    monkeypatch.setattr(arithmetic, "host_saturates_u8s8", lambda: True)
    scale = np.float32(200 / 64770)
    model, feeds = qlinear_matmul(np.full((1, 2), 255, np.uint8), np.float32(1), np.uint8(0), np.full((2, 1), 127, np.int8),
                                  np.float32(1), np.int8(0), np.float32(1 / scale), np.uint8(0))
    assert compare_model(model, feeds, reference="dml", arithmetic="onnxruntime").ok
    report = compare_model(model, feeds, reference="dml", arithmetic="onnxruntime", u8s8_saturation=True)
    assert report.first_divergent.causes == {"u8s8 saturation": 1}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("reference_name, cause", [("dml", "float32 rounding"), ("ort", "other")])
def test_a_value_next_to_directmls_exact_one_is_the_real_eps_float32_rounding(dml_on_cpu, reference_name, cause):
    """1 x 1 / 2.5: exactly 0.4, which DirectML and onnxruntime's CPU kernels round to 0. A reference
    giving 1 (saved outputs stand in for it) rounded in float32, as the GPU may: that is its cause
    against the real EP, whose arithmetic is float32; the CPU EP's is reproduced, so there it is not."""
    model, feeds = qlinear_matmul(np.ones((1, 1), np.uint8), np.float32(1), np.uint8(0), np.ones((1, 1), np.int8),
                                  np.float32(1), np.int8(0), np.float32(2.5), np.uint8(0))
    output = model.graph.output[0].name
    report = compare_model(model, feeds, reference=reference_name, expected_outputs={output: np.ones((1, 1), np.uint8)})
    assert report.first_divergent.causes == {cause: 1}


@pytest.mark.host_sensitive
def test_a_group_only_cpu_rules_fuse_is_not_a_graph_difference_against_the_real_ep(exact_dml_on_cpu, built):
    """transformer_block in QDQ: onnxruntime's CPU EP fuses DQ -> Softmax -> Q into QLinearSoftmax,
    the real DML EP does not. The CPU standing in for it does fuse, so the group differs; against
    the CPU EP that is the "graph" cause, against "dml" it is not judged ("other"). Exact u8s8
    products on both, so that saturation on AVX2 hosts without VNNI adds no causes."""
    model = load_model(built("transformer_block", "qdq"))
    feeds = random_inputs(model, seed=0)
    ort = compare_model(model, feeds, reference="ort-exact", per_node=True)
    dml = compare_model(model, feeds, reference="dml", per_node=True)
    assert ort.cause_counts == {"graph": 1} and dml.cause_counts == {"other": 1}
    softmax = next(n for n in dml.nodes if n.node == "attn.softmax")
    assert softmax.cause_text == "other" and softmax.graph is None


@pytest.mark.host_sensitive
def test_the_command_names_the_real_ep(exact_dml_on_cpu, capsys, tmp_path):
    model = MODELS / "small_cnn.onnx"
    status = cli.main(["compare", str(model), "--reference", "dml", "--per-node", "--quiet", "--save-outputs", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    assert status == 0
    assert out.startswith(f"{model}: reference dml (the real DML EP), arithmetic directml,")
    assert len(dml_sessions(exact_dml_on_cpu)) == 2  # one probe (cmd_compare's; compare_model's is kept), the reference's run
    runners = [runner for runner, _ in json.loads((tmp_path / "out.json").read_text())["lst"]]
    assert runners == ["dml_ep", "onnxruntime-dml"]
    assert cli.main(["compare", str(model), "--reference", "dml", "--candidate", "ort-exact", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"{model}: onnxruntime ort-exact against reference dml (the real DML EP), tolerance 0 step(s)")


@pytest.mark.host_sensitive
def test_the_cli_probes_the_device_once_for_a_batch(dml_on_cpu, capsys):
    """The command refuses before any work, and compare_model for each model: one probe in all."""
    assert cli.main(["compare", str(MODELS / "mlp.onnx"), str(MODELS / "small_cnn.onnx"), "--reference", "dml",
                     "--per-node", "--quiet"]) in (0, 1)
    assert len(dml_sessions(dml_on_cpu)) == 3  # the probe, then each model's reference run (once: --per-node)
