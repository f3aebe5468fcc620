"""Polygraphy's spellings in ``dml-ep`` (issue 42): ``--atol``/``--rtol`` with Polygraphy's
element-wise semantics (whole-model and per-output), ``--onnx-outputs mark all``, ``--input-shapes``,
``--iterations``, ``run --save-outputs``/``--load-outputs``, and a hint for an option dml-ep spells
otherwise. Verdicts are held to ``polygraphy run``'s on the same model and inputs."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dml_ep
from dml_ep.cli.commands import main

pytest.importorskip("polygraphy")

MODELS = Path(__file__).resolve().parents[2] / "models"
POLYGRAPHY = Path(sys.executable).parent / "polygraphy"
# DirectML's MatMulIntegerToFloat rounds once where MLAS rounds three times: its float output
# differs from onnxruntime's by a few ulps on any host (README: "Arithmetic").
DIFFERING = MODELS / "transformer_block.dynamic.onnx"


def polygraphy_run(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([POLYGRAPHY, "run", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=180)


def dml_ep_cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main([str(a) for a in args])
        except SystemExit as usage_error:  # argparse's, as the command exits
            status = usage_error.code
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def polygraphy_files(tmp_path_factory):
    """Polygraphy's own inputs for DIFFERING and onnxruntime's outputs on them, and how far dml_ep's
    outputs are from those: the largest absolute difference, and the largest relative one against
    either side (Polygraphy divides by the second runner's value, dml_ep by the reference's)."""
    folder = tmp_path_factory.mktemp("polygraphy")
    inputs, outputs = folder / "inputs.json", folder / "onnxrt.json"
    result = polygraphy_run(DIFFERING, "--onnxrt", "--save-inputs", inputs, "--save-outputs", outputs)
    assert result.returncode == 0, result.stdout + result.stderr
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    feeds = load_json(str(inputs))[0]
    expected = RunResults.load(str(outputs))[0][1][0]["output"]
    actual = dml_ep.InferenceSession(str(DIFFERING)).run(None, {k: np.asarray(v) for k, v in feeds.items()})[0]
    diff = np.abs(actual.astype(np.float64) - expected)
    relative = max((diff / np.abs(side)).max() for side in (expected.astype(np.float64), actual.astype(np.float64)))
    assert diff.max() > 0  # they differ, so that a tolerance can fail
    return inputs, outputs, float(diff.max()), float(relative), float((diff / np.abs(expected)).min(initial=np.inf, where=diff > 0))


def _tolerances(polygraphy_files):
    _, _, largest, relative, smallest_relative = polygraphy_files
    return {
        "atol twice the difference": ["--atol", 2 * largest, "--rtol", 0],
        "atol half the difference": ["--atol", largest / 2, "--rtol", 0],
        "rtol twice the relative difference": ["--atol", 0, "--rtol", 2 * relative],
        "rtol below every relative difference": ["--atol", 0, "--rtol", smallest_relative / 2],
        "per output, overriding the default": ["--atol", "1", f"output:{largest / 2}", "--rtol", 0],
        "per output, within it": ["--atol", 0, f"output:{2 * largest}", "--rtol", 0],
    }


EXPECTED = {"atol twice the difference": True, "atol half the difference": False, "rtol twice the relative difference": True,
            "rtol below every relative difference": False, "per output, overriding the default": False, "per output, within it": True}


@pytest.mark.host_sensitive
@pytest.mark.parametrize("case", list(EXPECTED))
def test_atol_and_rtol_give_polygraphys_verdict(polygraphy_files, case):
    """``dml-ep compare --atol/--rtol`` and ``dml-ep run --load-outputs`` pass or fail where
    ``polygraphy run --onnxrt --dml-ep`` with the same tolerances does, on Polygraphy's inputs."""
    inputs, outputs = polygraphy_files[:2]
    tolerance = _tolerances(polygraphy_files)[case]
    result = polygraphy_run(DIFFERING, "--onnxrt", "--dml-ep", "--load-inputs", inputs, *tolerance)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    polygraphy_passed = result.returncode == 0
    assert polygraphy_passed == EXPECTED[case], result.stdout
    status, out, _ = dml_ep_cli("compare", DIFFERING, "--load-inputs", inputs, "--quiet", *tolerance)
    assert status == (0 if polygraphy_passed else 1), out
    status, out, _ = dml_ep_cli("run", DIFFERING, "--load-inputs", inputs, "--load-outputs", outputs, *tolerance)
    assert status == (0 if polygraphy_passed else 1), out
    assert ("result: OK" if polygraphy_passed else "result: MISMATCH") in out


@pytest.mark.host_sensitive
def test_run_saves_outputs_polygraphy_compares_with(polygraphy_files, tmp_path):
    """``dml-ep run --save-outputs`` writes a RunResults file that ``polygraphy run --load-outputs``
    holds onnxruntime against, with the verdict of ``--dml-ep`` beside it."""
    inputs, _, largest, _, _ = polygraphy_files
    saved = tmp_path / "dml_ep.json"
    assert dml_ep_cli("run", DIFFERING, "--load-inputs", inputs, "--save-outputs", saved)[0] == 0
    # twice the difference measured on this host (its onnxruntime's uint8 x int8 pairs saturate on AVX2 without VNNI)
    for tolerance, passes in ((["--atol", 0, "--rtol", 0], False), (["--atol", 2 * largest, "--rtol", 0], True)):
        result = polygraphy_run(DIFFERING, "--onnxrt", "--load-inputs", inputs, "--load-outputs", saved, *tolerance)
        assert (result.returncode == 0) == passes, result.stdout + result.stderr
        assert re.search(r"vs\. dml_ep", result.stdout), result.stdout


@pytest.mark.host_sensitive
def test_input_shapes_in_polygraphys_spelling(tmp_path):
    """``--input-shapes NAME:[...]`` plans and feeds as ``--shape NAME=...`` does, and as Polygraphy shapes its inputs."""
    reports = {}
    for spelling in (["--input-shapes", "input:[4,64]"], ["--shape", "input=4,64"]):
        path = tmp_path / f"{spelling[0][2:]}.json"
        # ort-exact: bit-exact on every host (plain "ort" saturates mlp's uint8 x int8 pairs on AVX2 without VNNI)
        assert dml_ep_cli("compare", MODELS / "mlp.onnx", *spelling, "--json", path, "--quiet", "--reference", "ort-exact")[0] == 0
        reports[spelling[0]] = json.loads(path.read_text())["models"][0]
    assert reports["--input-shapes"]["outputs"] == reports["--shape"]["outputs"]
    assert reports["--input-shapes"]["outputs"][0]["shape"] == [4, 10]
    saved = tmp_path / "onnxrt.json"
    assert polygraphy_run(MODELS / "mlp.onnx", "--onnxrt", "--input-shapes", "input:[4,64]", "--save-outputs", saved).returncode == 0
    from polygraphy.comparator import RunResults

    assert RunResults.load(str(saved))[0][1][0]["output"].shape == (4, 10)
    status, _, err = dml_ep_cli("compare", MODELS / "mlp.onnx", "--input-shapes", "input=4,64")
    assert status == 2 and "expected NAME:[D0,D1,...]" in err


@pytest.mark.host_sensitive
def test_onnx_outputs_mark_all_is_per_node(tmp_path):
    reports = {}
    for spelling in (["--onnx-outputs", "mark", "all"], ["--per-node"]):
        path = tmp_path / f"{spelling[0][2:]}.json"
        assert dml_ep_cli("compare", MODELS / "small_cnn.qdq.onnx", *spelling, "--json", path, "--quiet", "--reference", "ort-exact")[0] == 0
        reports[spelling[0]] = json.loads(path.read_text())["models"][0]
    assert reports["--onnx-outputs"]["nodes"] and reports["--onnx-outputs"]["nodes"] == reports["--per-node"]["nodes"]
    status, _, err = dml_ep_cli("compare", MODELS / "small_cnn.qdq.onnx", "--onnx-outputs", "output")
    assert status == 2 and "mark all" in err


@pytest.mark.host_sensitive
def test_iterations_compare_on_successive_seeds(tmp_path):
    """``--iterations 3`` is three comparisons, on the random inputs of --seed 5, 6 and 7."""
    path, inputs = tmp_path / "r.json", tmp_path / "inputs.json"
    assert dml_ep_cli("compare", MODELS / "mlp.onnx", "--iterations", 3, "--seed", 5, "--json", path, "--save-inputs", inputs,
                      "--quiet", "--reference", "ort-exact")[0] == 0  # exact on every host (see above)
    assert len(json.loads(path.read_text())["models"]) == 3
    feeds = json.loads(inputs.read_text())
    assert len(feeds) == 3
    for offset in range(3):
        single = tmp_path / f"seed{offset}.json"
        assert dml_ep_cli("compare", MODELS / "mlp.onnx", "--seed", 5 + offset, "--save-inputs", single, "--quiet",
                          "--reference", "ort-exact")[0] == 0
        assert json.loads(single.read_text())[0] == feeds[offset]


@pytest.mark.host_sensitive
def test_only_differing_lists_the_nodes_that_are_not_bit_exact(tmp_path):
    path = tmp_path / "r.json"
    status, out, _ = dml_ep_cli("compare", DIFFERING, "--per-node", "--only-differing", "--json", path, "--quiet")
    nodes = json.loads(path.read_text())["models"][0]["nodes"]
    differing = [n["node"] for n in nodes if (n["isolated"] or {}).get("differing") or any(p["differing"] for p in n["propagated"])]
    assert 0 < len(differing) < len(nodes)
    table = out[out.index("node by node"):out.index("on DirectML")]
    assert f"the {len(differing)} of {len(nodes)} not bit-exact" in table
    shown = [line.split()[0] for line in table.splitlines()[2:] if line.strip()]
    assert shown == differing


@pytest.mark.parametrize("argv, hint", [
    (["compare", "MODEL", "--jsn", "r.json"], "did you mean --json?"),
    (["compare", "MODEL", "--onnxrt"], "dml-ep compare runs onnxruntime's CPU EP itself"),
    (["run", "MODEL", "--save-input-data", "i.json"], "--save-input-data: --save-inputs"),
    (["inspect", "MODEL", "--per-node"], "did you mean --nodes?"),  # compare's option; inspect's own node listing
])
def test_an_unknown_option_gets_a_hint(argv, hint):
    status, _, err = dml_ep_cli(*[str(MODELS / "mlp.onnx") if a == "MODEL" else a for a in argv])
    assert status == 2 and err.count("\n") == 1 and "unrecognized arguments" in err
    assert hint in err


@pytest.mark.host_sensitive
def test_a_polygraphy_tolerance_is_taken_not_refused():
    status, _, err = dml_ep_cli("compare", MODELS / "mlp.onnx", "--atol", "1e-3", "--rtol", "1e-3", "--quiet", "--reference", "ort-exact")
    assert status == 0, err  # ort-exact: within them on every host (see above)
    status, _, err = dml_ep_cli("compare", MODELS / "mlp.onnx", "--atol", "-1")
    assert status == 2 and "a tolerance is a number >= 0" in err


def test_polygraphy_semantics_element_by_element():
    """Hand-computed: an element fails only when out of both --atol and --rtol; a zero reference
    counts as 2^-52 (Polygraphy's epsilon)."""
    from dml_ep.reports.report import Tolerance, out_of_tolerance

    expected = np.array([100.0, 1.0, 0.0, 0.0], np.float32)
    actual = np.array([100.5, 1.2, 1e-20, 0.1], np.float32)
    tolerance = Tolerance(atol={"": 0.15}, rtol={"": 0.01})
    assert out_of_tolerance("y", actual, expected, None, tolerance).tolist() == [False, True, False, False]
    assert out_of_tolerance("y", actual, expected, None, Tolerance(atol={"": 0.0}, rtol={"": 0.01})).tolist() == [False, True, False, True]
    # a quantized tensor (step 0.5) passes within --steps or within --atol
    assert out_of_tolerance("q", actual, expected, 0.5, Tolerance(steps=0)).tolist() == [True, False, False, False]
    assert not out_of_tolerance("q", actual, expected, 0.5, Tolerance(steps=1)).any()
    assert not out_of_tolerance("q", actual, expected, 0.5, Tolerance(atol={"q": 0.6})).any()
