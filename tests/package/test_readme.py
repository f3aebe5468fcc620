"""The documentation's examples run as written: every ``sh`` and ``python`` block of README.md (after
its set-up section) and of docs/guide.md, in order, each page in one scratch directory holding a
copy of ``models/``, with this interpreter's scripts (dml-ep, polygraphy) first on PATH. Each shell
line must exit 0, except ``dml-ep compare``, which exits 1 when it finds differences (the pages
document that status; some examples are about them).

The examples must hold on any host: README's tour also runs with dml-ep, polygraphy and python under
``qemu-x86_64 -cpu Haswell``, an AVX2 CPU without VNNI, where onnxruntime's uint8 x int8 GEMMs
saturate, and must exit there as it does natively.

Not run here: README's set-up block, which is what ``.ci/run`` runs (checked below to be the same
commands), and ``console``, ``text`` and ``bat`` blocks (shell variables, program output, DxDispatch
on Windows). Also checked: the paths README.md and docs/ name are inside the repository and exist.
"""

import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
SET_UP = "## Set-up (fresh machine)"
SCRIPTS = Path(sys.executable).parent  # this interpreter's dml-ep and polygraphy
TIMEOUT = 600  # seconds a command may take, under emulation too
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="the pages' shell blocks are POSIX shell")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def example_blocks(doc: str) -> list[tuple[str, str]]:
    """The ``sh`` and ``python`` blocks of ``doc`` (a path from the repository's root) that run:
    README's after the set-up section's, all of any other page's."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = blocks(text[text.index(SET_UP):])[1:] if doc == "README.md" else blocks(text)
    return [block for block in found if block[0] in ("sh", "python")]


def commands(code: str) -> list[str]:
    """The commands of a shell block, without comments."""
    return [line.split("  #")[0].strip() for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_examples(doc: str, work: Path, env: dict[str, str], python: list[str]) -> list[str]:
    """Runs the examples of ``doc`` in ``work``, given a copy of ``models/``, with ``env`` and
    ``python`` (the command line that runs a python block); returns what ran."""
    shutil.copytree(ROOT / "models", work / "models")
    ran = []
    for language, code in example_blocks(doc):
        if language == "python":
            result = subprocess.run([*python, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT)
            assert result.returncode == 0, f"{doc}: python block failed:\n{code}\n{result.stderr[-2000:]}"
            ran.append("python block")
            continue
        for command in commands(code):
            result = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT)
            allowed = (0, 1) if command.startswith("dml-ep compare") else (0,)
            assert result.returncode in allowed, f"{doc}: {command}: exit {result.returncode}\n{result.stderr[-2000:]}"
            assert "Traceback" not in result.stderr, f"{doc}: {command}\n{result.stderr[-2000:]}"
            ran.append(command)
    return ran


def native_env() -> dict[str, str]:
    return dict(os.environ, PATH=os.pathsep.join([str(SCRIPTS), os.environ.get("PATH", "")]))


def test_set_up_block_is_what_ci_runs():
    """The set-up block's test command is the one .ci/run runs, after the install README gives."""
    set_up = commands(blocks(README[README.index(SET_UP):])[0][1])
    assert len(set_up) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    test_line = set_up[1].split(" && ")
    install = next(c for c in test_line if c.startswith("pip install"))
    assert f"python -m {install}" in ci.replace("--quiet ", "")
    tests = " && ".join(test_line[test_line.index(install) + 1:])
    assert tests in ci.splitlines()


@pytest.mark.host_sensitive
@needs_bash
@pytest.mark.parametrize("doc, at_least", [("README.md", 8), ("docs/guide.md", 20)])
def test_examples_run(doc, at_least, tmp_path):
    ran = run_examples(doc, tmp_path, native_env(), [sys.executable])
    assert len(ran) >= at_least  # the examples were found


def emulator() -> str:
    """qemu-x86_64, on an x86-64 machine; else the test skips, saying so, except where
    DML_EP_REQUIRE_QEMU is set (CI), where it fails (as scripts/qemu_tests.sh does)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu and platform.machine() == "x86_64":
        return qemu
    message = "needs qemu-x86_64 on x86-64 (apt-get install qemu-user)"
    if os.environ.get("DML_EP_REQUIRE_QEMU"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.qemu_stage  # it starts qemu-x86_64 itself, for minutes: scripts/qemu_tests.sh runs it natively, after its emulated runs
@pytest.mark.native_children
@pytest.mark.host_sensitive
@needs_bash
def test_readme_tour_runs_on_an_avx2_cpu_without_vnni(tmp_path):
    """README's tour with dml-ep, polygraphy and python run under ``qemu-x86_64 -cpu Haswell``
    (wrapper scripts first on PATH): each line must exit as the native test requires, on a CPU
    where onnxruntime's uint8 x int8 products saturate (checked first, else the run proves nothing)."""
    emulated = [emulator(), "-cpu", "Haswell", sys.executable]
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for name, command in {"dml-ep": [*emulated, "-m", "dml_ep"], "polygraphy": [*emulated, str(SCRIPTS / "polygraphy")]}.items():
        (wrappers / name).write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n')
        (wrappers / name).chmod(0o755)
    env = native_env()
    env["PATH"] = os.pathsep.join([str(wrappers), env["PATH"]])
    if "OPENBLAS_CORETYPE" in env:  # forced to the host's processor: the emulated one's instead (scripts/qemu_tests.sh)
        env["OPENBLAS_CORETYPE"] = "Haswell"
    probe = subprocess.run([*emulated, "-c", "from dml_ep.numerics.arithmetic import host_saturates_u8s8; print(host_saturates_u8s8())"],
                           env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert probe.stdout.split() == ["True"], probe.stdout + probe.stderr
    work = tmp_path / "tour"
    work.mkdir()
    ran = run_examples("README.md", work, env, emulated)
    assert {command.split()[0] for command in ran} >= {"dml-ep", "polygraphy", "python"}, ran


PATH_IN_TEXT = re.compile(r"`((?:\.\./|/)?(?:[\w.-]+/)+[\w.*-]*)`")


@pytest.mark.parametrize("doc", ["README.md", "CHANGELOG.md", "models/README.md", *(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))])
def test_docs_name_only_files_inside_the_repository(doc):
    """No link or path to a file outside the repository; relative paths to folders and files of
    the repository exist (paths the examples write, and names in other repositories, aside)."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert "../" not in re.sub(r"```.*?```", "", text, flags=re.S), f"{doc} points outside the repository"
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"\w+://", link):
            assert (ROOT / doc).parent.joinpath(link).exists(), f"{doc}: link {link} names no file"
    for path in PATH_IN_TEXT.findall(text):
        top = path.split("/")[0]
        if top in ("dml_ep", "docs", "models", "scripts", "tests") and "*" not in path:
            assert (ROOT / path).exists(), f"{doc}: {path} names no file of the repository"
