"""A sweep's summary page (``dml_ep.sweep.page``), opened in headless Chromium as a reader would: made
from a real sequential sweep, it draws a row per task without console errors or requests, sorts and
filters to exactly the tasks the rows say, links each task's report by a path that survives moving
the folder, shows a failed task's reason, keeps hostile names text, and draws 2,000 tasks in well
under a second and a half. The expectations are computed here from the rows themselves."""

from __future__ import annotations

import math
import os
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from browser import keep_screenshot, open_report
from dml_ep.passes import DEFAULT_RELEASE
from dml_ep.sweep.db import SweepDatabase
from dml_ep.sweep.page import summary_page
from dml_ep.sweep.run import sweep
from dml_ep.sweep.tasks import STATUSES

pytestmark = pytest.mark.host_sensitive  # every test compares with the host's onnxruntime (tests/host_sensitivity.py)

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
SHIPPED = [MODELS / "mlp.onnx", MODELS / "small_cnn.qdq.onnx", MODELS / "transformer_block.dynamic.onnx",
           MODELS / "llm" / "tiny_llm.int4.dml.onnx"]
SCREENSHOT = ROOT / "docs" / "sweep.png"
FILTERS = {"status-filter": "status", "arithmetic-filter": "arithmetic", "release-filter": "ort_release", "level-filter": "feature_level"}
HOSTILE = "<img src=x onerror=alert(1)>"
LARGE_RENDER_BUDGET_MS = 1500  # 2,000 tasks, drawn in about 0.2 s here


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A sequential sweep of small shipped models and of a file that is not ONNX (its tasks fail),
    in two arithmetics, the tasks' pages in ``tasks/`` of the folder returned."""
    folder = tmp_path_factory.mktemp("sweep")
    broken = folder / "not_a_model.onnx"
    broken.write_text("not an ONNX model")
    rows = sweep([*map(str, SHIPPED), str(broken)], ["directml", "onnxruntime"], [DEFAULT_RELEASE], db=str(folder / "sweep.db"),
                 sequential=True, html_dir=str(folder / "tasks"))
    assert {row["status"] for row in rows} >= {"ok", "failed"}
    return folder, rows


def write_page(path: Path, rows: list[dict], title: str = "sweep") -> Path:
    path.write_text(summary_page(rows, title, str(path)), encoding="utf-8")
    return path


def shown_keys(opened) -> list[str]:
    return opened.evaluate("Array.from(document.querySelectorAll('#tasks tbody tr'), row => row.dataset.key)")


def cell_texts(opened, key: str) -> dict[str, str]:
    """The task's row, cell by cell, by its column's header."""
    return opened.page.evaluate("""key => {
        const headers = Array.from(document.querySelectorAll('#tasks thead th'), th => th.textContent.trim());
        const row = document.querySelector(`#tasks tbody tr[data-key="${key}"]`);
        return Object.fromEntries(Array.from(row.cells, (cell, i) => [headers[i], cell.textContent]));
    }""", key)


def searched(row: dict, needle: str) -> bool:
    """What the filter box matches: the model's path, its causes, its reason."""
    return any(needle.lower() in text.lower() for text in [row["model"], *row["causes"], row["reason"] or ""])


def test_the_page_of_a_sweep_has_a_row_per_task_and_fetches_nothing(browser, swept):
    folder, rows = swept
    opened = open_report(browser, write_page(folder / "index.html", rows))
    assert opened.errors == [] and opened.requests == []
    assert shown_keys(opened) == [row["key"] for row in rows]
    assert opened.evaluate("document.getElementById('row-count').textContent") == f"{len(rows)} of {len(rows)} tasks shown"
    counts = opened.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#counts [data-status]'), "
                             "s => [s.dataset.status, s.textContent]))")
    assert counts == {status: f"{sum(row['status'] == status for row in rows)} {status}" for status in STATUSES}
    for row in rows:
        cells = cell_texts(opened, row["key"])
        assert opened.evaluate(f"document.querySelector('#tasks tr[data-key=\"{row['key']}\"] td').title") == row["model"]
        assert (cells["arithmetic"], cells["ort release"], cells["status"]) == (row["arithmetic"], row["ort_release"], row["status"])
        if row["exact_percent"] is None:
            assert cells["exact %"] == ""
        else:  # truncated to 2 decimals: 100.00 only when every element is equal
            assert float(cells["exact %"]) <= row["exact_percent"] < float(cells["exact %"]) + 0.01
        if row["max_diff"] is not None:
            value, unit = cells["max diff"].split()
            assert math.isclose(float(value), row["max_diff"], rel_tol=1e-2) and unit == row["max_diff_unit"]
    matrix = opened.evaluate("Array.from(document.querySelectorAll('#matrix td[data-key]'), td => td.dataset.key)")
    assert sorted(matrix) == sorted(row["key"] for row in rows)


def test_sorting_by_exact_percent_orders_numerically_with_tasks_without_one_last(browser, swept):
    folder, rows = swept
    opened = open_report(browser, write_page(folder / "index.html", rows))
    values = [row["exact_percent"] for row in rows]
    assert len({value for value in values if value is not None}) > 2 and None in values  # 100 before 64 as text: the sort can fail
    header = "#tasks th[data-key=exact_percent]"
    opened.page.click(header)
    ascending = sorted(range(len(rows)), key=lambda i: (values[i] is None, values[i] or 0, i))
    assert shown_keys(opened) == [rows[i]["key"] for i in ascending]
    assert opened.page.get_attribute(header, "aria-sort") == "ascending"
    opened.page.click(header)
    descending = sorted(range(len(rows)), key=lambda i: (values[i] is None, -(values[i] or 0), i))
    assert shown_keys(opened) == [rows[i]["key"] for i in descending]
    assert opened.page.get_attribute(header, "aria-sort") == "descending"


def test_a_difference_without_bound_reads_inf_and_sorts_above_every_number(browser, swept, tmp_path):
    _, rows = swept
    compared = [row for row in rows if row["max_diff"] is not None]
    crafted = [dict(compared[0], key="unbounded", max_diff=math.inf, max_diff_unit="LSB"),
               dict(compared[0], key="large", max_diff=1e9), dict(compared[0], key="small", max_diff=2.0),
               dict(compared[0], key="tiny", max_diff=5e-7),  # "5e-7" after "2" as text, even in numeric collation
               dict(compared[0], key="none", max_diff=None, max_diff_unit=None)]
    opened = open_report(browser, write_page(tmp_path / "index.html", crafted))
    assert opened.errors == []
    assert cell_texts(opened, "unbounded")["max diff"] == "inf LSB"
    opened.page.click("#tasks th[data-key=max_diff]")
    assert shown_keys(opened) == ["tiny", "small", "large", "unbounded", "none"]
    opened.page.click("#tasks th[data-key=max_diff]")
    assert shown_keys(opened) == ["unbounded", "large", "small", "tiny", "none"]


def test_each_filter_narrows_the_table_to_exactly_the_matching_tasks(browser, swept):
    folder, rows = swept
    opened = open_report(browser, write_page(folder / "index.html", rows))
    page = opened.page
    for select, field in FILTERS.items():
        values = sorted({row[field] for row in rows})
        assert page.eval_on_selector(f"#{select}", "s => Array.from(s.options, o => o.value)") == ["", *values]
        for value in values:
            page.select_option(f"#{select}", value)
            expected = [row["key"] for row in rows if row[field] == value]
            assert shown_keys(opened) == expected
            assert page.text_content("#row-count") == f"{len(expected)} of {len(rows)} tasks shown"
        page.select_option(f"#{select}", "")
    causes = [cause for row in rows for cause in row["causes"]]
    for needle in ["MLP", "not an onnx model", *causes[:1]]:
        page.fill("#filter", needle)
        expected = [row["key"] for row in rows if searched(row, needle)]
        assert expected and len(expected) < len(rows)
        assert shown_keys(opened) == expected
    page.fill("#filter", "onnx")
    page.select_option("#arithmetic-filter", "onnxruntime")
    assert shown_keys(opened) == [row["key"] for row in rows if searched(row, "onnx") and row["arithmetic"] == "onnxruntime"]


def test_report_links_resolve_after_the_folder_moves(browser, swept, tmp_path):
    """The page and the tasks' pages moved together: each link (table and matrix) still finds its task's page."""
    folder, rows = swept
    write_page(folder / "index.html", rows)
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    opened = open_report(browser, moved / "index.html")
    links = opened.evaluate("Array.from(document.querySelectorAll('a'), a => [a.closest('[data-key]').dataset.key, a.href])")
    with_page = {row["key"]: Path(row["html"]).name for row in rows if row["html"]}
    assert with_page and sorted({key for key, _ in links}) == sorted(with_page)
    assert len(links) == 2 * len(with_page)  # the table's and the matrix's
    for key, href in links:
        target = Path(urllib.request.url2pathname(urllib.parse.urlparse(href).path))
        assert target.is_file() and target.parent == moved / "tasks" and target.name == with_page[key]


def test_a_failed_task_shows_its_reason(browser, swept):
    folder, rows = swept
    opened = open_report(browser, write_page(folder / "index.html", rows))
    failed = [row for row in rows if row["status"] == "failed"]
    assert failed
    for row in failed:
        assert "not an ONNX model" in row["reason"]
        cells = cell_texts(opened, row["key"])
        assert (cells["status"], cells["causes / reason"], cells["report"]) == ("failed", row["reason"], "")
        assert opened.evaluate(f"document.querySelector('#matrix td[data-key=\"{row['key']}\"]').textContent") == "failed"


def test_hostile_names_and_reasons_stay_text(browser, swept, tmp_path):
    """What a row holds enters the page as text: no element it names is made, no script it holds runs,
    and "</script>" in it does not end the page's data."""
    _, rows = swept
    reason = "</script><script>document.title = 'ran'</script><!--"
    model = f"/models/{HOSTILE}.onnx"
    hostile = [dict(rows[0], key="hostile-model", model=model, arithmetic="<i>directml</i>"),
               dict(rows[0], key="hostile-reason", model=model, status="failed", reason=reason, causes={"<b>cause</b>": 3}, html=None)]
    opened = open_report(browser, write_page(tmp_path / "index.html", hostile, title=HOSTILE))
    assert opened.errors == [] and opened.requests == []
    assert opened.evaluate("document.querySelectorAll('img, i, h1 *, #tasks b, #matrix b').length") == 0
    assert opened.evaluate("document.scripts.length") == 2
    assert opened.evaluate("document.title") == f"dml_ep sweep: {HOSTILE}"
    assert opened.evaluate("document.querySelector('h1').textContent") == HOSTILE
    assert cell_texts(opened, "hostile-model")["model"] == f"{HOSTILE}.onnx"
    assert cell_texts(opened, "hostile-model")["arithmetic"] == "<i>directml</i>"
    assert cell_texts(opened, "hostile-reason")["causes / reason"] == reason
    assert "<i>directml</i>" in opened.evaluate("Array.from(document.getElementById('arithmetic-filter').options, o => o.text)")


def test_2000_tasks_render_in_under_1_5_s(browser, swept, tmp_path):
    _, rows = swept
    many = [dict(row, key=f"{index}-{row['key']}", model=row["model"].replace(".onnx", f".{index // len(rows)}.onnx"))
            for index, row in zip(range(2000), rows * (2000 // len(rows) + 1))]
    opened = open_report(browser, write_page(tmp_path / "index.html", many))
    assert opened.errors == []
    assert int(opened.evaluate("document.documentElement.dataset.renderMs")) < LARGE_RENDER_BUDGET_MS
    assert len(shown_keys(opened)) == 2000
    assert opened.page.text_content("#row-count") == "2000 of 2000 tasks shown"
    opened.page.click("#matrix-section summary")  # a matrix of this many models is drawn when opened (its toggle event)
    opened.page.wait_for_function("document.querySelectorAll('#matrix tbody tr').length > 0")
    assert opened.evaluate("document.querySelectorAll('#matrix tbody tr').length") == len({row["model"] for row in many})


def test_readme_sweep_screenshot_is_made_by_this_code(browser, tmp_path):
    """README's picture of a sweep: the shipped models in two arithmetics and two onnxruntime
    releases, and a file that is not ONNX once, sorted by status (failed first). DML_EP_UPDATE_SCREENSHOT=1
    writes it to docs/sweep.png; otherwise the one committed must exist and not be blank."""
    models = tmp_path / "models"
    shutil.copytree(MODELS, models, ignore=shutil.ignore_patterns("*.md"))
    broken = models / "not_a_model.onnx"
    broken.write_text("not an ONNX model")
    folder = tmp_path / "sweep"
    db, html_dir = str(folder / "sweep.db"), str(folder / "tasks")
    os.makedirs(folder)
    shipped = sorted(str(path) for path in models.rglob("*.onnx") if path != broken)
    sweep(shipped, ["directml", "onnxruntime"], [DEFAULT_RELEASE, "1.20"], db=db, sequential=True, html_dir=html_dir)
    sweep([str(broken)], ["directml"], [DEFAULT_RELEASE], db=db, sequential=True, html_dir=html_dir)
    with SweepDatabase(db) as database:
        rows = database.rows()
    opened = open_report(browser, write_page(folder / "index.html", rows, title="sweep.db"))  # as dml-ep titles it
    assert opened.errors == []
    opened.page.set_viewport_size({"width": 1400, "height": 900})
    opened.page.click("#tasks th[data-key=status]")
    picture = opened.page.screenshot()
    keep_screenshot(picture, SCREENSHOT, ROOT / "README.md")
