"""DxDispatch models: dml_ep's plan written for DirectML's own command-line runner, and read back.

DxDispatch (microsoft/DirectML, folder ``DxDispatch``) executes DirectML operators described in
JSON on a Direct3D 12 device. :func:`export` writes the DirectML operators of a model's plan in
that format, with the inputs and the values the CPU fallback makes, so that the same descs run on
real DirectML and their outputs can be diffed with dml_ep's; :func:`load` reads such a model and
runs it with dml_ep's kernels, which keeps the exporter honest without Windows.
"""

from .descs import from_dict, to_dict
from .export import COMMAND_LINE, Export, export
from .replay import DxDispatchModel, load

__all__ = ["COMMAND_LINE", "DxDispatchModel", "Export", "export", "from_dict", "load", "to_dict"]
