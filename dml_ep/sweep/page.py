"""A sweep's rows (:func:`dml_ep.sweep.tasks.result_row`) as one HTML page that works offline from
disk: the counts by status, the versions and hosts the tasks ran with, a matrix of models by
settings, and one sortable, filterable table of the tasks, each linking to its own HTML report.

The page is the Jinja2 template ``dml_ep/reports/assets/sweep.html.j2`` (autoescaped), the counts written
here and the tasks embedded as JSON for ``sweep.js``, which draws the matrix and the table (2,000
tasks in about a tenth of a second) and sets ``data-render-ms`` on ``<html>`` once drawn. Only what
the page shows goes into it, never a task's whole report. Links to the tasks' pages are relative to
the page's directory, so that they keep working when the page and those pages move together."""

from __future__ import annotations

import collections
import json
import math
import os
import urllib.parse
from importlib import resources
from pathlib import Path

import jinja2
import markupsafe

from ..core import files
from ..reports.text import counts_text
from .run import settings_label
from .tasks import STATUSES


def write_summary_page(rows: list[dict], db: str, path: str) -> str:
    """Write the summary page of ``rows`` (of the database ``db``) to ``path``; the line that says so."""
    files.write_files({path: files.text_writer(summary_page(rows, os.path.basename(db), path))})
    return f"wrote {path}: the summary page of {len(rows)} task(s)"


def summary_page(rows: list[dict], title: str, page_path: str) -> str:
    """The page of a sweep's ``rows``, to be written to ``page_path`` (where its links start from)."""
    page_dir = os.path.dirname(os.path.abspath(page_path))
    models_dir = _models_dir(rows)
    tasks = [_task(row, models_dir, page_dir) for row in rows]
    # every "<" escaped (JSON reads \u003c back as "<"): "</script" in a model's name would end the data block
    data = json.dumps({"tasks": tasks, "statuses": STATUSES}, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    assets = resources.files("dml_ep.reports") / "assets"
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = environment.from_string((assets / "sweep.html.j2").read_text(encoding="utf-8"))
    counts = collections.Counter(row["status"] for row in rows)
    return template.render(
        title=title, tasks=len(rows), statuses=[(status, counts[status]) for status in STATUSES],
        models=len({row["model"] for row in rows}), settings=len({json.dumps(row["settings"], sort_keys=True) for row in rows}),
        models_dir=models_dir, versions=_versions(rows), hosts=_distinct(row["host"] for row in rows),
        data=markupsafe.Markup(data), css=(assets / "sweep.css").read_text(encoding="utf-8"),
        script=(assets / "sweep.js").read_text(encoding="utf-8"))


def _task(row: dict, models_dir: str, page_dir: str) -> dict:
    """What the page shows of one row. JSON has no infinity: a difference without bound is "inf"."""
    max_diff = row["max_diff"]
    return {"key": row["key"], "model": row["model"], "name": os.path.relpath(row["model"], models_dir) if models_dir else row["model"],
            "settings": settings_label(row), "settings_key": json.dumps(row["settings"], sort_keys=True),
            "arithmetic": row["arithmetic"], "ort_release": row["ort_release"], "feature_level": row["feature_level"],
            "status": row["status"], "reason": row["reason"], "exact_percent": row["exact_percent"],
            "max_diff": "inf" if max_diff is not None and math.isinf(max_diff) else max_diff, "max_diff_unit": row["max_diff_unit"],
            "causes": counts_text(row["causes"]),
            "dml_macs_percent": row["dml_macs_percent"], "seconds": row["seconds"],
            "href": _link(row["html"], page_dir) if row["html"] else None}


def _models_dir(rows: list[dict]) -> str:
    """The directory the models' names are shown from: the deepest one holding them all."""
    models = sorted({row["model"] for row in rows})
    if not models:
        return ""
    return os.path.dirname(models[0]) if len(models) == 1 else os.path.commonpath(models)


def _link(html: str, page_dir: str) -> str:
    """The href of a task's page from the summary page's directory (a file: URI where there is no
    relative path, another drive on Windows)."""
    try:
        relative = os.path.relpath(html, page_dir)
    except ValueError:
        return Path(html).as_uri()
    return urllib.parse.quote(Path(relative).as_posix())


def _versions(rows: list[dict]) -> list[tuple[str, str]]:
    """Each version the rows name (dml_ep, onnxruntime, ..., platform) with its distinct values."""
    names = list(dict.fromkeys(name for row in rows for name in row["versions"]))
    return [(name, " / ".join(_distinct(row["versions"].get(name) for row in rows))) for name in names]


def _distinct(values) -> list[str]:
    """The values, each once, in order of first appearance, None left out."""
    return [str(value) for value in dict.fromkeys(values) if value is not None]
