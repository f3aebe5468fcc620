"""onnxruntime's execution providers: the references dml_ep compares with, and the CPU fallback it runs on.

``REFERENCES`` names the ways to run the reference: ``"ort"``, onnxruntime's CPU EP as deployed
(its default graph optimizations, which turn QDQ groups into QLinear nodes by the CPU EP's rules);
``"ort-exact"`` with the session config entry ``session.x64quantprecision = "1"``, which makes its
uint8 x int8 GEMMs exact on x86 CPUs whose kernels would otherwise saturate pairs of products to
int16; ``"ort-unfused"`` with ``session.disable_quant_qdq = "1"``, which leaves QDQ groups as DQ ->
float op -> Q; and ``"dml"``, the real DML EP (onnxruntime-directml on Windows, with a DirectX 12
device), which :func:`require_dml` refuses in one line where it cannot run.
"""

from __future__ import annotations

import collections
import functools
import importlib.metadata
import itertools
import os
import re
import tempfile

import onnx
import onnxruntime as ort

from ..core.choices import CPU_REFERENCES, DML_REFERENCE, REFERENCES
from ..core.errors import ReferenceUnavailableError
from ..core.graph import internal_model, ort_message
from ..core.memory import release_freed_memory

# The real DML EP's session, the CPU EP taking the nodes it declines. Tests put the CPU EP alone
# here to run the "dml" reference's code path on a machine without DirectML.
DML_PROVIDERS = ("DmlExecutionProvider", "CPUExecutionProvider")


def cpu_session(model, reference: str = "ort", threads: int | None = None, spinning: bool = True,
                optimize: bool = True, shared_arena: bool = False) -> ort.InferenceSession:
    """An onnxruntime CPU session for a ModelProto or serialized model.

    ``spinning=False`` stops its idle threads from spinning after a run, which would otherwise take
    the cores from the numpy/BLAS work that follows in the same process. ``optimize=False`` turns
    its graph optimizations off (every node of the model stays as it is). ``shared_arena`` takes
    its memory from one arena shared by all such sessions (:func:`_shared_arena`) instead of an
    arena of its own, which dozens of small sessions would each keep.
    """
    if reference not in CPU_REFERENCES:
        raise ValueError(f"unknown CPU reference {reference!r} (choose from {', '.join(CPU_REFERENCES)})")
    options = _options(reference)
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if shared_arena:
        _shared_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
    return _cpu_session(model, options, reference)


def _cpu_session(model, options: ort.SessionOptions, reference: str) -> ort.InferenceSession:
    """onnxruntime's CPU session of ``model`` with ``options``; for "ort-exact", of the model with
    its int8 initializers unshared where onnxruntime's session refuses the shared ones (below)."""
    try:
        return ort.InferenceSession(_serialized(model), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001  onnxruntime's exception types share no base class but Exception
        if reference != "ort-exact" or _INT8_WEIGHT_CLASH not in str(exc):
            raise
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
    return ort.InferenceSession(_unshared_int8_initializers(proto).SerializeToString(), options, providers=["CPUExecutionProvider"])


def fused_away(model: onnx.ModelProto, reference: str = "ort") -> set[str]:
    """The node outputs of ``model`` that onnxruntime's CPU EP fuses away (its graph optimizations
    up to the extended level, with ``reference``'s options): listing one as a graph output would
    keep the fusion from happening (MatMulScaleFusion's MatMul output, LayerNormFusion's inner
    values), and the reference would compute another graph than it deploys. Read from the graph
    onnxruntime saves, its initializers written to a file of their own (any size saves)."""
    options = _options(reference)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    with tempfile.TemporaryDirectory(prefix="dml_ep_fused_") as folder:
        options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "64")
        _cpu_session(model, options, reference)
        optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
    kept = {name for node in optimized.graph.node for name in node.output}
    return {name for node in model.graph.node for name in node.output if name and name not in kept}


def dml_session(model) -> ort.InferenceSession:
    """A session of the real DML EP (``DML_PROVIDERS``) for a ModelProto or serialized model.

    The DML EP supports neither onnxruntime's memory pattern optimization nor parallel execution,
    and refuses a session that asks for them (onnxruntime's DirectML EP documentation), so both
    are off. onnxruntime's fallback is off too: where the DML EP fails, onnxruntime would rerun on
    the CPU EP alone, printing to stdout, and the reference would silently be the CPU EP.
    """
    options = _options("ort")
    options.enable_mem_pattern = False
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(_serialized(model), options, providers=list(DML_PROVIDERS), enable_fallback=0)


def require_dml() -> None:
    """Refuse the "dml" reference before any work, in one line saying what is missing: onnxruntime's
    DmlExecutionProvider (the onnxruntime installed is another package than onnxruntime-directml),
    or a device it can start on (:func:`dml_device_starts`)."""
    provider = DML_PROVIDERS[0]
    if provider not in ort.get_available_providers():
        raise ReferenceUnavailableError(
            f"reference {DML_REFERENCE} runs the real DML EP, but the installed {_installed_onnxruntime()} has no {provider}: "
            "on Windows, pip install dml_ep[directml] (onnxruntime-directml) in its place (uninstall it first: both install "
            "the onnxruntime module)")
    dml_device_starts()


@functools.lru_cache(maxsize=1)
def dml_device_starts() -> None:
    """Start the DML EP on a one-node model, once per process where it starts (a refusal is not
    kept: it raises again), so that a command comparing many models probes the device once."""
    provider = DML_PROVIDERS[0]
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "dml_probe",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    try:
        used = dml_session(internal_model(graph, 13)).get_providers()
        problem = None if used[0] == provider else f"onnxruntime ran the session on {', '.join(used)}"
    except Exception as exc:  # noqa: BLE001  onnxruntime's exception types share no base class but Exception
        problem = _condensed(exc)
    if problem:
        raise ReferenceUnavailableError(f"reference {DML_REFERENCE}: the {provider} of {_installed_onnxruntime()} "
                                        f"cannot start a session (no DirectX 12 device?): {problem}")


def _options(reference: str) -> ort.SessionOptions:
    """The options every reference and fallback session shares, and those ``reference`` adds."""
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors reach the caller as exceptions, not as log lines
    if reference == "ort-exact":
        options.add_session_config_entry("session.x64quantprecision", "1")
    elif reference == "ort-unfused":
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    return options


# What onnxruntime's "ort-exact" session raises where two nodes read one int8 weight (see below).
_INT8_WEIGHT_CLASH = "Attempt to replace the existing tensor"


def _unshared_int8_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model``, the same computation, in which no two nodes read one int8 initializer.

    On AVX2 hosts without VNNI, ``session.x64quantprecision`` runs onnxruntime's
    Avx2WeightS8ToU8Transformer, whose ``ConvertS8WeightToU8`` adds a fused node's int8 weight and
    zero point as uint8 initializers named ``<name>_s8_2_u8``, once per node: a second node reading
    the same weight fails the session with "Attempt to replace the existing tensor". Its
    EnsureUniqueDQForNodeUnit copies a weight's DequantizeLinear for each reader, sharing the
    initializers, so here such a DequantizeLinear is copied for each node reading its output, and
    then each node after the first reading an int8 initializer reads a copy of its own.
    """
    clone = onnx.ModelProto()
    clone.CopyFrom(model)
    graph = clone.graph
    inputs = {value.name for value in graph.input}  # an initializer that is also an input is no constant
    int8 = {t.name: t for t in graph.initializer if t.data_type == onnx.TensorProto.INT8 and t.name not in inputs}
    nodes = list(graph.node)
    reads = [list(node.input) for node in nodes]  # protobuf fields are slow to read: once
    readers = collections.Counter(name for names in reads for name in set(names))
    weight_dequantize = {node.output[0]: (node, names) for node, names in zip(nodes, reads) if node.op_type == "DequantizeLinear"
                         and readers[node.output[0]] > 1 and any(name in int8 for name in names)}
    shared = int8.keys() | weight_dequantize.keys()
    taken = inputs | readers.keys() | {t.name for t in graph.initializer} | {name for node in nodes for name in (node.name, *node.output)}
    numbers = itertools.count(1)
    read, placed, copied_initializers = set(), [], []

    def fresh(name: str) -> str:
        while (new := f"{name}_unshared{next(numbers)}") in taken:
            pass
        taken.add(new)
        return new

    def place(node: onnx.NodeProto, names: list[str]) -> None:
        """Append ``node``, reading a copy of its own of each shared name an earlier node read."""
        renamed = {}
        for name in dict.fromkeys(names):
            if name in shared:
                if name in read:
                    renamed[name] = copy_dequantize(name) if name in weight_dequantize else copy_initializer(name)
                read.add(name)
        if renamed:
            node.input[:] = [renamed.get(name, name) for name in names]
        placed.append(node)

    def copy_dequantize(name: str) -> str:
        original, names = weight_dequantize[name]
        node = onnx.NodeProto()
        node.CopyFrom(original)
        node.input[:] = names  # as the model has them: placing the original may have renamed them
        node.output[0] = fresh(name)
        if node.name:
            node.name = fresh(node.name)
        place(node, names)  # just before the node that reads it
        return node.output[0]

    def copy_initializer(name: str) -> str:
        tensor = onnx.TensorProto()
        tensor.CopyFrom(int8[name])
        tensor.name = fresh(name)
        copied_initializers.append(tensor)
        return tensor.name

    for node, names in zip(nodes, reads):
        place(node, names)
    del graph.node[:]
    graph.node.extend(placed)
    graph.initializer.extend(copied_initializers)
    return clone


def _serialized(model) -> bytes:
    return model.SerializeToString() if isinstance(model, onnx.ModelProto) else bytes(model)


def _installed_onnxruntime() -> str:
    """The distributions that installed the onnxruntime module, with their versions: "onnxruntime
    1.20.1", or "onnxruntime-directml 1.20.1", or both where one overwrote the other's files."""
    names = sorted(set(importlib.metadata.packages_distributions().get("onnxruntime", ())))
    return " and ".join(f"{name} {importlib.metadata.version(name)}" for name in names) or f"onnxruntime {ort.__version__}"


def _condensed(exc: Exception) -> str:
    """onnxruntime's message on one line, without what the DML EP's Windows errors lead with
    (source file and line, module and address, caller, ``Exception(1) tid(1a2c)``), so that it
    starts at the HRESULT and its text."""
    return re.sub(r"^\S*\(\d+\)\\\S*: \(caller: \w+\) Exception\(\d+\) tid\(\w+\) ", "", ort_message(exc, with_node=False))


def loaded_graph(model: bytes) -> tuple[list, list]:
    """The inputs and outputs (name, type string, shape) of the graph onnxruntime builds when it
    loads ``model`` (serialized): resolved, so typed and shaped by its inference, but with no
    session initialized. Initializing would make a kernel and plan memory for every node, three
    times the time and memory, and tell nothing more about the values. Raises what onnxruntime
    raises at load."""
    from onnxruntime.capi import _pybind_state

    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = _pybind_state.InferenceSession(options, model, False, False)
    inputs, outputs = ([(arg.name, arg.type, arg.shape) for arg in args] for args in (session.inputs_meta, session.outputs_meta))
    del session  # its NodeArgs keep it alive: only plain values leave
    release_freed_memory()
    return inputs, outputs


@functools.lru_cache(maxsize=1)
def _shared_arena() -> None:
    """Register a CPU arena allocator with onnxruntime's environment, once per process, for the
    sessions that opt in (``session.use_env_allocators``): only dml_ep's engine sessions do. If one
    is registered already (by the host program), they share that one."""
    cpu = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    try:
        ort.create_and_register_allocator(cpu, ort.OrtArenaCfg(0, -1, -1, -1))
    except Exception:  # noqa: BLE001  onnxruntime raises a plain Fail when one is registered already
        pass
