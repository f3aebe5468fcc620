"""A model's DirectML plan written as a DxDispatch model, to run on real DirectML.

``DIR/model.json`` holds a resource per bound tensor, a dispatchable per DirectML operator of the
plan and the commands: a dispatch per operator in plan order, then a ``writeFile`` of every value
the dispatches hand on (graph outputs, and values fallback nodes read) to ``output/<name>.npy``.
Graph inputs, initializers and the values fallback nodes make keep their ONNX names and come from
``resources/<name>.npy`` (scalars inline); the values the dispatches make start zero-filled.

DxDispatch runs DirectML work only. Each run of DirectML operators between fallback nodes is a
dispatch sequence, and the tensors fallback nodes make are captured from a dml_ep run on the same
inputs and stored as resources: DirectML's result for a sequence is compared with dml_ep's from the
same inputs, and a difference in one does not spread into the next. ``expected/`` holds dml_ep's
values of what the commands write, and of the graph outputs fallback nodes make; ``README.txt``
gives the DxDispatch command line and how to diff.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import numpy as np

from ...core import files
from ...core.enums import DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS
from ...core.errors import DxDispatchError
from ...core.graph import Loaded, load_model
from ...operators.nodes import DmlNode
from ...passes import DEFAULT_RELEASE
from ...planning.importer import DEFAULT_FEATURE_LEVEL
from ...planning.plan import Plan
from ...reports.meta import versions
from ...runtime.inputs import distinct_names, npy_file_names, random_inputs
from ...runtime.session import InferenceSession
from . import descs

MODEL_FILE = "model.json"
COMMAND_LINE = "dxdispatch.exe model.json"


@dataclasses.dataclass
class Export:
    """What an export wrote: the plan it comes from, its dispatch sequences (dispatchable names),
    the values captured from the CPU fallback, and the output and expected files per value."""

    plan: Plan
    model: dict
    sequences: list[list[str]]
    captured: list[str]
    outputs: dict[str, str]  # value name -> output/<file> that DxDispatch writes
    expected: dict[str, str]  # value name -> expected/<file>
    values: dict[str, np.ndarray]  # dml_ep's values of ``expected``, shaped as DxDispatch writes them


def export(model, directory: str, feeds: dict | None = None, *, seed: int = 0, shapes: dict | None = None,
           feature_level=DEFAULT_FEATURE_LEVEL, qdq_rules: str | None = DEFAULT_RELEASE,
           arithmetic: str = "directml", u8s8_saturation=None, engine: str | None = None, source: str | None = None) -> Export:
    """Run ``model`` with dml_ep on ``feeds`` (default: seeded random inputs, of ``shapes``) and write
    its plan as a DxDispatch model in ``directory``, which must not exist or be empty (nothing of
    anyone else's is replaced); all files appear at once, or none. The other arguments are those of
    :class:`~dml_ep.InferenceSession`; ``source`` names the model in README.txt."""
    _check_new_directory(directory)
    model = load_model(model)
    if feeds is None:
        feeds = random_inputs(model, seed, shapes)
    session = InferenceSession(Loaded(model), feature_level=feature_level, arithmetic=arithmetic, u8s8_saturation=u8s8_saturation,
                               qdq_rules=qdq_rules, engine=engine)
    values = session.executor.run(session.check_feeds(feeds), keep_all=True)  # every value, as the islands need them
    plan = session.plan
    if not plan.dml_nodes:
        raise DxDispatchError(f"no node of this model runs on DirectML at {plan.feature_level} "
                              f"({len(plan.fallback_nodes)} on the CPU fallback): there is nothing for DxDispatch to run")
    writer = _Writer(plan, values)
    model_json = writer.model()
    exits = writer.exits()
    graph_outputs = [o.name for o in plan.outputs]
    expected_names = list(dict.fromkeys(exits + graph_outputs))
    output_files = npy_file_names(exits)
    expected_files = npy_file_names(expected_names)
    dimensions = {name: list(values[name].shape) or [1] for name in exits}  # DxDispatch writes a scalar as [1]
    model_json["commands"] += [
        {"type": "writeFile", "resource": name, "targetPath": f"output/{output_files[name]}", "dimensions": dimensions[name]}
        for name in exits
    ]
    result = Export(
        plan=plan,
        model=model_json,
        sequences=writer.sequences,
        captured=writer.captured,
        outputs={name: f"output/{output_files[name]}" for name in exits},
        expected={name: f"expected/{expected_files[name]}" for name in expected_names},
        values={name: np.asarray(values[name], order="C").reshape(dimensions.get(name, np.shape(values[name])))
                for name in expected_names},
    )
    contents: dict[str, bytes | np.ndarray] = {MODEL_FILE: _json_bytes(model_json), "README.txt": _readme(result, source, arithmetic).encode()}
    contents.update((path, result.values[name]) for name, path in result.expected.items())
    contents.update((path, writer.files[path]) for path in writer.files)
    _write_directory(directory, contents, empty=["output"])
    return result


class _Writer:
    """Builds the resources, dispatchables and dispatch commands of a plan's DirectML operators."""

    def __init__(self, plan: Plan, values: dict):
        self.plan, self.values = plan, values
        self.resources: dict[str, dict] = {}
        self.dispatchables: dict[str, dict] = {}
        self.commands: list[dict] = []
        self.files: dict[str, np.ndarray] = {}  # resources/<file> -> array
        self.sequences: list[list[str]] = []
        self.captured: list[str] = []
        self.made: set[str] = set()  # values a dispatch writes
        self._sizes: dict[str, int] = {}  # resource -> bytes the descs bound to it span
        self._sources: dict[str, np.ndarray] = {}  # resource -> array it is initialized from
        self._graph_inputs = {value.name for value in plan.inputs}

    def model(self) -> dict:
        previous_was_dml = False
        names = _dispatchable_names(self.plan.dml_nodes)
        for entry in self.plan.entries:
            if not isinstance(entry, DmlNode):
                previous_was_dml = False
                continue
            if not previous_was_dml:
                self.sequences.append([])
            previous_was_dml = True
            self._dispatch(entry, names[id(entry)])
        for name in self.made - self._sources.keys():  # a buffer as large as the largest desc bound to it spans
            resource = self.resources[name]
            count, data_type = resource["initialValues"]["valueCount"], DML_TENSOR_DATA_TYPE[resource["initialValuesDataType"]]
            if self._sizes[name] > (count * data_type.element_size + 3) & ~3:  # DxDispatch rounds up to 4 bytes
                resource["sizeInBytes"] = self._sizes[name]
        sources = self._sources_as_resources()
        return {"resources": {**sources, **self.resources}, "dispatchables": self.dispatchables, "commands": self.commands}

    def exits(self) -> list[str]:
        """The values dispatches make that leave DirectML: graph outputs, and inputs of fallback nodes."""
        read_by_fallback = {name for entry in self.plan.fallback_nodes for name in entry.value_inputs}
        outputs = {o.name for o in self.plan.outputs}
        return [name for entry in self.plan.dml_nodes for name in entry.outputs if name in read_by_fallback | outputs]

    def _dispatch(self, entry: DmlNode, name: str) -> None:
        initialization: dict[str, str] = {}
        execution: dict[str, str] = {}
        made = dict(zip(descs.output_fields(entry.desc), entry.outputs))  # OutputTensor, and any further outputs in order
        for field, tensor in entry.desc.tensors().items():
            value = made[field] if field in made else entry.names.get(field) or f"{name}.{field}"  # a constant of dml_ep's own: named here
            bound = entry.inputs.get(field)
            # an output the node also reads (GroupQueryAttention's past -> present, aliased): its buffer starts as that input
            initial = self.values[bound] if field in made and isinstance(bound, str) and bound else None
            self._bind(value, tensor, made=field in made, array=bound if isinstance(bound, np.ndarray) else None, initial=initial)
            owned = tensor.Flags & DML_TENSOR_FLAGS.OWNED_BY_DML
            (initialization if owned else execution)[field] = value
        dispatchable = descs.to_dict(entry.desc)
        if initialization:  # bound when DirectML initializes the operator, as OWNED_BY_DML tensors are
            dispatchable["bindings"] = _arrays(initialization)
        self.dispatchables[name] = dispatchable
        self.commands.append({"type": "dispatch", "dispatchable": name, "bindings": _arrays(execution)})
        self.sequences[-1].append(name)

    def _bind(self, value: str, tensor, made: bool, array: np.ndarray | None = None, initial: np.ndarray | None = None) -> None:
        """``value`` bound to ``tensor``: made by a dispatch (starting as ``initial`` where the dispatch
        writes into an input's buffer), or read from ``array`` (the constant the node binds, as
        DirectML reads it), a constant or a run's value."""
        self._sizes[value] = max(self._sizes.get(value, 0), tensor.TotalTensorSizeInBytes)
        if made:
            self.made.add(value)
            if initial is not None:
                self._sources[value] = _grown(np.asarray(initial), tuple(tensor.Sizes))
                return
            self.resources[value] = {"initialValuesDataType": tensor.DataType.name,
                                     "initialValues": {"valueCount": tensor.element_count, "value": 0}}
            return
        if value in self.made or value in self._sources:
            return
        if array is None:
            array = self.plan.constants[value] if value in self.plan.constants else self.values[value]
        # 4-bit codes are bytes, two to each (MatMulNBits' weight): the desc's DataType says how DirectML reads them
        reads = DML_TENSOR_DATA_TYPE.UINT8 if tensor.DataType.bits == 4 else tensor.DataType
        if DML_TENSOR_DATA_TYPE.from_numpy(array.dtype) != reads:
            raise DxDispatchError(f"{value!r} is {array.dtype}, its tensor desc reads {tensor.DataType.name}")
        self._sources[value] = np.asarray(array, order="C")
        if value not in self.plan.constants and value not in self._graph_inputs and value in self.values:
            self.captured.append(value)

    def _sources_as_resources(self) -> dict:
        """The resources read from arrays: inline scalars, ``.npy`` files for the rest."""
        resources = {}
        file_names = npy_file_names([name for name, array in self._sources.items() if array.size > 1])
        for name, array in self._sources.items():
            if array.size * array.itemsize < self._sizes[name] - 3:  # DxDispatch rounds a buffer up to 4 bytes
                raise DxDispatchError(f"{name!r} holds {array.nbytes} bytes, its tensor descs span {self._sizes[name]}")
            data_type = DML_TENSOR_DATA_TYPE.from_numpy(array.dtype).name
            if array.size == 1:
                value = descs.json_number(array.reshape(-1)[0].item())
                resources[name] = {"initialValuesDataType": data_type, "initialValues": {"valueCount": 1, "value": value}}
            else:
                path = f"resources/{file_names[name]}"
                self.files[path] = array
                resources[name] = {"initialValuesDataType": data_type, "initialValues": {"sourcePath": path}}
        return resources


def _grown(array: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """An input's array as the buffer of the output a dispatch writes over it, of the output desc's
    ``sizes``: a decode step's past key [B, kvN, P, H] at the start of the present's [B, kvN, T, H] rows,
    zeros after, as the kernel grows it (multihead_attention._present)."""
    array = array.reshape((1,) * (len(sizes) - array.ndim) + array.shape) if array.ndim < len(sizes) else array
    if array.shape == sizes:
        return np.ascontiguousarray(array)
    grown = np.zeros(sizes, array.dtype)
    common = tuple(slice(0, min(n, m)) for n, m in zip(array.shape, sizes))
    grown[common] = array[common]
    return grown


def _arrays(bindings: dict[str, str]) -> dict[str, Any]:
    """Bindings with an array field's tensors (``InputTensors[0]``, ...) as one list, as DxDispatch binds them."""
    out: dict[str, Any] = {}  # a name, or a list of them
    for field, value in bindings.items():
        name, _, index = field.partition("[")
        if index:
            out.setdefault(name, []).append(value)
        else:
            out[field] = value
    return out


def _dispatchable_names(entries: list[DmlNode]) -> dict[int, str]:
    """Each operator's name: its node's, or ``<op type>_<index>``; distinct."""
    stems = [entry.node.name or f"{entry.node.op_type}_{index}" for index, entry in enumerate(entries)]
    return {id(entry): name for entry, name in zip(entries, distinct_names(stems))}


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=1, allow_nan=False) + "\n").encode()


def _readme(result: Export, source: str | None, arithmetic: str) -> str:
    plan = result.plan
    levels = sorted({entry.desc.INTRODUCED for entry in plan.dml_nodes})
    lines = [
        f"A DxDispatch model of the DirectML operators dml_ep plans for {source or 'a model'}",
        f"(dml_ep {versions()['dml_ep']}, planned for {plan.feature_level}; its operators need "
        f"{levels[-1] if levels else '-'} or later; dml_ep arithmetic {arithmetic!r}).",
        "",
        "Run it on Windows with DxDispatch (github.com/microsoft/DirectML, folder DxDispatch), from this",
        "directory:",
        "",
        f"    {COMMAND_LINE}",
        "",
        "It writes output/*.npy. expected/ holds dml_ep's values under the same file names; diff them with",
        "",
        "    python -c \"import numpy as np, pathlib; [print(p.name, 'equal' if np.array_equal(np.load(p), "
        "np.load('expected/' + p.name)) else 'DIFFERENT') for p in sorted(pathlib.Path('output').glob('*.npy'))]\"",
        "",
        "dml_ep replays this file with its own kernels (no DirectML needed) with",
        "",
        "    python -c \"import dml_ep.interop.dxdispatch as d; print(d.load('.').run())\"",
        "",
        f"Dispatch sequences ({len(result.sequences)}; the CPU fallback runs between them in the real DML EP):",
    ]
    lines += [f"  {index}. {', '.join(names)}" for index, names in enumerate(result.sequences, 1)]
    if result.captured:
        lines += ["", "Values the CPU fallback makes, captured from dml_ep's run and read from resources/:",
                  *(f"  {name}" for name in result.captured)]
    fallback_outputs = [name for name in result.expected if name not in result.outputs]
    if fallback_outputs:
        lines += ["", "Graph outputs the CPU fallback makes (in expected/ only; DxDispatch does not compute them):",
                  *(f"  {name} -> {result.expected[name]}" for name in fallback_outputs)]
    lines += ["", "Outputs DxDispatch writes:", *(f"  {name} -> {path}" for name, path in result.outputs.items())]
    return "\n".join(lines) + "\n"


def _check_new_directory(directory: str) -> None:
    try:
        files.check_new_directory(directory, "export")
    except OSError as exc:
        raise DxDispatchError(str(exc)) from None


def _write_directory(directory: str, contents: dict[str, bytes | np.ndarray], empty=()) -> None:
    """Write ``contents`` (path -> bytes or array) into ``directory``, new or empty, all at once
    (:func:`dml_ep.core.files.write_directory`)."""
    writers: dict[str, files.Writer] = {
        path: functools.partial(np.save, arr=data) if isinstance(data, np.ndarray) else files.bytes_writer(data)
        for path, data in contents.items()}
    try:
        files.write_directory(directory, writers, "export", empty)
    except OSError as exc:
        raise DxDispatchError(str(exc)) from None
