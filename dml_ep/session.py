"""``dml_ep.InferenceSession``: onnxruntime's session API, executing the model as the DML EP would.

The graph rewrites and types are worked out when the session is made (:class:`Planner`); each
node's DirectML desc is made from the shapes of the tensors that reach it in a run, once per
distinct shape (DirectML descs have static sizes). A model whose input shapes are all fixed is
planned when loaded as far as its shapes do not depend on data, so that its errors show then.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import graph
from .arithmetic import Arithmetic
from .errors import DmlEpError, FeedError
from .executor import Executor
from .importer import DEFAULT_FEATURE_LEVEL
from .passes import DEFAULT_RULE_SET
from .plan import Plan
from .planner import Planner
from .tensor_desc import MAX_ELEMENTS

_ORT_TYPE_NAMES = {
    np.dtype(np.float32): "tensor(float)",
    np.dtype(np.float16): "tensor(float16)",
    np.dtype(np.float64): "tensor(double)",
    np.dtype(np.uint8): "tensor(uint8)",
    np.dtype(np.int8): "tensor(int8)",
    np.dtype(np.int32): "tensor(int32)",
    np.dtype(np.int64): "tensor(int64)",
    np.dtype(np.bool_): "tensor(bool)",
}

PROVIDERS = ("DmlExecutionProvider", "CPUExecutionProvider")

# A feed larger than this is refused before any work (DirectML caps a tensor at 2^32-1 elements too).
MAX_FEED_BYTES = 8 * 2**30


@dataclasses.dataclass(frozen=True)
class NodeArg:
    """Like onnxruntime's NodeArg: name, shape (symbolic dims as strings) and type string."""

    name: str
    shape: list
    type: str


class InferenceSession:
    """Run a quantized ONNX model the way DirectML would, with onnxruntime's session API.

    ``path_or_bytes`` is a path, serialized bytes or a ModelProto. As in onnxruntime,
    ``sess_options`` and ``provider_options`` are accepted (dml_ep has no use for them) and
    ``providers`` may name "DmlExecutionProvider" and "CPUExecutionProvider" (names or
    (name, options) pairs): dml_ep always runs DirectML where it maps a node, the CPU EP elsewhere.
    ``feature_level`` is the DirectML feature level to target (default: the highest known).
    ``arithmetic`` is ``"directml"`` or ``"onnxruntime"`` (see :mod:`dml_ep.arithmetic`);
    ``u8s8_saturation`` overrides the host detection for the latter. ``qdq_rules`` names the
    onnxruntime release range whose QDQ rewrites apply (a key of ``dml_ep.passes.RULE_SETS``);
    None turns them off, as onnxruntime's ``session.disable_quant_qdq=1`` does.
    """

    def __init__(
        self,
        path_or_bytes,
        sess_options=None,
        providers=None,
        provider_options=None,
        *,
        feature_level=DEFAULT_FEATURE_LEVEL,
        arithmetic: str = "directml",
        u8s8_saturation=None,
        qdq_rules: str | None = DEFAULT_RULE_SET,
    ):
        for provider in providers or ():
            name = provider[0] if isinstance(provider, (tuple, list)) else provider
            if name not in PROVIDERS:
                raise DmlEpError(f"unknown execution provider {name!r} (dml_ep emulates {', '.join(PROVIDERS)})")
        self.model = graph.load_model(path_or_bytes)
        self.arithmetic = Arithmetic(arithmetic, u8s8_saturation)
        self.feature_level = feature_level
        self.qdq_rules = qdq_rules
        self._declared = graph.graph_inputs(self.model.graph)
        self.planner = Planner(self.model, feature_level, qdq_rules=qdq_rules)
        self.executor = Executor(self.planner, self.arithmetic)
        self._loaded_plan = None
        if all(not graph.symbolic_dims(v) for v in self._declared if v.type.HasField("tensor_type")):
            self._loaded_plan = self.planner.plan_for_shapes()
            self.executor.prepare(self._loaded_plan)

    @property
    def plan(self) -> Plan:
        """The plan of the last run; before any, the plan for the declared input shapes, with any
        symbolic dimension taken as 1 (``Plan.assumed`` names them)."""
        if self.executor.plan is None and self._loaded_plan is None:
            self._loaded_plan = self.planner.plan_for_shapes()  # symbolic dims assumed 1 (Plan.assumed)
        return self.executor.plan or self._loaded_plan

    def get_inputs(self) -> list[NodeArg]:
        return [NodeArg(v.name, _shape(v), _type(v)) for v in self._declared]

    def get_outputs(self) -> list[NodeArg]:
        return [NodeArg(v.name, _shape(v), _type(v)) for v in self.model.graph.output]

    def get_providers(self) -> list[str]:
        return list(PROVIDERS)

    def run(self, output_names, input_feed: dict, run_options=None) -> list[np.ndarray]:
        """Like onnxruntime: ``output_names`` None for all outputs; returns a list of arrays."""
        feeds = self.check_feeds(input_feed)
        names = [o.name for o in self.model.graph.output] if not output_names else list(output_names)
        known = {o.name for o in self.model.graph.output}
        for name in names:
            if name not in known:
                raise FeedError(f"unknown output name {name!r} (outputs: {', '.join(sorted(known))})")
        values = self.executor.run(feeds)
        return [values[name] for name in names]

    def check_feeds(self, input_feed: dict) -> dict[str, np.ndarray]:
        """Feeds checked against the model's inputs: names, element types, ranks and fixed sizes."""
        if not isinstance(input_feed, dict):
            raise FeedError(f"input_feed must be a dict of name to array, not {type(input_feed).__name__}")
        expected = {v.name: v for v in self._declared}
        unknown = [name for name in input_feed if name not in expected]
        if unknown:
            raise FeedError(f"unknown input name {unknown[0]!r} (inputs: {', '.join(expected)})")
        feeds = {}
        for name, value in expected.items():
            if name not in input_feed:
                raise FeedError(f"missing input {name!r}")
            try:
                array = np.asarray(input_feed[name])
            except (TypeError, ValueError) as exc:  # ragged nested lists and the like
                raise FeedError(f"input {name!r}: not an array ({exc})") from None
            dtype = graph.element_dtype(value)
            if array.dtype != dtype:
                raise FeedError(f"input {name!r}: element type {array.dtype}, expected {dtype}")
            dims = value.type.tensor_type.shape.dim
            if value.type.tensor_type.HasField("shape"):
                if array.ndim != len(dims):
                    raise FeedError(f"input {name!r}: rank {array.ndim} (shape {list(array.shape)}), expected rank {len(dims)}")
                for axis, (size, dim) in enumerate(zip(array.shape, dims)):
                    if dim.HasField("dim_value") and size != dim.dim_value:
                        raise FeedError(f"input {name!r}: dimension {axis} is {size}, expected {dim.dim_value}")
            if array.size > MAX_ELEMENTS:
                raise FeedError(f"input {name!r}: {array.size} elements, more than a DirectML tensor holds ({MAX_ELEMENTS})")
            if array.nbytes > MAX_FEED_BYTES:
                raise FeedError(f"input {name!r}: {array.nbytes / 2**30:.1f} GiB is larger than dml_ep's limit of {MAX_FEED_BYTES / 2**30:.0f} GiB")
            feeds[name] = np.ascontiguousarray(array).reshape(array.shape)  # keeps 0-d feeds 0-d
        return feeds


def _shape(value) -> list:
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in value.type.tensor_type.shape.dim]


def _type(value) -> str:
    dtype = graph.element_dtype(value)
    return _ORT_TYPE_NAMES.get(dtype, f"tensor({dtype})")
