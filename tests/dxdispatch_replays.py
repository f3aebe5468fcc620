"""DxDispatch exports read back and replayed with dml_ep's kernels, checked bit for bit against
dml_ep's own run and against DxDispatch's schema.

DxDispatch's ``_schema.json`` and example models are read from ``../shared/dxdispatch/`` beside the
repository (they are not copied into it); a check that needs them skips when it is absent, except
in CI (the CI environment variable set), which lays shared/ beside the clone: there it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dml_ep.interop import dxdispatch

SHARED = Path(__file__).resolve().parents[2] / "shared" / "dxdispatch"
MISSING_SHARED = f"DxDispatch's schema and examples are not at {SHARED}"


def shipped_schema() -> dict:
    return json.loads((SHARED / "_schema.json").read_text())


def schema_validator(documented_forms: bool = True):
    """A validator of DxDispatch's ``_schema.json`` (commit a9614e8), with one defect fixed and,
    with ``documented_forms``, the two forms DxDispatch reads and documents (doc/Guide.md, "Buffer:
    File Data Initializer" and "Write File") but the schema lags behind on:

    - ``arrayInitializer.items`` is ``["number", "string"]``, the tuple form of older drafts with
      type names where schemas go; under the schema's own draft 2020-12 it is not a schema at all
      (``test_shipped_schema_fails_only_at_array_items`` pins that). Meant: numbers or strings.
    - ``initialValues`` may be ``{"sourcePath": FILE}`` (a .npy or raw file);
    - a command may be ``{"type": "writeFile", "resource": ..., "targetPath": ..., "dimensions": [...]}``.
    """
    import jsonschema

    schema = shipped_schema()
    defs = schema["$defs"]
    defs["arrayInitializer"]["items"] = {"type": ["number", "string"]}
    if documented_forms:
        defs["fileInitializer"] = {
            "type": "object", "properties": {"sourcePath": {"type": "string"}}, "required": ["sourcePath"],
        }
        defs["buffer"]["properties"]["initialValues"]["oneOf"].append({"$ref": "#/$defs/fileInitializer"})
        defs["writeFileCommand"] = {
            "type": "object",
            "properties": {
                "resource": {"type": "string"},
                "targetPath": {"type": "string"},
                "dimensions": {"type": "array", "items": {"type": "integer", "exclusiveMinimum": 0}},
            },
            "required": ["resource", "targetPath"],
        }
        defs["command"]["properties"]["type"]["enum"].append("writeFile")
        defs["command"]["allOf"].append({"if": {"properties": {"type": {"const": "writeFile"}}}, "then": {"$ref": "#/$defs/writeFileCommand"}})
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(model_json: dict) -> None:
    """``model_json`` against DxDispatch's schema: without the schema the test skips, saying so (fails in CI)."""
    if not SHARED.is_dir():
        if os.environ.get("CI"):
            pytest.fail(MISSING_SHARED)
        pytest.skip(MISSING_SHARED)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in schema_validator().iter_errors(model_json)]
    assert not errors, errors[:5]


def export_and_replay(model, directory, feeds=None, **options):
    """Export, check the files against the schema and dml_ep's own direct run, replay; return
    the export and the replay's results."""
    made = dxdispatch.export(model, str(directory), feeds, **options)
    on_disk = json.loads((Path(directory) / "model.json").read_text())
    assert on_disk == made.model
    replayed = dxdispatch.load(str(directory)).run(arithmetic=options.get("arithmetic", "directml"))
    assert set(replayed) == set(made.outputs)
    for name in made.outputs:
        np.testing.assert_array_equal(replayed[name], made.values[name], strict=True, err_msg=name)
    for name, path in made.expected.items():
        np.testing.assert_array_equal(np.load(Path(directory) / path), made.values[name], strict=True, err_msg=path)
    validate(on_disk)  # last: where the schema is missing it skips, the replay checked
    return made, replayed
