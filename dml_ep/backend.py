"""The ONNX backend under the name onnx's backend tests and scripts give it, ``import dml_ep.backend as
backend``: :mod:`dml_ep.interop.backend`'s ``onnx.backend.base.Backend``, re-exported."""

from .interop.backend import DmlEpBackend, DmlEpRep, is_compatible, prepare, run_model, run_node, supports_device

__all__ = ["DmlEpBackend", "DmlEpRep", "is_compatible", "prepare", "run_model", "run_node", "supports_device"]
