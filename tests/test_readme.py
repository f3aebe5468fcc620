"""README.md's examples run as written: every ``sh`` and ``python`` block, in order, in one scratch
directory holding a copy of ``models/``, with this interpreter's scripts (dml-ep, polygraphy) first on
PATH. Each shell line must exit 0, except ``dml-ep compare``, which exits 1 when it finds differences
(README documents that status; the examples of u8s8 saturation and of QDQ fusion are about them).

Not run here: the set-up block, which is what ``.ci/run`` runs (checked below to be the same
commands), and ``bat`` blocks (DxDispatch on Windows). Also checked: the paths README.md and docs/
name are inside the repository and exist.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
SET_UP = "## Set-up (fresh machine)"


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def example_blocks() -> list[tuple[str, str]]:
    """README's blocks after the set-up section's, in ``sh`` and ``python``."""
    after_set_up = README[README.index(SET_UP):]
    return [b for b in blocks(after_set_up)[1:] if b[0] in ("sh", "python")]


def commands(code: str) -> list[str]:
    """The commands of a shell block, without comments."""
    return [line.split("  #")[0].strip() for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]


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


@pytest.mark.skipif(shutil.which("bash") is None, reason="README's shell blocks are POSIX shell")
def test_readme_examples_run(tmp_path):
    shutil.copytree(ROOT / "models", tmp_path / "models")
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    ran = []
    for language, code in example_blocks():
        if language == "python":
            result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, f"README python block failed:\n{code}\n{result.stderr}"
            ran.append("python block")
            continue
        for command in commands(code):
            result = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            allowed = (0, 1) if command.startswith("dml-ep compare") else (0,)
            assert result.returncode in allowed, f"{command}: exit {result.returncode}\n{result.stderr[-2000:]}"
            assert "Traceback" not in result.stderr, command
            ran.append(command)
    assert len(ran) >= 15  # the examples were found


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
