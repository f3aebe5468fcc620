"""Model inputs for the CLI: seeded random arrays, ``.npy`` files, and ONNX test-data directories;
and the ``.npy`` file names arrays are written under.

Random inputs cover each element type's whole range (integers uniformly from min to max, so
quantized inputs hit both saturation ends; floats standard normal), at the shapes given with
``--shape``, else the declared ones with symbolic dimensions as 1.
A directory holds ``<input name>.npy`` files, or ``input_<i>.pb`` TensorProtos as in the ONNX
test data (``test_data_set_0/input_0.pb``), matched by the TensorProto's name, else by position;
:func:`zoo_layout` finds a model and its data sets in a directory laid out as the ONNX model zoo.
"""

from __future__ import annotations

import glob
import math
import os
import re

import numpy as np
import onnx
from onnx import numpy_helper

from . import graph
from .errors import FeedError
from .session import MAX_FEED_BYTES
from .tensor_desc import MAX_ELEMENTS


def input_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, tuple[int, ...]]:
    """Each graph input's shape: from ``shapes`` (``--shape``) where given, else the declared one
    with symbolic dims as 1. A given shape keeps the declared rank and fixed sizes."""
    shapes = shapes or {}
    values = graph.graph_inputs(model.graph)
    names = [value.name for value in values]
    for name, shape in shapes.items():
        if name not in names:
            raise FeedError(f"--shape {_shape_text(name, shape)}: no model input named {name!r} (inputs: {', '.join(names)})")
    for value in values:
        if value.name in shapes:
            _check_shape(value, shapes[value.name])
    return {v.name: tuple(shapes[v.name]) if v.name in shapes else graph.declared_shape(v) for v in values}


def _check_shape(value: onnx.ValueInfoProto, shape: tuple[int, ...]) -> None:
    if not value.type.tensor_type.HasField("shape"):
        return  # no declared rank to keep
    dims = value.type.tensor_type.shape.dim
    where = f"--shape {_shape_text(value.name, shape)}"
    if len(shape) != len(dims):
        raise FeedError(f"{where}: rank {len(shape)}, the model declares rank {len(dims)}")
    for axis, (size, dim) in enumerate(zip(shape, dims)):
        if dim.HasField("dim_value") and size != dim.dim_value:
            raise FeedError(f"{where}: dimension {axis} is {size}, the model declares {dim.dim_value}")


def _shape_text(name: str, shape: tuple[int, ...]) -> str:
    return f"{name}={','.join(map(str, shape))}"


def random_inputs(model: onnx.ModelProto, seed: int = 0, shapes: dict[str, tuple[int, ...]] | None = None) -> dict[str, np.ndarray]:
    """One seeded random array per graph input, at its shape in ``shapes``, else its declared
    shape (symbolic dims as 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    sizes = input_shapes(model, shapes)
    for value in graph.graph_inputs(model.graph):
        if not value.type.HasField("tensor_type"):
            raise FeedError(f"input {value.name!r}: cannot make random values of a {value.type.WhichOneof('value')}; give the inputs of this model from Python")
        dtype = graph.element_dtype(value)
        shape = sizes[value.name]
        _check_size(value.name, shape, dtype)
        if dtype in (np.float32, np.float64):
            feeds[value.name] = rng.standard_normal(shape, dtype=dtype)
        elif dtype.kind == "f":  # float16: numpy draws normals in float32 and float64 only
            feeds[value.name] = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            feeds[value.name] = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        elif dtype.kind == "b":
            feeds[value.name] = rng.integers(0, 1, size=shape, dtype=bool, endpoint=True)
        else:
            raise FeedError(f"input {value.name!r}: cannot make random values of type {dtype}; give it with --input")
    return feeds


def _check_size(name: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse, before allocating it, a random input that the session would refuse once made."""
    elements = math.prod(shape)
    size = elements * dtype.itemsize
    if elements > MAX_ELEMENTS or size > MAX_FEED_BYTES:
        raise FeedError(f"input {name!r}: shape {list(shape)} of {dtype} is {size / 2**30:,.1f} GiB ({elements:,} elements), "
                        f"more than dml_ep takes ({MAX_FEED_BYTES / 2**30:.0f} GiB, {MAX_ELEMENTS:,} elements)")


def load_array(path: str) -> tuple[str | None, np.ndarray]:
    """An array from a ``.npy`` file (no name) or a TensorProto ``.pb`` file (with its name, if any).

    A ``.pb`` file's external data is read from the file's own folder, never outside it (onnx
    refuses absolute locations and those that leave it), whatever the current directory.
    """
    if not os.path.isfile(path):
        raise FeedError(f"{path}: no such file")
    try:
        if path.endswith(".pb"):
            tensor = onnx.TensorProto()
            with open(path, "rb") as f:
                tensor.ParseFromString(f.read())
            return tensor.name or None, numpy_helper.to_array(tensor, base_dir=os.path.dirname(os.path.abspath(path)))
        return None, np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy and protobuf raise many types on a bad file
        raise FeedError(f"{path}: cannot read an array ({exc})") from None


def load_directory(directory: str, input_names: list[str]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Arrays from ``<input name>.npy`` files or ``input_<i>.pb`` files in ``directory``, and the
    file each came from."""
    if not os.path.isdir(directory):
        raise FeedError(f"{directory}: no such directory")
    files = sorted(os.listdir(directory), key=_natural_key)
    feeds, sources = load_tensor_protos(directory, input_names, "input")
    for file in files:
        stem, ext = os.path.splitext(file)
        if ext != ".npy":
            continue
        if stem not in input_names:
            raise FeedError(f"{directory}/{file}: no model input named {stem!r} (inputs: {', '.join(input_names)})")
        path = os.path.join(directory, file)
        feeds[stem], sources[stem] = load_array(path)[1], path
    if not feeds:
        raise FeedError(f"{directory}: no <input name>.npy or input_<i>.pb files")
    return feeds, sources


def load_tensor_protos(directory: str, names: list[str], kind: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The ``<kind>_<i>.pb`` TensorProtos in ``directory`` (``kind`` "input" or "output"), matched
    to ``names`` by the TensorProto's name, else by position; and the file of each."""
    files = sorted((f for f in os.listdir(directory) if f.startswith(kind) and f.endswith(".pb")), key=_natural_key)
    arrays, paths = {}, {}
    for position, file in enumerate(files):
        path = os.path.join(directory, file)
        name, array = load_array(path)
        if name not in names:
            if position >= len(names):
                raise FeedError(f"{directory}/{file}: the model has only {len(names)} {kind}(s)")
            name = names[position]
        arrays[name], paths[name] = array, path
    return arrays, paths


def zoo_layout(directory: str) -> tuple[str, list[str]] | None:
    """The model and the ``test_data_set_*`` folders of a directory laid out as in the ONNX model
    zoo (``model.onnx``, or its one ``*.onnx``, beside ``test_data_set_0/input_0.pb`` ...), or None
    when ``directory`` has no data sets."""
    data_sets = sorted(glob.glob(os.path.join(glob.escape(directory), "test_data_set_*", "")), key=_natural_key)
    if not data_sets:
        return None
    models = sorted(glob.glob(os.path.join(glob.escape(directory), "*.onnx")))
    named = os.path.join(directory, "model.onnx")
    if named in models:
        models = [named]
    if len(models) != 1:
        found = f"{len(models)} models ({', '.join(os.path.basename(m) for m in models)}) and no model.onnx" if models else "no *.onnx model"
        raise FeedError(f"{directory}: test_data_set_* folders but {found}")
    return models[0], [d.rstrip(os.sep) for d in data_sets]


def parse_input_argument(text: str) -> tuple[str, str]:
    """``name=path`` from ``--input``."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise FeedError(f"--input {text!r}: expected NAME=FILE")
    return name, path


ASSUMED = "taken as 1"  # how a source says that a random input took its symbolic dimensions as 1


def make_feeds(model: onnx.ModelProto, seed: int = 0, inputs=(), input_dir: str | None = None,
               shapes=None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Feeds for every graph input: random ones (of ``shapes``), replaced by those from
    ``input_dir``, then ``--input``; and where each came from, for the reports: its file, or
    ``random (seed N)``."""
    feeds = random_inputs(model, seed, shapes)
    sources = {}
    for value in graph.graph_inputs(model.graph):
        assumed = [] if shapes and value.name in shapes else graph.symbolic_dims(value)
        sources[value.name] = f"random (seed {seed})" + (f", {', '.join(assumed)} {ASSUMED}" if assumed else "")
    names = list(feeds)
    if input_dir is not None:
        arrays, files = load_directory(input_dir, names)
        feeds.update(arrays)
        sources.update(files)
    for text in inputs:
        name, path = parse_input_argument(text)
        if name not in names:
            raise FeedError(f"--input {text!r}: no model input named {name!r} (inputs: {', '.join(names)})")
        feeds[name], sources[name] = load_array(path)[1], path
    return feeds, sources


def npy_file_names(names: list[str]) -> dict[str, str]:
    """A distinct ``<name>.npy`` file name per array name (outputs, resources), with the characters
    a file name cannot hold replaced by ``_``. Names that end up the same (``o/1`` and ``o_1``, or
    ``Y`` and ``y`` on a case-insensitive file system) get a numeric suffix, in the order given:
    none overwrites another."""
    stems = distinct_names([re.sub(r"[^\w.-]", "_", name) for name in names], key=str.casefold)
    return {name: stem + ".npy" for name, stem in zip(names, stems)}


def distinct_names(stems: list[str], key=str) -> list[str]:
    """The stems made distinct, in the order given, by a numeric suffix (``x``, ``x_2``, ...) on
    those that ``key`` (``str.casefold`` for file names) finds taken already."""
    names, taken = [], set()
    for stem in stems:
        candidate, suffix = stem, 1
        while key(candidate) in taken:
            suffix += 1
            candidate = f"{stem}_{suffix}"
        taken.add(key(candidate))
        names.append(candidate)
    return names


def _natural_key(file: str):
    """Sort ``input_10.pb`` after ``input_9.pb``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", file)]
