"""What the installed package says about itself: its dependencies (no onnxruntime forced beside
onnxruntime-directml), licence, one version, ``python -m dml_ep``, and a clear error without onnxruntime."""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest

import dml_ep

ROOT = Path(__file__).resolve().parents[2]
# A Python whose ``import onnxruntime`` fails, as on a machine where no onnxruntime is installed.
WITHOUT_ONNXRUNTIME = "import sys; sys.modules['onnxruntime'] = None; "


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)


def test_onnxruntime_comes_from_an_extra_only():
    requires = importlib.metadata.requires("dml_ep")
    runtimes = [r for r in requires if r.startswith("onnxruntime")]
    assert sorted(runtimes) == ['onnxruntime-directml>=1.17; extra == "directml"', 'onnxruntime>=1.17; extra == "cpu"']


def test_licence_and_one_version():
    metadata = importlib.metadata.metadata("dml_ep")
    assert metadata["License-Expression"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert metadata["Version"] == dml_ep.__version__
    assert f"## [{dml_ep.__version__}]" in (ROOT / "CHANGELOG.md").read_text()
    assert (Path(dml_ep.__file__).parent / "py.typed").is_file()


def test_python_dash_m_version():
    result = subprocess.run([sys.executable, "-m", "dml_ep", "--version"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.startswith(f"dml-ep {dml_ep.__version__} (onnxruntime {ort.__version__}, ")


def test_cli_without_onnxruntime_says_what_to_install_in_one_line():
    result = python(WITHOUT_ONNXRUNTIME + "from dml_ep.__main__ import main; sys.exit(main(sys.argv[1:]))",
                    "inspect", "models/mlp.onnx")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("dml-ep: error: no onnxruntime is importable") and result.stderr.count("\n") == 1
    assert "dml_ep[cpu]" in result.stderr and "dml_ep[directml]" in result.stderr


def test_version_without_onnxruntime_prints_the_version():
    result = python(WITHOUT_ONNXRUNTIME + "from dml_ep.__main__ import main; sys.exit(main(sys.argv[1:]))", "--version")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith(f"dml-ep {dml_ep.__version__} (onnxruntime not installed: pip install 'dml_ep[cpu]'; onnx ")


@pytest.mark.parametrize("use", ["dml_ep.InferenceSession", "dml_ep.get_available_providers()"])
def test_library_without_onnxruntime_raises_a_typed_import_error(use):
    result = python(WITHOUT_ONNXRUNTIME + f"""
import dml_ep
from dml_ep.core.errors import MissingRuntimeError
assert not hasattr(dml_ep, "__wrapped__")  # names outside the API stay plain AttributeErrors
try:
    {use}
except MissingRuntimeError as exc:
    assert isinstance(exc, ImportError)
    print(exc)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no onnxruntime is importable")
