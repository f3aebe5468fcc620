"""Model inputs for the CLI: seeded random arrays, ``.npy`` files, and ONNX test-data directories;
and the ``.npy`` file names arrays are written under.

Random inputs are drawn at the shapes given with ``--shape``, else the declared ones with symbolic
dimensions as 1, in the ranges :func:`value_ranges` picks: 8- and 16-bit integers (the types
QuantizeLinear makes) over the whole type, so that quantized inputs hit both saturation ends; wider
integers (token ids, masks, indices) in Polygraphy's default ``[0, 1]``; an integer input that
indexes a Gather of constant data within that data's size; floats standard normal; or the range
given with ``--val-range`` (Polygraphy's option, inclusive bounds as there).
A directory holds ``<input name>.npy`` files, or ``input_<i>.pb`` TensorProtos as in the ONNX
test data (``test_data_set_0/input_0.pb``), matched by the TensorProto's name, else by position;
:func:`zoo_layout` finds a model and its data sets in a directory laid out as the ONNX model zoo.
"""

from __future__ import annotations

import contextlib
import glob
import math
import os
import re
from typing import Collection

import numpy as np
import onnx
from onnx import numpy_helper

from ..core import graph
from ..core.errors import FeedError, NodeError
from ..core.tensor_desc import MAX_ELEMENTS
from .session import MAX_FEED_BYTES


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
        if graph.fixed_size(dim) not in (None, size):
            raise FeedError(f"{where}: dimension {axis} is {size}, the model declares {dim.dim_value}")


def _shape_text(name: str, shape: tuple[int, ...]) -> str:
    return f"{name}={','.join(map(str, shape))}"


def random_inputs(model: onnx.ModelProto, seed: int = 0, shapes: dict[str, tuple[int, ...]] | None = None,
                  ranges: dict[str, tuple | None] | None = None, given: Collection[str] = ()) -> dict[str, np.ndarray]:
    """One seeded random array per graph input, at its shape in ``shapes``, else its declared
    shape (symbolic dims as 1), with values in its range in ``ranges`` (as :func:`value_ranges`
    gives them; by default, ``value_ranges(model)``). An input ``given`` otherwise (``--input``)
    whose type has no random values (int4, strings) is left out; the others are drawn all the
    same, so that each input's values stay those of the seed whichever are given."""
    rng = np.random.default_rng(seed)
    feeds = {}
    sizes = input_shapes(model, shapes)
    ranges = value_ranges(model) if ranges is None else ranges
    for value in graph.graph_inputs(model.graph):
        if value.name in given and not _drawable(value):
            continue
        if not value.type.HasField("tensor_type"):
            raise FeedError(f"input {value.name!r}: cannot make random values of a {value.type.WhichOneof('value')}; give the inputs of this model from Python")
        dtype = graph.element_dtype(value)
        shape = sizes[value.name]
        _check_size(value.name, shape, dtype)
        bounds = ranges.get(value.name)
        if dtype.kind == "f" and bounds is not None:
            low, high = bounds
            feeds[value.name] = (rng.random(shape) * (high - low) + low).astype(dtype)  # as Polygraphy: [low, high)
        elif dtype in (np.float32, np.float64):
            feeds[value.name] = rng.standard_normal(shape, dtype=dtype)
        elif dtype.kind == "f":  # float16: numpy draws normals in float32 and float64 only
            feeds[value.name] = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        elif dtype.kind in "iub":
            low, high = bounds if bounds is not None else DEFAULT_INTEGER_RANGE
            feeds[value.name] = rng.integers(low, high, size=shape, dtype=dtype, endpoint=True)
        else:
            raise FeedError(f"input {value.name!r}: cannot make random values of type {dtype}; give it with --input")
    return feeds


def _drawable(value: onnx.ValueInfoProto) -> bool:
    """Whether :func:`random_inputs` makes random values of this input's type."""
    return value.type.HasField("tensor_type") and graph.element_dtype(value).kind in "fiub"


DEFAULT_INTEGER_RANGE = (0, 1)  # Polygraphy's DataLoader default val_range, (0.0, 1.0), cast to int for integer inputs
FULL_RANGE_BITS = 16  # integers this narrow (QuantizeLinear's types) are drawn over their whole range
_VALUE_KEEPING = {"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Transpose"}  # input 0's values reach the output
_SHAPE_KEEPING = {"Cast", "Identity", "DequantizeLinear"}  # input 0's shape is the output's


def value_ranges(model: onnx.ModelProto, given: dict[str | None, tuple] | None = None) -> dict[str, tuple | None]:
    """The inclusive ``(low, high)`` each graph input's random values are drawn in: the one
    ``given`` for its name (``--val-range``; the key None for every input not named), else integers
    of 8 or 16 bits over their whole type, wider ones in :data:`DEFAULT_INTEGER_RANGE`, either
    within the data size of the Gathers they index (:func:`gather_sizes`); booleans ``(0, 1)``;
    floats None, standard normal. A given range must fit the input's type."""
    given = given or {}
    values = graph.graph_inputs(model.graph)
    names = [value.name for value in values]
    for name, bounds in given.items():
        if name is not None and name not in names:
            raise FeedError(f"--val-range {_range_text(name, bounds)}: no model input named {name!r} (inputs: {', '.join(names)})")
    sizes = gather_sizes(model.graph)
    ranges: dict[str, tuple | None] = {}
    for value in values:
        if not value.type.HasField("tensor_type"):
            continue
        dtype = graph.element_dtype(value)
        key = value.name if value.name in given else None  # None: the range of every input not named
        if key in given:
            ranges[value.name] = _fitting(value.name, given[key], dtype, key)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            low, high = (info.min, info.max) if info.bits <= FULL_RANGE_BITS else DEFAULT_INTEGER_RANGE
            if value.name in sizes:
                low, high = max(low, 0), min(info.max, sizes[value.name] - 1)
            ranges[value.name] = (int(low), int(high))
        elif dtype.kind == "b":
            ranges[value.name] = (0, 1)
        else:
            ranges[value.name] = None
    return ranges


def _fitting(name: str, bounds: tuple, dtype: np.dtype, key: str | None) -> tuple:
    """``bounds`` as the input's type holds them, or a FeedError naming what does not fit."""
    where = f"--val-range {_range_text(key, bounds)}"
    low, high = bounds
    if dtype.kind == "f":
        limit = float(np.finfo(dtype).max)
        if not -limit <= low <= high <= limit:
            raise FeedError(f"{where}: input {name!r} is {dtype}, whose finite values lie in [{-limit:g}, {limit:g}]")
        return float(low), float(high)
    if dtype.kind not in "iub":
        raise FeedError(f"{where}: cannot make random values of type {dtype} for input {name!r}; give it with --input")
    if any(isinstance(bound, float) and not bound.is_integer() for bound in bounds):
        raise FeedError(f"{where}: input {name!r} is {dtype}: give integer bounds")
    low, high = int(low), int(high)
    smallest, largest = (0, 1) if dtype.kind == "b" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    if not smallest <= low <= high <= largest:
        raise FeedError(f"{where}: input {name!r} is {dtype}, whose values lie in [{smallest}, {largest}]")
    return low, high


def gather_sizes(graph_proto: onnx.GraphProto) -> dict[str, int]:
    """For each graph input whose values are the indices (input 1) of a Gather, directly or through
    nodes that keep them (Cast, Reshape, Unsqueeze...), and whose data is constant (an initializer
    or Constant node, maybe through a DequantizeLinear or Cast): the smallest size of such data
    along the gathered axis, so that indices drawn in ``[0, size - 1]`` are in range."""
    shapes, producers, consumers = _wiring(graph_proto)

    def data_shape(name: str) -> tuple | None:
        node = producers.get(name)
        if name in shapes or node is None or node.op_type not in _SHAPE_KEEPING:
            return shapes.get(name)
        return data_shape(node.input[0])

    sizes: dict[str, int] = {}
    for value in graph.graph_inputs(graph_proto):
        reached, seen = [value.name], set()
        while reached:
            name = reached.pop()
            seen.add(name)
            for node, index in consumers.get(name, ()):
                if node.op_type in _VALUE_KEEPING and index == 0 and node.output[0] not in seen:
                    reached.append(node.output[0])
                elif node.op_type == "Gather" and index == 1:
                    shape = data_shape(node.input[0])
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    if shape and -len(shape) <= axis < len(shape) and shape[axis] > 0:
                        sizes[value.name] = min(sizes.get(value.name, shape[axis]), shape[axis])
    return sizes


def _wiring(graph_proto: onnx.GraphProto) -> tuple[dict[str, tuple], dict[str, onnx.NodeProto], dict[str, list[tuple[onnx.NodeProto, int]]]]:
    """Of the graph's ai.onnx nodes: the shapes of its constants (initializers and Constant nodes),
    the node that makes each value, and the nodes that read each value with the input index."""
    shapes = {tensor.name: tuple(tensor.dims) for tensor in graph_proto.initializer}
    producers: dict[str, onnx.NodeProto] = {}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph_proto.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            shapes[node.output[0]] = tuple(node.attribute[0].t.dims)
        producers.update((output, node) for output in node.output)
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    return shapes, producers, consumers


def parse_val_range(text: str) -> tuple[str | None, tuple]:
    """``NAME=LO,HI`` from ``--val-range``, or Polygraphy's ``NAME:[LO,HI]``, or ``[LO,HI]`` for
    every input not named (the name None): inclusive bounds, ints or floats."""
    name, bounds = None, text
    if text.endswith("]") and "[" in text:
        cut = text.rindex("[")
        name, bounds = text[:cut] or None, text[cut + 1:-1]
        if name is not None:
            if name[-1] not in ":=" or len(name) == 1:
                raise FeedError(f"--val-range {text!r}: expected NAME=LO,HI, NAME:[LO,HI] or [LO,HI]")
            name = name[:-1]
    else:
        name, sep, bounds = text.rpartition("=")
        if not sep or not name:
            raise FeedError(f"--val-range {text!r}: expected NAME=LO,HI, NAME:[LO,HI] or [LO,HI]")
    parts = bounds.split(",")
    numbers = [n for n in (_number(part.strip()) for part in parts) if n is not None]
    if len(parts) != 2 or len(numbers) != 2:
        raise FeedError(f"--val-range {text!r}: the range is two numbers, LO,HI")
    low, high = numbers
    if not (math.isfinite(low) and math.isfinite(high)):
        raise FeedError(f"--val-range {text!r}: the bounds must be finite")
    if low > high:
        raise FeedError(f"--val-range {text!r}: LO {low} is above HI {high}")
    return name, (low, high)


def _number(text: str) -> int | float | None:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None


def _range_text(name: str | None, bounds: tuple) -> str:
    low, high = bounds
    return f"{name}={low},{high}" if name is not None else f"[{low},{high}]"


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
        with open(path, "rb") as f:
            return None, read_npy(f)
    except Exception as exc:  # numpy and protobuf raise many types on a bad file
        raise FeedError(f"{path}: cannot read an array ({exc})") from None


def read_npy(f) -> np.ndarray:
    """The array of an .npy file object (a file, or Polygraphy's decoded bytes). numpy allocates
    the array its header claims before it reads the data, so the claim is checked first against
    the bytes there: ValueError, not a header of 10^12 elements asking terabytes of memory."""
    start = f.tell()
    if f.read(4) == b"PK\x03\x04":  # what np.load would read as an NpzFile (Polygraphy wrote them long ago)
        raise ValueError("an .npz archive, not an .npy array")
    f.seek(start)
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(f)
    claimed, data = math.prod(shape) * dtype.itemsize, f.tell()
    held = f.seek(0, os.SEEK_END) - data
    if claimed > held:
        raise ValueError(f"its header claims {dtype} {list(shape)}, {claimed:,} bytes, and it holds {held:,}")
    f.seek(start)
    return np.lib.format.read_array(f, allow_pickle=False)


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
INTEGERS = "integers in"  # how a source says that a random input holds integers, and their range


def make_feeds(model: onnx.ModelProto, seed: int = 0, inputs=(), input_dir: str | None = None,
               shapes=None, val_ranges=()) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Feeds for every graph input: random ones (of ``shapes``, in the ``--val-range`` texts
    ``val_ranges``, else :func:`value_ranges`' defaults), replaced by those from ``input_dir``, then
    ``--input``; and where each came from, for the reports: its file, or ``random (seed N)``, with
    the range of integers narrower than their type (``random (seed N), integers in [0, 99]``)."""
    ranges = value_ranges(model, dict(parse_val_range(text) for text in val_ranges))
    names = [value.name for value in graph.graph_inputs(model.graph)]
    given: dict[str, np.ndarray] = {}
    files: dict[str, str] = {}
    if input_dir is not None:
        given, files = load_directory(input_dir, names)
    for text in inputs:
        name, path = parse_input_argument(text)
        if name not in names:
            raise FeedError(f"--input {text!r}: no model input named {name!r} (inputs: {', '.join(names)})")
        given[name], files[name] = load_array(path)[1], path
    feeds = random_inputs(model, seed, shapes, ranges, given)
    sources = {}
    for value in graph.graph_inputs(model.graph):
        if value.name in feeds:
            assumed = [] if shapes and value.name in shapes else graph.symbolic_dims(value)
            sources[value.name] = f"random (seed {seed})" + _drawn(feeds[value.name].dtype, ranges.get(value.name)) + \
                (f", {', '.join(assumed)} {ASSUMED}" if assumed else "")
    feeds.update(given)
    sources.update(files)
    return feeds, sources


def _drawn(dtype: np.dtype, bounds: tuple | None) -> str:
    """What a source adds about a random input's values: the range of integers, unless their whole
    type, or of floats drawn uniformly (``--val-range``); nothing for standard normal floats and
    booleans."""
    if bounds is None:  # standard normal floats
        return ""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return "" if bounds == (info.min, info.max) else f", {INTEGERS} [{bounds[0]}, {bounds[1]}]"
    if dtype.kind == "f":
        return f", uniform in [{bounds[0]:g}, {bounds[1]:g})"
    return ""


def npy_file_names(names: list[str]) -> dict[str, str]:
    """A distinct ``<name>.npy`` file name per array name (outputs, resources), with the characters
    a file name cannot hold replaced by ``_``. Names that end up the same (``o/1`` and ``o_1``, or
    ``Y`` and ``y`` on a case-insensitive file system) get a numeric suffix, in the order given:
    none overwrites another. A name too long for a file (an ONNX name has no limit) is cut, and keeps
    a digest of the whole name (:func:`short_stem`)."""
    stems = distinct_names([short_stem(re.sub(r"[^\w.-]", "_", name), name) for name in names], key=str.casefold)
    return {name: stem + ".npy" for name, stem in zip(names, stems)}


def output_files(directory: str, names: list[str]) -> dict[str, str]:
    """``run --output-dir``'s file of each output: ``DIR/<name>.npy``, named by :func:`npy_file_names`."""
    return {name: os.path.join(directory, file) for name, file in npy_file_names(names).items()}


MAX_STEM_BYTES = 120  # well below a file name's 255 bytes, and of Windows' 260-character paths (DxDispatch runs there)


def short_stem(stem: str, name: str) -> str:
    """``stem``, or where its UTF-8 is longer than :data:`MAX_STEM_BYTES`, its start and 8 hex digits
    of ``name``'s SHA-256: names that share a long start still get files of their own."""
    if len(stem.encode()) <= MAX_STEM_BYTES:
        return stem
    import hashlib  # here: it loads OpenSSL, which a session needs only for long names (tests/end_to_end/test_scale.py)

    start = stem.encode()[:MAX_STEM_BYTES - 9].decode(errors="ignore")  # not cutting a character in two
    return f"{start}_{hashlib.sha256(name.encode(errors='surrogatepass')).hexdigest()[:8]}"


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


# onnxruntime's Gather*, Scatter*; dml_ep's DirectML Gather
INDEX_OUT_OF_RANGE = re.compile(r"out of (data )?bounds|out of range|invalid indi|an index is outside", re.IGNORECASE)


@contextlib.contextmanager
def naming_random_inputs(sources: dict[str, str]):
    """A node error on random inputs says what of them may be wrong, not the model: an index out
    of range, the random integers (their range); else the symbolic dimensions taken as 1."""
    try:
        yield
    except NodeError as error:
        integers = [f"{name} ({source})" for name, source in sources.items() if INTEGERS in source]
        assumed = [f"{name} ({source})" for name, source in sources.items() if ASSUMED in source]
        if integers and INDEX_OUT_OF_RANGE.search(str(error)):
            error.args = (f"{error} (random inputs {'; '.join(integers)}: give their values with "
                          "--val-range NAME=LO,HI or --input NAME=FILE)",)
        elif assumed:
            error.args = (f"{error} (random inputs {'; '.join(assumed)}: give the shapes with --shape NAME=D0,D1,...)",)
        raise
