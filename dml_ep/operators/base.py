"""What every DirectML operator module shares: the desc base class and its support-table rules,
the tensor type sets, and the :class:`Operator` entry a module declares for the operator table.

Each desc is a frozen dataclass whose fields are DirectML's, in DirectML's order, and checks itself
against DirectML's support tables with ``validate(feature_level)``: the feature level that
introduced the operator, dimension counts and data types per tensor and per feature level, the
32 bits of its UINT and INT fields, the documented shape rules and the data-type pairings. A
broken rule raises :class:`~dml_ep.core.errors.DescValidationError` naming the operator, the tensor and
the rule.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, Sequence

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.enums import DML_TENSOR_DATA_TYPE as DT
from ..core.errors import DescValidationError
from ..core.tensor_desc import DML_BUFFER_TENSOR_DESC, left_pad

if TYPE_CHECKING:
    from ..numerics.kernels.quantized_product import PreparedQuantizedProduct

TensorDesc = DML_BUFFER_TENSOR_DESC  # a tensor field; one DirectML lets be null is ``TensorDesc | None``
SignedIntegers = tuple  # of int: a DirectML INT array (the others are UINT)
TensorDescArray = tuple  # of DML_BUFFER_TENSOR_DESC: a ``_Field_size_(Count)`` array of tensor descs (JOIN's InputTensors)
UINT, INT = ("UINT", 0, 2**32 - 1), ("INT", -(2**31), 2**31 - 1)
INTEGER_RANGES = {"int": UINT, "tuple[int, ...]": UINT, "SignedIntegers": INT}  # DirectML's integer fields, by annotation

QUANTIZED = frozenset({DT.INT8, DT.UINT8})
FLOATS = frozenset({DT.FLOAT32, DT.FLOAT16})
FLOAT32 = frozenset({DT.FLOAT32})
INT32 = frozenset({DT.INT32})


def field_kind(field: dataclasses.Field) -> str:
    """A desc field's annotation as written (``"TensorDesc"``, ``"tuple[int, ...]"``, ``"float"``)."""
    return field.type if isinstance(field.type, str) else field.type.__name__


@functools.lru_cache(maxsize=4096)
def validated(desc: "OperatorDesc", feature_level: FL) -> None:
    """``desc.validate(feature_level)``, once per distinct desc and level: descs are immutable, and
    the nodes of a large graph repeat a few of them (a failure is not remembered: it raises again)."""
    desc.validate(feature_level)


@dataclasses.dataclass(frozen=True)
class TensorRule:
    """One row of a DirectML support table: dimension counts per feature level, and data types.

    ``dims`` maps the feature level from which a range applies to that (min, max) range;
    ``types`` holds every data type the table lists at some level, and ``type_levels`` the level
    from which a type is listed, for those not listed from the operator's introduction.
    """

    field: str
    optional: bool
    dims: dict
    types: frozenset
    type_levels: dict = dataclasses.field(default_factory=dict)

    def dims_at(self, level: FL) -> tuple[int, int]:
        applicable = [fl for fl in self.dims if fl <= level]
        return self.dims[max(applicable)]

    def types_at(self, level: FL) -> frozenset:
        return frozenset(t for t in self.types if self.type_levels.get(t, level) <= level)


def rules(table, types_by_field) -> tuple[TensorRule, ...]:
    """Build TensorRules from ``{field: (optional, {FL: (lo, hi)})}`` and ``{field: types}``; a
    field's types may be ``{FL: types}``, the types added at each level (the table's rows)."""
    made = []
    for field, (optional, dims) in table.items():
        types, levels = types_by_field[field], {}
        if isinstance(types, dict):
            levels = {t: level for level, added in sorted(types.items(), reverse=True) for t in added}
            types = frozenset(levels)
        made.append(TensorRule(field, optional, dims, types, levels))
    return tuple(made)


class OperatorDesc:
    """Behaviour shared by the operator descs; subclasses are frozen dataclasses."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # each subclass's, as a dataclass
    OPERATOR_TYPE: ClassVar[OP]
    INTRODUCED: ClassVar[FL] = FL.FL_1_0
    TENSOR_RULES: ClassVar[tuple[TensorRule, ...]] = ()
    SAME_TYPE: ClassVar[tuple[tuple[str, ...], ...]] = ()

    def tensors(self) -> dict[str, DML_BUFFER_TENSOR_DESC]:
        """The desc's non-null tensor fields, in field order; an array field's tensors as
        ``Name[0]``, ``Name[1]``, ..."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, DML_BUFFER_TENSOR_DESC):
                out[f.name] = value
            elif isinstance(value, tuple) and value and isinstance(value[0], DML_BUFFER_TENSOR_DESC):
                out.update((f"{f.name}[{index}]", each) for index, each in enumerate(value))
        return out

    def tensor(self, field: str) -> TensorDesc | None:
        """One tensor field by name, ``Name[i]`` for an element of an array field."""
        name, _, index = field.partition("[")
        value = getattr(self, name)
        return value[int(index[:-1])] if index else value

    def fail(self, rule: str, field: str | None = None):
        """Raise DescValidationError naming the operator, the tensor or field, and the rule."""
        where = f"{self.OPERATOR_TYPE}" + (f", {field}" if field else "")
        raise DescValidationError(f"{where}: {rule}")

    def check_output_sizes(self, *fields: str) -> None:
        """The element-wise rule: each of ``fields`` has OutputTensor's sizes."""
        output = getattr(self, "OutputTensor").Sizes
        for field in fields:
            sizes = getattr(self, field).Sizes
            if sizes != output:
                self.fail(f"sizes {list(sizes)} must equal OutputTensor's {list(output)}", field)

    def validate(self, feature_level: FL = FL.FL_6_4) -> None:
        """Check the desc against DirectML's tables at ``feature_level``; raise on the first broken rule."""
        feature_level = FL.parse(feature_level)
        if feature_level < self.INTRODUCED:
            self.fail(f"requires {self.INTRODUCED} (target is {feature_level})")
        for rule in self.TENSOR_RULES:
            tensor = getattr(self, rule.field)
            if tensor is None:
                if not rule.optional:
                    self.fail("required tensor is missing", rule.field)
                continue
            lo, hi = rule.dims_at(feature_level)
            if not lo <= tensor.DimensionCount <= hi:
                allowed = f"{lo}" if lo == hi else f"{lo} to {hi}"
                self.fail(
                    f"DimensionCount {tensor.DimensionCount} is not supported at {feature_level} "
                    f"(allowed: {allowed})",
                    rule.field,
                )
            allowed_types = rule.types_at(feature_level)
            if tensor.DataType not in allowed_types:
                allowed = ", ".join(sorted(t.name for t in allowed_types))
                at = f" at {feature_level}" if tensor.DataType in rule.types else ""
                self.fail(f"DataType {tensor.DataType.name} is not supported{at} (allowed: {allowed})", rule.field)
            if any(size < 1 for size in tensor.Sizes):
                self.fail(f"sizes {list(tensor.Sizes)} contain a size below 1", rule.field)
            if tensor.element_count > 2**32 - 1:
                self.fail("more than 2^32-1 elements", rule.field)
        self.validate_integers()
        for first, *others in self.SAME_TYPE:
            want = getattr(self, first).DataType
            for field in others:
                tensor = getattr(self, field)
                if tensor is not None and tensor.DataType != want:
                    self.fail(f"DataType {tensor.DataType.name} must equal {first}'s {want.name}", field)
        self.validate_shapes(feature_level)

    def validate_integers(self) -> None:
        """DirectML's UINT and INT fields hold 32 bits (a DxDispatch model's JSON may hold any integer)."""
        for field in dataclasses.fields(self):
            if field_kind(field) in INTEGER_RANGES:
                kind, low, high = INTEGER_RANGES[field_kind(field)]
                value = getattr(self, field.name)
                values = value if isinstance(value, tuple) else (value,)
                if not all(low <= v <= high for v in values):
                    self.fail(f"{list(values)} does not fit DirectML's {kind} ({low} to {high})", field.name)

    def validate_shapes(self, feature_level: FL) -> None:
        """Operator-specific size rules (overridden by subclasses)."""

    def sizes4(self, field: str) -> tuple[int, ...]:
        """A tensor's sizes right-aligned to 4-D (lower feature levels allow fewer dimensions)."""
        return left_pad(getattr(self, field).Sizes, 4)

    def check_sizes(self, field: str, allowed: Sequence[tuple[int, ...]], what: str) -> None:
        tensor = getattr(self, field)
        if tensor is not None and self.sizes4(field) not in allowed:
            self.fail(f"sizes {list(tensor.Sizes)} must be {what}", field)

    def to_dict(self) -> dict:
        """The desc as JSON-ready data: tensors as dicts, enums by name."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if hasattr(value, "to_dict"):
                value = value.to_dict()
            elif isinstance(value, tuple):  # of numbers, or of tensor descs (TensorDescArray)
                value = [v.to_dict() if hasattr(v, "to_dict") else v for v in value]
            out[f.name] = value
        return {"Type": str(self.OPERATOR_TYPE), "Desc": out}

    def describe(self) -> list[str]:
        """One line per field, in struct order: tensors as type, sizes, strides and bytes."""
        lines = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, DML_BUFFER_TENSOR_DESC):
                text = f"{value.describe()}, {value.TotalTensorSizeInBytes} bytes"
                if value.Flags:
                    text += ", OWNED_BY_DML"
            elif isinstance(value, OperatorDesc):
                params = [f"{p.name}={getattr(value, p.name)}" for p in dataclasses.fields(value) if not p.name.endswith("Tensor")]
                text = f"{value.OPERATOR_TYPE}" + (f" ({', '.join(params)})" if params else "")
            elif value is None:
                text = "null"
            else:
                text = str(list(value) if isinstance(value, tuple) else value)
            lines.append(f"{f.name:22s} {text}")
        return lines


QUANTIZED_BINARY_TENSORS = (
    "ATensor",
    "AScaleTensor",
    "AZeroPointTensor",
    "BTensor",
    "BScaleTensor",
    "BZeroPointTensor",
    "OutputScaleTensor",
    "OutputZeroPointTensor",
    "OutputTensor",
)
# QLinearMatMul's and QLinearAdd's inputs, in order, bind to these fields (all but the output).
QUANTIZED_BINARY_INPUTS = QUANTIZED_BINARY_TENSORS[:-1]
QUANTIZED_BINARY_TYPES = {
    field: (FLOAT32 if "Scale" in field else QUANTIZED) for field in QUANTIZED_BINARY_TENSORS
}
QUANTIZED_BINARY_SAME_TYPE = (
    ("ATensor", "AZeroPointTensor"),
    ("BTensor", "BZeroPointTensor"),
    ("OutputTensor", "OutputZeroPointTensor"),
)


@dataclasses.dataclass(frozen=True)
class QuantizedBinaryDesc(OperatorDesc):
    """The nine tensor fields, in order, that QUANTIZED_LINEAR_MATRIX_MULTIPLY and
    ELEMENT_WISE_QUANTIZED_LINEAR_ADD share in DirectML's structs."""

    ATensor: TensorDesc
    AScaleTensor: TensorDesc
    AZeroPointTensor: TensorDesc | None
    BTensor: TensorDesc
    BScaleTensor: TensorDesc
    BZeroPointTensor: TensorDesc | None
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc | None
    OutputTensor: TensorDesc

    SAME_TYPE = QUANTIZED_BINARY_SAME_TYPE

    @staticmethod
    def tensor_rules(dims) -> tuple[TensorRule, ...]:
        """The nine fields' rules: zero points optional, scales FLOAT32, the others INT8 or UINT8;
        ``dims(field)`` gives a field's ``{feature level: (min, max)}`` dimension counts."""
        return rules({field: ("ZeroPoint" in field, dims(field)) for field in QUANTIZED_BINARY_TENSORS}, QUANTIZED_BINARY_TYPES)



@dataclasses.dataclass(frozen=True)
class DevicePrecision:
    """The envelope a Direct3D 12 device may compute a float operator's output within: a value
    within ``ulp`` units in the last place of the point value (ULP distance as WebNN's conformance
    tests count it: the difference of the bit patterns) or within ``atol`` of it, per tensor type;
    ``rule`` names the source (the D3D11.3 functional spec's section, WebNN's tolerance)."""

    rule: str
    ulp32: float = 0
    ulp16: float = 0
    atol32: float = 0.0
    atol16: float = 0.0


@dataclasses.dataclass(frozen=True)
class Operator:
    """What dml_ep knows of one DirectML operator, as its module declares it for the operator table
    (:data:`dml_ep.operators.registration.OPERATORS`).

    - ``desc``: the desc class (DxDispatch reads and writes it: ``dml_ep.interop.dxdispatch.descs``).
    - ``kernel``: ``kernel(desc, tensors, arithmetic, state) -> array`` (``state``: what it keeps
      between runs, ``dml_ep.operators.kernel_state.KernelState``); or ``prepared``: a class made
      once per node, engine and arithmetic (``cls(desc, tensors, arithmetic, engine, products)``,
      ``products`` the engine products of the kernel state), then called with each run's tensors,
      whose ``accumulate`` is the integer core alone.
    - ``compiled_kernel``: the kernel with its loops compiled (``dml_ep.numerics.kernels.compiled``), which
      the ``"onnxruntime"`` engine runs; ``kernel`` is its numpy twin, which the ``"numpy"``
      engine runs, and the tests hold the two to the same bits.
    - ``exact_value``: ``exact_value(desc, tensors, engine) -> (terms, output_scale)``, DirectML's
      value before rounding as ``sum(integers * scale for integers, scale in terms) / output_scale``
      (compare's ideal values); None for an operator that does not quantize.
    - ``exact_float``: ``exact_float(desc, tensors) -> (value, magnitude, K)`` of a float sum of
      products (GEMM, CONVOLUTION): the exact value in float64, its sum of magnitudes and the most
      terms an output sums, against which compare holds a reference's float32 sum ("float
      summation order", ``dml_ep.conformance.causes.product_causes``); None for other operators.
    - ``output_channels_last``: the kernel writes its 4-D output channels last (an NCHW view of
      NHWC memory), so the executor makes the sessions of the fallback nodes reading it for that layout.
    - ``exact_for_any_input``: every arithmetic gives the same output for one input (data
      movement, a max), or ``f(desc)`` says whether this desc's does; compare then puts a
      difference in isolation down to the reference's graph (``dml_ep.conformance.causes``).
    - ``device_precision``: how far a Direct3D 12 device may put a float operator's output from
      dml_ep's "directml" point value (a :class:`DevicePrecision`, or ``f(desc)`` giving one), which
      compare names "DirectML device precision"; None where the output is exact (data movement).
    """

    desc: type
    exact_value: Optional[Callable]
    kernel: Optional[Callable] = None
    compiled_kernel: Optional[Callable] = None
    prepared: Optional[type[PreparedQuantizedProduct]] = None
    exact_float: Optional[Callable] = None
    output_channels_last: bool = False
    exact_for_any_input: bool | Callable[[Any], bool] = False
    device_precision: "DevicePrecision | Callable[[Any], DevicePrecision | None] | None" = None
