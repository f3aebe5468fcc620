"""``dml_ep.InferenceSession``: onnxruntime's session API, executing the model as the DML EP would.

The graph rewrites and types are worked out when the session is made (:class:`Planner`); each
node's DirectML desc is made from the shapes of the tensors that reach it in a run, once per
distinct shape (DirectML descs have static sizes). A model whose input shapes are all fixed is
planned when loaded as far as its shapes do not depend on data, so that its errors show then.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import reprlib
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from typing import Callable, NamedTuple

import numpy as np
import onnx

from ..core import files, graph
from ..core.errors import DmlEpError, FeedError
from ..core.memory import paused_gc
from ..core.tensor_desc import MAX_ELEMENTS
from ..numerics.arithmetic import Arithmetic
from ..operators.nodes import FallbackNode
from ..ort.reference import cpu_session
from ..passes import DEFAULT_RELEASE, MATMUL_NBITS_ACCURACY_LEVEL
from ..passes import Origin
from ..planning.importer import DEFAULT_FEATURE_LEVEL
from ..planning.plan import Plan
from ..planning.planner import ALL_OPTIMIZATIONS, Planner
from ..reports.rewritten_model import model_writer, rewritten_model
from .executor import Executor
from .io_binding import IOBinding
from . import profiling
from .profiling import CPU_PROVIDER, DML_PROVIDER, Profile

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

PROVIDERS = (DML_PROVIDER, CPU_PROVIDER)


def get_available_providers() -> list[str]:
    """onnxruntime's function of that name (``dml_ep.get_available_providers``), for dml_ep's session."""
    return list(PROVIDERS)


def get_device() -> str:
    """onnxruntime's function of that name (``dml_ep.get_device``): the device dml_ep emulates."""
    return "DML"

# A feed larger than this is refused before any work (DirectML caps a tensor at 2^32-1 elements too).
MAX_FEED_BYTES = 8 * 2**30


@dataclasses.dataclass(frozen=True)
class NodeArg:
    """Like onnxruntime's NodeArg: name, shape (symbolic dims as strings) and type string."""

    name: str
    shape: list
    type: str


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    """Like onnxruntime's ModelMetadata (``get_modelmeta``)."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict


class InferenceSession:
    """Run a quantized ONNX model the way DirectML would, with onnxruntime's session API.

    ``path_or_bytes`` is a path, serialized bytes or a ModelProto. As in onnxruntime, ``providers``
    names the execution providers in order of preference (names or (name, options) pairs;
    ``provider_options`` the options of each): with "DmlExecutionProvider" (the default) dml_ep
    runs DirectML where it maps a node and the CPU EP elsewhere; "CPUExecutionProvider" alone runs
    everything on onnxruntime's CPU EP, as onnxruntime would; an unknown provider is skipped with a
    warning, as onnxruntime does. ``sess_options`` (onnxruntime's SessionOptions) shapes the graph
    as in onnxruntime: ``graph_optimization_level`` (ORT_DISABLE_ALL: no folding, no QDQ fusion, no
    DML operator fusion; ORT_ENABLE_BASIC: folding but no QDQ fusion), ``session.disable_quant_qdq``
    and ``session.qdqisint8allowed``; ``optimized_model_filepath`` gets the rewritten model
    (:mod:`dml_ep.reports.rewritten_model`); with the CPU EP alone, onnxruntime runs with them as given.
    ``feature_level`` is the DirectML feature level to target (default: the highest known).
    ``arithmetic`` is ``"directml"`` or ``"onnxruntime"`` (see :mod:`dml_ep.numerics.arithmetic`);
    ``u8s8_saturation`` overrides the host detection for the latter. ``qdq_rules`` names the
    onnxruntime release whose rewrites apply (a key of ``dml_ep.passes.RELEASES``); None turns
    its QDQ rewrites off, as onnxruntime's ``session.disable_quant_qdq=1`` does. ``engine`` names
    the integer engine of the quantized products, "onnxruntime" or "numpy" (see
    :mod:`dml_ep.numerics.engines`): both exact, so it changes speed, never results.

    ``enable_profiling`` in ``sess_options`` profiles the session as onnxruntime does, with where
    each node ran (:mod:`dml_ep.runtime.profiling`); ``io_binding``, ``run_async`` and the other methods
    of onnxruntime's session are there too (docs/onnxruntime_api.md says where they differ).
    """

    @paused_gc
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
        qdq_rules: str | None = DEFAULT_RELEASE,
        engine: str | None = None,
    ):
        began = profiling.now()
        model = graph.load_model(path_or_bytes)
        loaded = time.perf_counter_ns()
        self.arithmetic = Arithmetic(arithmetic, u8s8_saturation)
        self.feature_level = feature_level
        self.qdq_rules = qdq_rules
        self._sess_options = sess_options
        self._initializers = [tensor.name for tensor in model.graph.initializer]
        level, disable_qdq, int8_allowed, accuracy_level = graph_options(sess_options)
        self.planner = Planner(model, feature_level, qdq_rules=None if disable_qdq else qdq_rules, optimization_level=level,
                               int8_allowed=int8_allowed, matmul_nbits_accuracy_level=accuracy_level)
        del model  # the weights live on in the planner's constants only
        self.executor = Executor(self.planner, self.arithmetic, engine)
        self._fallback_enabled = True
        self._profile: Profile | None = None
        self._profiling_start_ns = 0
        self._write_profile: Callable[[], str | None] = lambda: None
        self._choose_providers(providers, provider_options)
        self._loaded_plan = None
        if self._cpu_session is None and all(not graph.symbolic_dims(v) for v in self.planner.declared if v.type.HasField("tensor_type")):
            self._loaded_plan = self.planner.plan_for_shapes()
            self.executor.prepare(self._loaded_plan)
        optimized_model_filepath = getattr(sess_options, "optimized_model_filepath", "")
        if optimized_model_filepath and self._cpu_session is None:  # the CPU EP alone: onnxruntime's session writes its own
            self._save_rewritten(optimized_model_filepath, path_or_bytes)
        loading = "model_loading_uri" if isinstance(path_or_bytes, (str, os.PathLike)) else "model_loading_array"
        self._start_profile(began, [("Session", loading, began[1], loaded), ("Session", "session_initialization", loaded, None)])

    def _save_rewritten(self, path: str, source) -> None:
        """Write the rewritten graph where onnxruntime writes its optimized model, in the form
        :mod:`dml_ep.reports.rewritten_model` gives it (onnxruntime's CPU build loads it), in ONNX format
        (dml_ep writes no ORT format); never over the model the session was made from."""
        if path.lower().endswith(".ort") or config_entry(self._sess_options, "session.save_model_format") == "ORT":
            raise DmlEpError(f"cannot write {path}: dml_ep writes the optimized (rewritten) model in ONNX format, not ORT format")
        files.check_writable(path, inputs=[os.fspath(source)] if isinstance(source, (str, os.PathLike)) else [])
        files.write_files({path: model_writer(rewritten_model(self.planner, self.plan))})

    @property
    def model(self) -> onnx.ModelProto:
        """The model, rebuilt on request from its skeleton and the planner's constants, so that a
        session holds one copy of the weights."""
        return graph.with_weights(self.planner.source, self.planner.constants, self._initializers, self.planner.stand_ins)

    def set_providers(self, providers=None, provider_options=None) -> None:
        """Choose the execution providers, as onnxruntime's ``set_providers``, which makes its
        session again: a profile being made is written, and another starts."""
        self.end_profiling()
        self._choose_providers(providers, provider_options)
        self._start_profile(profiling.now())

    def _choose_providers(self, providers, provider_options) -> None:
        chosen = {}
        for index, provider in enumerate(providers or PROVIDERS):
            name, options = provider if isinstance(provider, (tuple, list)) else (provider, None)
            if provider_options is not None and index < len(provider_options):
                options = provider_options[index]
            if name not in PROVIDERS:
                warnings.warn(f"Specified provider '{name}' is not in available provider names. "
                              f"Available providers: '{', '.join(PROVIDERS)}'", stacklevel=2)
                continue
            chosen[name] = {key: str(value) for key, value in (options or {}).items()}
        chosen.setdefault(CPU_PROVIDER, {})  # onnxruntime always keeps the CPU EP last
        self._providers = chosen
        self._cpu_session = None if DML_PROVIDER in chosen else _user_cpu_session(self.model, self._sess_options)

    def get_providers(self) -> list[str]:
        return list(self._providers)

    def get_provider_options(self) -> dict:
        return {name: dict(options) for name, options in self._providers.items()}

    def get_session_options(self):
        if self._sess_options is None:
            import onnxruntime

            self._sess_options = onnxruntime.SessionOptions()
        return self._sess_options

    def get_modelmeta(self) -> ModelMetadata:
        model = self.planner.source
        version = model.model_version if model.HasField("model_version") else 2**63 - 1  # onnxruntime's "none"
        return ModelMetadata(model.producer_name, model.graph.name, model.domain, model.doc_string, model.graph.doc_string,
                             version, {p.key: p.value for p in model.metadata_props})

    def get_overridable_initializers(self) -> list[NodeArg]:
        """Initializers also listed as graph inputs (onnxruntime lets a run feed them)."""
        initialized, stand_ins = set(self._initializers), set(self.planner.stand_ins)
        return [self._node_arg(v) for v in self.planner.source.graph.input if v.name in initialized and v.name not in stand_ins]

    def _start_profile(self, began: tuple[int, int], events=()) -> None:
        """Profile the session from ``began`` (:func:`dml_ep.runtime.profiling.now`) with ``events`` (category,
        name, start, end) if its options ask to; with the CPU EP alone, onnxruntime's session
        profiles itself. The profile is written by ``end_profiling``, else when the session goes,
        as onnxruntime writes it."""
        options = self._sess_options
        if self._cpu_session is not None or not getattr(options, "enable_profiling", False):
            return
        profile = self._profile = Profile(options.profile_file_prefix, began)
        for category, name, started, ended in events:
            profile.record(category, name, started, ended=ended)
        self._profiling_start_ns = profile.start_ns
        self._write_profile = weakref.finalize(self, profile.write)
        self.executor.step_hook = profile.node_hook(self.planner, self.feature_level)

    def end_profiling(self) -> str:
        """Write the profile (:mod:`dml_ep.runtime.profiling`) and return its path, as onnxruntime's; ""
        without profiling, or once ended."""
        if self._cpu_session is not None:
            return self._cpu_session.end_profiling()
        self._profile = self.executor.step_hook = None
        return self._write_profile() or ""  # once: a finalizer called again gives None

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 without profiling), as onnxruntime's."""
        if self._cpu_session is not None:
            return self._cpu_session.get_profiling_start_time_ns()
        return self._profiling_start_ns

    def disable_fallback(self) -> None:
        """As onnxruntime's: a run that fails in an execution provider no longer makes the session
        again on the CPU EP. dml_ep records it and does nothing else: its DirectML nodes fail as
        the real EP's checks would, when the session is made or with a typed error, never as an EP
        failure a CPU session would get past, so there is nothing to fall back from."""
        self._fallback_enabled = False

    def enable_fallback(self) -> None:
        """As onnxruntime's (on by default); see :meth:`disable_fallback`."""
        self._fallback_enabled = True

    def io_binding(self) -> IOBinding:
        """Inputs and outputs bound before a run, as onnxruntime's (:mod:`dml_ep.runtime.io_binding`)."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options=None) -> None:
        """Run on the inputs and into the outputs ``iobinding`` binds, as onnxruntime's."""
        if getattr(iobinding, "session", None) is not self:
            raise FeedError("IOBinding must be used with the session that created it.")
        iobinding.run(run_options)

    def run_async(self, output_names, input_feed: dict, callback, user_data, run_options=None) -> None:
        """As onnxruntime's: run in another thread, then call ``callback(results, user_data, err)``
        there, with the list of arrays and "" or, on failure, [] and the error's message. Missing
        inputs and ``output_names`` not a list fail here, as there; an exception of ``callback``
        is the thread's (Python prints it)."""
        names = self._output_names(output_names, "run_async")
        if isinstance(input_feed, dict):  # what else is wrong goes to the callback, as in onnxruntime
            self._check_all_fed(input_feed)

        def run_and_call():
            try:
                results = self.run(names, input_feed, run_options)
            except Exception as error:  # noqa: BLE001  onnxruntime hands every failure to the callback
                callback([], user_data, str(error))
            else:
                callback(results, user_data, "")

        threading.Thread(target=run_and_call, name="dml_ep.run_async").start()

    @property
    def plan(self) -> Plan:
        """The plan of the last run; before any, the plan for the declared input shapes, with any
        symbolic dimension taken as 1 (``Plan.assumed`` names them). With the CPU EP alone, every
        node is a fallback."""
        if self._cpu_session is not None:
            reason = "the session's providers do not include DmlExecutionProvider"
            entries = [FallbackNode(n, reason, Origin((), (n,)), "no-dml-session") for n in self.planner.source.graph.node]
            return self.planner.plan_of(entries, dict(self.planner.static))
        if self.executor.plan is not None:
            return self.executor.plan
        if self._loaded_plan is None:
            self._loaded_plan = self.planner.plan_for_shapes()
        return self._loaded_plan

    def get_inputs(self) -> list[NodeArg]:
        return [self._node_arg(v) for v in self.planner.declared]

    def get_outputs(self) -> list[NodeArg]:
        return [self._node_arg(v) for v in self.planner.source.graph.output]

    def _node_arg(self, value) -> NodeArg:
        """As declared; what the model leaves out (an output's type or shape), as onnxruntime infers it."""
        static = self.planner.static.get(value.name)
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            tensor_type = value.type.tensor_type
            shape = _shape(value) if tensor_type.HasField("shape") else list(static.shape or []) if static else []
            return NodeArg(value.name, shape, _type(graph.element_dtype(value)))
        return NodeArg(value.name, list(static.shape or []) if static else [], static.type if static else "")

    def run(self, output_names, input_feed: dict, run_options=None) -> list:
        """Like onnxruntime: ``output_names`` None for all outputs; returns a list of arrays."""
        profile = self._profile
        started = time.perf_counter_ns() if profile is not None else 0
        names = self._output_names(output_names, "run")
        feeds = self.check_feeds(input_feed)
        known = self.planner.output_names
        unknown = set(names).difference(known)  # a set: 10,000 outputs checked against a list was quadratic
        if unknown:
            name = next(n for n in names if n in unknown)
            raise FeedError(f"unknown output name {name!r} (outputs: {', '.join(sorted(known))})")
        if self._cpu_session is not None:
            return self._cpu_session.run(names, feeds)
        values = self.executor.run(feeds)
        if profile is not None:
            profile.record("Session", "model_run", started)
        return [values[name] for name in names]

    def _output_names(self, output_names, method: str) -> list[str]:
        """The outputs a run gives: all for None or an empty sequence (onnxruntime's ``not
        output_names``); a str, or anything but a sequence of str, is onnxruntime's TypeError."""
        if not output_names:
            return list(self.planner.output_names)
        names = None if isinstance(output_names, (str, bytes, Mapping)) or not hasattr(output_names, "__iter__") else list(output_names)
        if names is None or not all(isinstance(name, str) for name in names):
            raise TypeError(f"{method}(): incompatible function arguments: output_names must be a list of str (or None for "
                            f"every output), not {type(output_names).__name__} {reprlib.repr(output_names)}")
        return names

    def run_with_ort_values(self, output_names, input_dict_ort_values: dict, run_options=None) -> list:
        """Like onnxruntime's: OrtValues in, OrtValues out (on the CPU)."""
        import onnxruntime

        names = self._output_names(output_names, "run_with_ort_values")
        feeds = {name: value.numpy() if isinstance(value, onnxruntime.OrtValue) else value for name, value in input_dict_ort_values.items()}
        return [onnxruntime.OrtValue.ortvalue_from_numpy(array) for array in self.run(names, feeds, run_options)]

    @functools.cached_property
    def _declared_inputs(self) -> dict[str, "_Declared"]:
        return {value.name: _declared(value) for value in self.planner.declared}

    def check_feeds(self, input_feed: dict) -> dict:
        """Feeds checked against the model's inputs: names, element types, ranks and fixed sizes.
        A list feed of a tensor input becomes an array of the input's type, as in onnxruntime."""
        if not isinstance(input_feed, dict):
            raise FeedError(f"input_feed must be a dict of name to array, not {type(input_feed).__name__}")
        expected = self._declared_inputs
        unknown = [name for name in input_feed if name not in expected]
        if unknown:
            raise FeedError(f"unknown input name {unknown[0]!r} (inputs: {', '.join(expected)})")
        self._check_all_fed(input_feed)
        return {name: _checked_feed(name, value, input_feed[name]) for name, value in expected.items()}

    def _check_all_fed(self, input_feed: dict) -> None:
        missing = [name for name in self._declared_inputs if name not in input_feed]
        if missing:
            raise FeedError(f"missing input {missing[0]!r}")


def graph_options(sess_options) -> tuple[int, bool, bool, int]:
    """What of onnxruntime's SessionOptions changes the graph an EP receives: the optimization
    level (Level-1 folding, Level-2 QDQ fusions and the DML EP's operator fusion),
    ``session.disable_quant_qdq``, ``session.qdqisint8allowed`` and
    ``session.qdq_matmulnbits_accuracy_level`` (default 4, as onnxruntime parses it)."""
    if sess_options is None:
        return ALL_OPTIMIZATIONS, False, False, MATMUL_NBITS_ACCURACY_LEVEL
    level = config_entry(sess_options, "session.qdq_matmulnbits_accuracy_level") or str(MATMUL_NBITS_ACCURACY_LEVEL)
    try:
        accuracy_level = int(level)
    except ValueError:
        raise DmlEpError(f"session.qdq_matmulnbits_accuracy_level is {level!r}, not an integer") from None
    return (int(sess_options.graph_optimization_level), config_entry(sess_options, "session.disable_quant_qdq") == "1",
            config_entry(sess_options, "session.qdqisint8allowed") == "1", accuracy_level)


def config_entry(sess_options, key: str) -> str:
    """A session config entry of onnxruntime's SessionOptions, "" when not set."""
    try:
        return sess_options.get_session_config_entry(key)
    except Exception:  # noqa: BLE001  onnxruntime raises when the entry was never set
        return ""


def _user_cpu_session(model: onnx.ModelProto, sess_options):
    """onnxruntime's CPU EP with the user's SessionOptions, as onnxruntime itself would run."""
    if sess_options is None:
        return cpu_session(model)
    import onnxruntime

    return onnxruntime.InferenceSession(model.SerializeToString(), sess_options, providers=[CPU_PROVIDER])


class _Declared(NamedTuple):
    """What a feed is checked against, read from its input's declaration once, not at each run."""

    dtype: np.dtype | None  # None: not a tensor (a sequence, map or optional: onnxruntime checks it)
    sizes: tuple | None  # per axis the fixed size or None; None: no shape declared


def _declared(value: onnx.ValueInfoProto) -> _Declared:
    if not value.type.HasField("tensor_type"):
        return _Declared(None, None)
    tensor_type = value.type.tensor_type
    sizes = tuple(graph.fixed_size(d) for d in tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    return _Declared(graph.element_dtype(value), sizes)


def _checked_feed(name: str, declared: _Declared, feed):
    """One feed checked against its input's declaration."""
    dtype = declared.dtype
    if dtype is None:
        return feed
    try:
        array = np.asarray(feed, dtype=dtype if isinstance(feed, (list, tuple)) else None)
    except OverflowError:  # a number of a list the type cannot hold (onnxruntime: "Could not create tensor")
        value = next((v for v in _numbers(feed) if _overflows(v, dtype)), feed)
        raise FeedError(f"input {name!r}: {reprlib.repr(value)} is outside the range of {dtype}, {_range(dtype)}") from None
    except (TypeError, ValueError) as exc:  # ragged nested lists and the like
        raise FeedError(f"input {name!r}: not an array ({exc})") from None
    if array.dtype != dtype:
        raise FeedError(f"input {name!r}: element type {array.dtype}, expected {dtype}")
    if declared.sizes is not None:
        if array.ndim != len(declared.sizes):
            raise FeedError(f"input {name!r}: rank {array.ndim} (shape {list(array.shape)}), expected rank {len(declared.sizes)}")
        for axis, (size, fixed) in enumerate(zip(array.shape, declared.sizes)):
            if fixed not in (None, size):
                raise FeedError(f"input {name!r}: dimension {axis} is {size}, expected {fixed}")
    if array.size > MAX_ELEMENTS:
        raise FeedError(f"input {name!r}: {array.size} elements, more than a DirectML tensor holds ({MAX_ELEMENTS})")
    if array.nbytes > MAX_FEED_BYTES:
        raise FeedError(f"input {name!r}: {array.nbytes / 2**30:.1f} GiB is larger than dml_ep's limit of {MAX_FEED_BYTES / 2**30:.0f} GiB")
    return np.ascontiguousarray(array).reshape(array.shape)  # keeps 0-d feeds 0-d


def _numbers(feed):
    """The numbers of a (nested) list feed, in order."""
    for each in feed:
        yield from _numbers(each) if isinstance(each, (list, tuple)) else (each,)


def _overflows(value, dtype: np.dtype) -> bool:
    """Whether numpy's conversion of one number of a list feed to ``dtype`` overflows."""
    try:
        np.asarray(value, dtype)
    except OverflowError:
        return True
    return False


def _range(dtype: np.dtype) -> str:
    """The values of an integer or float type, as a feed out of range is told them."""
    if dtype.kind in "iu":
        return f"[{np.iinfo(dtype).min}, {np.iinfo(dtype).max}]"
    return f"[{np.finfo(dtype).min:g}, {np.finfo(dtype).max:g}]"


def _shape(value) -> list:
    return [(d.dim_param or None) if (size := graph.fixed_size(d)) is None else size for d in value.type.tensor_type.shape.dim]


def _type(dtype) -> str:
    return _ORT_TYPE_NAMES.get(np.dtype(dtype), f"tensor({dtype})")
