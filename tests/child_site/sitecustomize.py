"""A test's child Python processes (tests/conftest.py puts this folder first on their PYTHONPATH):
record their comparisons with the host's onnxruntime for the test that started them
(host_references.py), then run any sitecustomize this one hides."""

import importlib.util
import os
import sys

if os.environ.get("DML_EP_TEST_RECORD"):
    import host_references

    host_references.install()

_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    if _entry and os.path.abspath(_entry) != _here:
        _path = os.path.join(_entry, "sitecustomize.py")
        if os.path.isfile(_path):
            _spec = importlib.util.spec_from_file_location("_hidden_sitecustomize", _path)
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
            break
