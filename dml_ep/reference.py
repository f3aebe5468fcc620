"""onnxruntime's CPU execution provider: the reference dml_ep compares with, and the fallback it runs on.

``REFERENCES`` names the ways to run it: ``"ort"`` as deployed (its default graph optimizations,
which turn QDQ groups into QLinear nodes by the CPU EP's rules); ``"ort-exact"`` with the session
config entry ``session.x64quantprecision = "1"``, which makes its uint8 x int8 GEMMs exact on x86
CPUs whose kernels would otherwise saturate pairs of products to int16; and ``"ort-unfused"`` with
``session.disable_quant_qdq = "1"``, which leaves QDQ groups as DQ -> float op -> Q.
"""

from __future__ import annotations

import functools

import onnx
import onnxruntime as ort

from .memory import release_freed_memory

REFERENCES = ("ort", "ort-exact", "ort-unfused")


def cpu_session(model, reference: str = "ort", threads: int | None = None, spinning: bool = True,
                optimize: bool = True, shared_arena: bool = False) -> ort.InferenceSession:
    """An onnxruntime CPU session for a ModelProto or serialized model.

    ``spinning=False`` stops its idle threads from spinning after a run, which would otherwise take
    the cores from the numpy/BLAS work that follows in the same process. ``optimize=False`` turns
    its graph optimizations off (every node of the model stays as it is). ``shared_arena`` takes
    its memory from one arena shared by all such sessions (:func:`_shared_arena`) instead of an
    arena of its own, which dozens of small sessions would each keep.
    """
    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors reach the caller as exceptions, not as log lines
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if shared_arena:
        _shared_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
    if reference == "ort-exact":
        options.add_session_config_entry("session.x64quantprecision", "1")
    elif reference == "ort-unfused":
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    elif reference != "ort":
        raise ValueError(f"unknown reference {reference!r} (choose from {', '.join(REFERENCES)})")
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else bytes(model)
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def loaded_graph(model: onnx.ModelProto) -> tuple[list, list]:
    """The inputs and outputs (name, type string, shape) of the graph onnxruntime builds when it
    loads ``model``: resolved, so typed and shaped by its inference, but with no session initialized.
    Initializing would make a kernel and plan memory for every node, three times the time and
    memory, and tell nothing more about the values. Raises what onnxruntime raises at load."""
    from onnxruntime.capi import _pybind_state

    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = _pybind_state.InferenceSession(options, model.SerializeToString(), False, False)
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
