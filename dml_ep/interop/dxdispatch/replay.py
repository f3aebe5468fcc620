"""DxDispatch models read back and executed with dml_ep's kernels: the check that an export says
what dml_ep ran, without Windows.

The reading follows DxDispatch's own (``DxDispatch/src/model/JsonParsers.cpp``): a resource is a
typeless buffer, its initial values written at its start (``initialValuesOffsetInBytes`` on) and
its size the initial values' bytes, or ``sizeInBytes``, rounded up to 4 bytes; a binding reads the
buffer as its tensor desc's data type, sizes and strides; bindings a dispatchable declares itself
are bound at initialization (OWNED_BY_DML tensors); commands run in order; ``writeFile`` gives the
buffer as ``initialValuesDataType`` elements, shaped by its ``dimensions`` (else the whole buffer,
1-D), and ``print`` the elements of the resource's initial values.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...core.enums import DML_FEATURE_LEVEL, DML_TENSOR_DATA_TYPE
from ...core.errors import DescValidationError, DxDispatchError
from ...numerics.arithmetic import Arithmetic
from ...numerics.engines import get_engine
from ...operators.base import OperatorDesc
from ...operators.dispatch import run_kernel
from ...operators.kernel_state import KernelState
from .descs import FLOAT_WORDS, NotModelled, data_type_of, from_dict, output_fields


@dataclasses.dataclass
class Resource:
    """A buffer: its bytes, and the type and count of the elements it was initialized with."""

    buffer: bytearray
    data_type: DML_TENSOR_DATA_TYPE
    element_count: int

    def elements(self, count: int | None = None) -> np.ndarray:
        """The buffer as ``data_type`` elements: the first ``count``, else as many as it holds."""
        dtype = self.data_type.numpy()
        count = len(self.buffer) // dtype.itemsize if count is None else count
        return np.frombuffer(self.buffer, dtype=dtype, count=count).copy()


@dataclasses.dataclass
class Dispatchable:
    """A DirectML operator: its desc (or why dml_ep cannot run it) and its initialization bindings."""

    name: str
    type: str
    desc: OperatorDesc | None
    bindings: dict
    not_modelled: DxDispatchError | None = None
    state: KernelState = dataclasses.field(default_factory=KernelState, repr=False)  # its kernel's, kept from dispatch to dispatch


@dataclasses.dataclass
class DxDispatchModel:
    """A DxDispatch model as read; :meth:`run` executes its commands."""

    path: str
    resources: dict[str, Resource]
    dispatchables: dict[str, Dispatchable]
    commands: list[dict]

    @np.errstate(all="ignore")  # IEEE results (an overflow to inf) are the answer, not a numpy warning
    def run(self, arithmetic: str = "directml", engine: str | None = None) -> dict[str, np.ndarray]:
        """Execute the commands on fresh copies of the resources; return what ``writeFile`` and
        ``print`` commands give, by resource name (a later command on a resource replaces an earlier)."""
        kernel_arithmetic, kernel_engine = Arithmetic(arithmetic), get_engine(engine)
        buffers = {name: dataclasses.replace(resource, buffer=bytearray(resource.buffer)) for name, resource in self.resources.items()}
        results = {}
        for command in self.commands:
            kind = command["type"].lower()
            if kind == "dispatch":
                self._dispatch(self.dispatchables[command["dispatchable"]], command.get("bindings", {}), buffers, kernel_arithmetic,
                               kernel_engine)
                continue
            resource = buffers[command["resource"]]  # the reader checked that it names one
            if kind == "writefile":
                dims = command.get("dimensions")  # the reader checked them against the resource's size
                count = None if not dims else math.prod(dims)
                results[command["resource"]] = resource.elements(count).reshape(dims or -1)
            else:  # print
                results[command["resource"]] = resource.elements(resource.element_count)
        return results

    def _dispatch(self, dispatchable: Dispatchable, bindings: dict, buffers: dict, arithmetic, engine) -> None:
        where = f"dispatchable {dispatchable.name!r}"
        if dispatchable.not_modelled is not None:
            raise dispatchable.not_modelled
        desc = dispatchable.desc
        assert desc is not None, "a dispatchable dml_ep models has its desc"
        tensors = desc.tensors()
        bound = {**dispatchable.bindings, **_names(bindings, where)}
        # a list of one binds an array field's only tensor (DEQUANTIZE's QuantizationTensors under SCALE)
        bound = {f"{point}[0]" if point not in tensors and f"{point}[0]" in tensors else point: name for point, name in bound.items()}
        unknown = sorted(set(bound) - set(tensors))
        if unknown:
            raise DxDispatchError(f"{where}: no tensor {unknown[0]!r} to bind (tensors: {', '.join(tensors)})")
        arrays = {}
        for field, tensor in tensors.items():
            if field not in bound:
                raise DxDispatchError(f"{where}: nothing bound for {field}")
            buffer = buffers[bound[field]].buffer
            if len(buffer) < tensor.TotalTensorSizeInBytes:
                raise DxDispatchError(f"{where}: {field} is bound to {bound[field]!r}, {len(buffer)} bytes, "
                                      f"less than its TotalTensorSizeInBytes {tensor.TotalTensorSizeInBytes}")
            arrays[field] = np.frombuffer(buffer, dtype=tensor.DataType.numpy(), count=len(buffer) // tensor.DataType.element_size)
        outputs = output_fields(desc)
        reads = getattr(desc, "READS_OUTPUTS", ())  # outputs written in place, read first (MULTIHEAD_ATTENTION1's presents)
        results = run_kernel(desc, {f: a for f, a in arrays.items() if f not in outputs or f in reads}, arithmetic, engine, dispatchable.state)
        for field, result in zip(outputs, results if len(outputs) > 1 else (results,)):
            output, target = tensors[field], arrays[field]
            itemsize = target.itemsize
            result = np.asarray(result)
            if result.dtype.kind in "iu" and result.dtype != target.dtype and result.dtype.itemsize == itemsize:
                result = result.view(target.dtype)  # MAX_POOLING2's UINT64 indices, returned as the ONNX int64 tensor
            np.copyto(as_strided(target, output.Sizes, [s * itemsize for s in output.element_strides]), np.reshape(result, output.Sizes))


def _names(bindings, where: str) -> dict[str, str]:
    """Bind point -> resource name, from a name, ``{"name": ...}`` or a one-element list of either;
    a list of several binds an array field's tensors in order (``InputTensors[0]``, ...)."""
    if not isinstance(bindings, dict):
        raise DxDispatchError(f"{where}: bindings must be an object")
    names = {}
    for point, source in bindings.items():
        sources = source if isinstance(source, list) else [source]
        if not sources:
            raise DxDispatchError(f"{where}: {point}: an empty list binds nothing")
        for index, each in enumerate(sources):
            if isinstance(each, dict):
                if each.get("elementOffset") or "name" not in each:
                    raise DxDispatchError(f"{where}: {point}: only bindings of a whole resource by name are read")
                each = each["name"]
            if not isinstance(each, str):
                raise DxDispatchError(f"{where}: {point}: {each!r} is not a resource name")
            names[point if len(sources) == 1 else f"{point}[{index}]"] = each
    return names


def load(path: str) -> DxDispatchModel:
    """Read a DxDispatch model: a directory's ``model.json``, or a JSON file. Resource files are
    read from the JSON file's folder only: a path that leaves it (``..``, an absolute path, a
    symbolic link out) is refused, as onnxruntime refuses external data that leaves the model's
    folder (DxDispatch would also look in the current directory)."""
    file = os.path.join(path, "model.json") if os.path.isdir(path) else path
    try:
        with open(file, "rb") as f:
            data = json.loads(f.read())
    except OSError as exc:
        raise DxDispatchError(f"cannot read {file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise DxDispatchError(f"{file} is not JSON: {exc}") from None
    except RecursionError as exc:  # the json module recurses once per level of nesting
        raise DxDispatchError(f"{file}: JSON nested too deep to read ({exc})") from None
    if (not isinstance(data, dict) or not isinstance(data.get("resources"), dict) or not isinstance(data.get("dispatchables"), dict)
            or not isinstance(data.get("commands"), list)):
        raise DxDispatchError(f"{file}: a DxDispatch model is an object with resources and dispatchables (objects) and commands (a list)")
    base = os.path.dirname(os.path.abspath(file))
    resources = {name: _resource(value, base, f"resource {name!r}") for name, value in data["resources"].items()}
    dispatchables = {name: _dispatchable(name, value) for name, value in data["dispatchables"].items()}
    commands = [_command(command, index, resources, dispatchables) for index, command in enumerate(data["commands"])]
    for dispatchable in dispatchables.values():
        for field, name in dispatchable.bindings.items():
            if name not in resources:
                raise DxDispatchError(f"dispatchable {dispatchable.name!r} binds {field} to {name!r}, which is not a resource")
    return DxDispatchModel(file, resources, dispatchables, commands)


def _resource(value, base: str, where: str) -> Resource:
    if not isinstance(value, dict) or "initialValues" not in value:
        raise DxDispatchError(f"{where}: a buffer needs initialValues")
    if value.get("type", "buffer") != "buffer":
        raise DxDispatchError(f"{where}: only buffer resources exist")
    declared = value.get("initialValuesDataType")
    data_type = None if declared is None else data_type_of(declared, f"{where}.initialValuesDataType")
    initial = value["initialValues"]
    if isinstance(initial, dict) and "sourcePath" in initial:
        array = _read_source(initial["sourcePath"], data_type, base, where)
    else:
        if data_type is None or data_type == DML_TENSOR_DATA_TYPE.UNKNOWN:
            raise DxDispatchError(f"{where}: initialValuesDataType must name the elements' type")
        array = _initial_values(initial, data_type.numpy(), where)
    data_type = DML_TENSOR_DATA_TYPE.from_numpy(array.dtype)
    offset = _byte_count(value.get("initialValuesOffsetInBytes", 0), f"{where}.initialValuesOffsetInBytes")
    needed = offset + array.nbytes
    size = _byte_count(value.get("sizeInBytes", needed), f"{where}.sizeInBytes")
    if size < needed:
        raise DxDispatchError(f"{where}: sizeInBytes {size} is less than the {needed} bytes of its initial values")
    buffer = _zeros((size + 3) & ~3, where)  # DirectML's 4-byte alignment
    buffer[offset:offset + array.nbytes] = array.tobytes()
    return Resource(buffer, data_type, array.size)


MAX_BUFFER = 1 << 40  # a DirectML buffer's size is a UINT64, but no device holds a terabyte


def _byte_count(value, where: str) -> int:
    """A size or offset in bytes: a non-negative integer (JSON's 1e3 or "100" are not) a device could hold."""
    if type(value) is not int or not 0 <= value <= MAX_BUFFER:
        raise DxDispatchError(f"{where}: {value!r} is not a byte count (an integer from 0 to {MAX_BUFFER})")
    return value


def _zeros(size: int, where: str) -> bytearray:
    try:
        return bytearray(size)
    except MemoryError:
        raise DxDispatchError(f"{where}: not enough memory for its {size} bytes") from None


def _initial_values(initial, dtype: np.dtype, where: str) -> np.ndarray:
    """An array, constant (``valueCount``, ``value``) or sequence (``valueStart``, ``valueDelta``) initializer."""
    def number(x):
        return FLOAT_WORDS[x] if isinstance(x, str) and x in FLOAT_WORDS and dtype.kind == "f" else x

    try:
        if isinstance(initial, list):
            return np.array([number(x) for x in initial], dtype=dtype)
        count = initial["valueCount"]
        if type(count) is not int or not 0 <= count <= MAX_BUFFER // dtype.itemsize:
            raise ValueError(f"valueCount {count!r} is not a count of elements a buffer holds")
        if "value" in initial:
            return np.full(count, number(initial["value"]), dtype=dtype)
        return (number(initial["valueStart"]) + number(initial["valueDelta"]) * np.arange(count, dtype=np.float64)).astype(dtype)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise DxDispatchError(f"{where}: initialValues are not an array, constant or sequence initializer of {dtype} ({exc})") from None
    except MemoryError:
        raise DxDispatchError(f"{where}: not enough memory for its {initial.get('valueCount')} initial values") from None


def _read_source(path: str, data_type, base: str, where: str) -> np.ndarray:
    """A ``.npy`` file (its own type; C order, as DxDispatch reads) or raw bytes of ``data_type``,
    in the model's folder (``base``). A .npy file is mapped, not read whole: its header's shape is
    checked against the bytes the file holds before any are copied."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise DxDispatchError(f"{where}: sourcePath must be a file name, not {path!r}")
    file = os.path.realpath(os.path.join(base, path))
    if os.path.isabs(path) or os.path.commonpath([file, os.path.realpath(base)]) != os.path.realpath(base):
        raise DxDispatchError(f"{where}: {path!r} is not in the model's folder (a resource file is read from there only)")
    if not os.path.isfile(file):
        raise DxDispatchError(f"{where}: no file {path!r} in the model's folder")
    try:
        if not file.lower().endswith(".npy"):
            if data_type is None or data_type == DML_TENSOR_DATA_TYPE.UNKNOWN:
                raise DxDispatchError(f"{where}: raw data in {path!r} needs initialValuesDataType")
            return np.fromfile(file, dtype=data_type.numpy())
        mapped = np.load(file, mmap_mode="r", allow_pickle=False)
        array = np.array(mapped, order="K")
    except (OSError, ValueError, TypeError) as exc:
        raise DxDispatchError(f"{where}: cannot read {path!r}: {exc}") from None
    except MemoryError:
        raise DxDispatchError(f"{where}: not enough memory to read {path!r}") from None
    if array.flags.f_contiguous and not array.flags.c_contiguous:
        raise DxDispatchError(f"{where}: {path!r} is in Fortran order, which DxDispatch does not read")
    file_type = DML_TENSOR_DATA_TYPE.from_numpy(array.dtype)
    if file_type == DML_TENSOR_DATA_TYPE.UNKNOWN:
        raise DxDispatchError(f"{where}: {path!r} holds {array.dtype}, which has no DirectML data type")
    if data_type is not None and data_type != file_type:
        raise DxDispatchError(f"{where}: {path!r} holds {file_type.name}, initialValuesDataType says {data_type.name}")
    return array.reshape(-1)


def _dispatchable(name: str, value) -> Dispatchable:
    where = f"dispatchable {name!r}"
    if not isinstance(value, dict):
        raise DxDispatchError(f"{where}: must be an object")
    kind = str(value.get("type", value.get("Type", "")))
    bindings = _names(value.get("bindings", {}), where)
    try:
        desc = from_dict(value)
        desc.validate(max(DML_FEATURE_LEVEL))
    except NotModelled as exc:
        return Dispatchable(name, kind, None, bindings, NotModelled(f"{where}: {exc}"))
    except (DxDispatchError, DescValidationError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    return Dispatchable(name, kind, desc, bindings)


def _command(command, index: int, resources: dict, dispatchables: dict) -> dict:
    where = f"command {index}"
    if not isinstance(command, dict) or not isinstance(command.get("type"), str):
        raise DxDispatchError(f"{where}: a command is an object with a type")
    kind = command["type"].lower()
    if kind == "dispatch":
        if not isinstance(command.get("dispatchable"), str) or command["dispatchable"] not in dispatchables:
            raise DxDispatchError(f"{where}: no dispatchable {command.get('dispatchable')!r}")
        for point, name in _names(command.get("bindings", {}), where).items():
            if name not in resources:
                raise DxDispatchError(f"{where}: binds {point} to {name!r}, which is not a resource")
    elif kind in ("print", "writefile"):
        resource = command.get("resource")
        if not isinstance(resource, str) or resource not in resources:
            raise DxDispatchError(f"{where}: no resource {resource!r}")
        dims = command.get("dimensions")
        if kind == "writefile" and dims:
            held = len(resources[resource].buffer) // resources[resource].data_type.numpy().itemsize
            if (not isinstance(dims, list) or any(type(d) is not int or d < 0 for d in dims)
                    or math.prod(dims) > held):
                raise DxDispatchError(f"{where}: dimensions {dims!r} are not sizes of at most the {held} elements {resource!r} holds")
    else:
        raise DxDispatchError(f"{where}: unknown command type {command['type']!r} (dispatch, print, writeFile)")
    return command
