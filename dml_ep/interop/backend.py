"""ONNX's backend API (``onnx.backend.base.Backend``) over :class:`dml_ep.InferenceSession`.

It lets ONNX's own test runner (``onnx.backend.test.BackendTest``) drive dml_ep. DirectML is
emulated on the host, so the only device is the CPU. ``feature_level`` and ``arithmetic`` keyword
arguments reach the InferenceSession unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from ..core.errors import FeedError, ModelError
from ..core.graph import INTERNAL_MAX_OPSET, internal_model
from ..runtime.session import InferenceSession

_SESSION_KWARGS = ("feature_level", "arithmetic", "u8s8_saturation", "engine")
# run_node's default ai.onnx opset: the newest the oldest supported onnxruntime loads.
NODE_OPSET = INTERNAL_MAX_OPSET


class DmlEpRep(BackendRep):
    """A prepared model: ``run(inputs)`` takes arrays in graph-input order (or a name → array dict)."""

    def __init__(self, session: InferenceSession):
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        names = [i.name for i in self.session.get_inputs()]
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(arrays) != len(names):
                raise FeedError(f"{len(arrays)} inputs given, the model has {len(names)}: {', '.join(names)}")
            feeds = dict(zip(names, arrays))
        outputs = self.session.run(None, feeds)
        output_names = [o.name for o in self.session.get_outputs()]
        return namedtupledict("Outputs", output_names)(*outputs)


class DmlEpBackend(Backend):
    """dml_ep as an ONNX backend."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Only the CPU: dml_ep emulates DirectML there."""
        return Device(device).type == DeviceType.CPU

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> DmlEpRep:
        if not cls.supports_device(device):
            raise RuntimeError(f"dml_ep runs on the CPU only, not on {device!r}")
        unknown = set(kwargs) - set(_SESSION_KWARGS)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(sorted(unknown))} (known: {', '.join(_SESSION_KWARGS)})")
        return DmlEpRep(InferenceSession(model, **kwargs))

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None, **kwargs: Any) -> tuple:
        """Run one node as a one-node model (as ONNX's reference backends do).

        ``inputs`` are arrays for the node's non-empty inputs, in order; ``opset_version`` sets
        the ai.onnx opset (default: ``NODE_OPSET``); ``outputs_info`` gives (dtype, shape) per
        output, otherwise shape inference types the outputs.
        """
        opset = kwargs.pop("opset_version", NODE_OPSET)
        names = [name for name in node.input if name]
        if len(names) != len(inputs):
            raise FeedError(f"{len(inputs)} inputs given, node {node.op_type} has {len(names)}: {', '.join(names)}")
        feeds = dict(zip(names, (np.asarray(x) for x in inputs)))
        graph_inputs = [
            onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for name, a in feeds.items()
        ]
        outputs = [name for name in node.output if name]
        if outputs_info is None:
            graph_outputs = [onnx.helper.make_empty_tensor_value_info(name) for name in outputs]
        else:
            graph_outputs = [
                onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)
                for name, (dtype, shape) in zip(outputs, outputs_info)
            ]
        graph = onnx.helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
        model = internal_model(graph, opset, [node.domain] if node.domain not in ("", "ai.onnx") else [])
        if outputs_info is None:
            model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
            untyped = [o.name for o in model.graph.output if not o.type.HasField("tensor_type")]
            if untyped:
                raise ModelError(
                    f"shape inference cannot type output(s) {', '.join(untyped)} of {node.domain or 'ai.onnx'} "
                    f"{node.op_type}: pass outputs_info"
                )
        return cls.run_model(model, feeds, device, **kwargs)


is_compatible = DmlEpBackend.is_compatible
prepare = DmlEpBackend.prepare
run_model = DmlEpBackend.run_model
run_node = DmlEpBackend.run_node
supports_device = DmlEpBackend.supports_device
