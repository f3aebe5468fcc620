"""DirectML operator descs: one frozen dataclass per struct, DirectML's field names in DirectML's order.

Each desc checks itself against DirectML's support tables with ``validate(feature_level)``: the
feature level that introduced the operator, dimension counts and data types per tensor and per
feature level, the documented shape rules and the data-type pairings. A broken rule raises
:class:`~dml_ep.errors.DescValidationError` naming the operator, the tensor and the rule.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, Optional

from .enums import DML_FEATURE_LEVEL as FL
from .enums import DML_OPERATOR_TYPE as OP
from .enums import DML_TENSOR_DATA_TYPE as DT
from .errors import DescValidationError
from .tensor_desc import DML_BUFFER_TENSOR_DESC, left_pad

TensorDesc = Optional[DML_BUFFER_TENSOR_DESC]

QUANTIZED = frozenset({DT.INT8, DT.UINT8})
FLOATS = frozenset({DT.FLOAT32, DT.FLOAT16})
FLOAT32 = frozenset({DT.FLOAT32})
INT32 = frozenset({DT.INT32})


@functools.lru_cache(maxsize=4096)
def validated(desc: "OperatorDesc", feature_level: FL) -> None:
    """``desc.validate(feature_level)``, once per distinct desc and level: descs are immutable, and
    the nodes of a large graph repeat a few of them (a failure is not remembered: it raises again)."""
    desc.validate(feature_level)


@dataclasses.dataclass(frozen=True)
class TensorRule:
    """One row of a DirectML support table: dimension counts per feature level, and data types.

    ``dims`` maps the feature level from which a range applies to that (min, max) range.
    """

    field: str
    optional: bool
    dims: dict
    types: frozenset

    def dims_at(self, level: FL) -> tuple[int, int]:
        applicable = [fl for fl in self.dims if fl <= level]
        return self.dims[max(applicable)]


def _rules(table, types_by_field) -> tuple[TensorRule, ...]:
    """Build TensorRules from ``{field: (optional, {FL: (lo, hi)})}`` and ``{field: types}``."""
    return tuple(TensorRule(f, opt, dims, types_by_field[f]) for f, (opt, dims) in table.items())


class OperatorDesc:
    """Behaviour shared by the operator descs; subclasses are frozen dataclasses."""

    OPERATOR_TYPE: ClassVar[OP]
    INTRODUCED: ClassVar[FL] = FL.FL_1_0
    TENSOR_RULES: ClassVar[tuple[TensorRule, ...]] = ()
    SAME_TYPE: ClassVar[tuple[tuple[str, ...], ...]] = ()

    def tensors(self) -> dict[str, DML_BUFFER_TENSOR_DESC]:
        """The desc's non-null tensor fields, in field order."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), DML_BUFFER_TENSOR_DESC)
        }

    def fail(self, rule: str, field: str | None = None):
        """Raise DescValidationError naming the operator, the tensor or field, and the rule."""
        where = f"{self.OPERATOR_TYPE}" + (f", {field}" if field else "")
        raise DescValidationError(f"{where}: {rule}")

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
            if tensor.DataType not in rule.types:
                allowed = ", ".join(sorted(t.name for t in rule.types))
                self.fail(f"DataType {tensor.DataType.name} is not supported (allowed: {allowed})", rule.field)
            if any(size < 1 for size in tensor.Sizes):
                self.fail(f"sizes {list(tensor.Sizes)} contain a size below 1", rule.field)
            if tensor.element_count > 2**32 - 1:
                self.fail("more than 2^32-1 elements", rule.field)
        for first, *others in self.SAME_TYPE:
            want = getattr(self, first).DataType
            for field in others:
                tensor = getattr(self, field)
                if tensor is not None and tensor.DataType != want:
                    self.fail(f"DataType {tensor.DataType.name} must equal {first}'s {want.name}", field)
        self.validate_shapes(feature_level)

    def validate_shapes(self, feature_level: FL) -> None:
        """Operator-specific size rules (overridden by subclasses)."""

    def sizes4(self, field: str) -> tuple[int, ...]:
        """A tensor's sizes right-aligned to 4-D (lower feature levels allow fewer dimensions)."""
        return left_pad(getattr(self, field).Sizes, 4)

    def check_sizes(self, field: str, allowed: list[tuple[int, ...]], what: str) -> None:
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
            elif isinstance(value, tuple):
                value = list(value)
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


# ---------------------------------------------------------------------------------------------
# Activations (fusable into ELEMENT_WISE_ADD1, CONVOLUTION, GEMM, ...): Input/Output are null
# when fused.


@dataclasses.dataclass(frozen=True)
class ActivationDesc(OperatorDesc):
    """Common base of DML_ACTIVATION_*_OPERATOR_DESC."""

    InputTensor: TensorDesc = None
    OutputTensor: TensorDesc = None
    SAME_TYPE = (("InputTensor", "OutputTensor"),)

    @property
    def fused(self) -> bool:
        return self.InputTensor is None and self.OutputTensor is None

    def validate(self, feature_level: FL = FL.FL_6_4) -> None:
        if self.fused:
            feature_level = FL.parse(feature_level)
            if feature_level < self.INTRODUCED:
                self.fail(f"requires {self.INTRODUCED} (target is {feature_level})")
            return
        super().validate(feature_level)


_ACTIVATION_RULES = _rules(
    {"InputTensor": (False, {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)}), "OutputTensor": (False, {FL.FL_1_0: (4, 4), FL.FL_3_0: (1, 8)})},
    {"InputTensor": FLOATS, "OutputTensor": FLOATS},
)


def _activation(name: str, op: OP, introduced: FL = FL.FL_1_0, **params):
    """Declare a DML_ACTIVATION_* desc class with its parameters (as float fields with defaults)."""
    fields = [(p, float, dataclasses.field(default=default)) for p, default in params.items()]
    cls = dataclasses.make_dataclass(
        name,
        fields,
        bases=(ActivationDesc,),
        frozen=True,
        namespace={"OPERATOR_TYPE": op, "INTRODUCED": introduced, "TENSOR_RULES": _ACTIVATION_RULES},
    )
    cls.__module__ = __name__
    cls.__doc__ = f"{op} (parameters: {', '.join(params) or 'none'})."
    return cls


DML_ACTIVATION_ELU_OPERATOR_DESC = _activation("DML_ACTIVATION_ELU_OPERATOR_DESC", OP.ACTIVATION_ELU, Alpha=1.0)
DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC", OP.ACTIVATION_HARD_SIGMOID, Alpha=0.2, Beta=0.5
)
DML_ACTIVATION_IDENTITY_OPERATOR_DESC = _activation("DML_ACTIVATION_IDENTITY_OPERATOR_DESC", OP.ACTIVATION_IDENTITY)
DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC", OP.ACTIVATION_LEAKY_RELU, Alpha=0.01
)
DML_ACTIVATION_LINEAR_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_LINEAR_OPERATOR_DESC", OP.ACTIVATION_LINEAR, Alpha=1.0, Beta=0.0
)
DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC", OP.ACTIVATION_PARAMETRIC_SOFTPLUS, Alpha=1.0, Beta=1.0
)
DML_ACTIVATION_RELU_OPERATOR_DESC = _activation("DML_ACTIVATION_RELU_OPERATOR_DESC", OP.ACTIVATION_RELU)
DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC", OP.ACTIVATION_SCALED_ELU, Alpha=1.67326319217681884765625, Gamma=1.05070102214813232421875
)
DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC", OP.ACTIVATION_SCALED_TANH, Alpha=1.0, Beta=1.0
)
DML_ACTIVATION_SIGMOID_OPERATOR_DESC = _activation("DML_ACTIVATION_SIGMOID_OPERATOR_DESC", OP.ACTIVATION_SIGMOID)
DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC", OP.ACTIVATION_SOFTPLUS, Steepness=1.0
)
DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC = _activation("DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC", OP.ACTIVATION_SOFTSIGN)
DML_ACTIVATION_TANH_OPERATOR_DESC = _activation("DML_ACTIVATION_TANH_OPERATOR_DESC", OP.ACTIVATION_TANH)
DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC", OP.ACTIVATION_THRESHOLDED_RELU, Alpha=1.0
)
DML_ACTIVATION_SHRINK_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_SHRINK_OPERATOR_DESC", OP.ACTIVATION_SHRINK, FL.FL_2_0, Bias=0.0, Threshold=0.5
)
DML_ACTIVATION_CELU_OPERATOR_DESC = _activation(
    "DML_ACTIVATION_CELU_OPERATOR_DESC", OP.ACTIVATION_CELU, FL.FL_3_0, Alpha=1.0
)


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(ActivationDesc):
    """ELEMENT_WISE_CLIP: clamp(x * Scale + Bias, Min, Max); fusable from DML_FEATURE_LEVEL_6_0.

    ``ScaleBias`` is DirectML's optional DML_SCALE_BIAS, here a (Scale, Bias) pair or None.
    """

    ScaleBias: Optional[tuple[float, float]] = None
    Min: float = float("-inf")
    Max: float = float("inf")
    OPERATOR_TYPE = OP.ELEMENT_WISE_CLIP
    TENSOR_RULES = _ACTIVATION_RULES

    def validate(self, feature_level: FL = FL.FL_6_4) -> None:
        if self.fused and FL.parse(feature_level) < FL.FL_6_0:
            self.fail(f"fusing requires {FL.FL_6_0} (target is {FL.parse(feature_level)})")
        super().validate(feature_level)
        if self.Min > self.Max:
            self.fail(f"Min {self.Min} is greater than Max {self.Max}")


FUSABLE_ACTIVATIONS = (
    DML_ACTIVATION_ELU_OPERATOR_DESC,
    DML_ACTIVATION_HARD_SIGMOID_OPERATOR_DESC,
    DML_ACTIVATION_IDENTITY_OPERATOR_DESC,
    DML_ACTIVATION_LEAKY_RELU_OPERATOR_DESC,
    DML_ACTIVATION_LINEAR_OPERATOR_DESC,
    DML_ACTIVATION_PARAMETRIC_SOFTPLUS_OPERATOR_DESC,
    DML_ACTIVATION_RELU_OPERATOR_DESC,
    DML_ACTIVATION_SCALED_ELU_OPERATOR_DESC,
    DML_ACTIVATION_SCALED_TANH_OPERATOR_DESC,
    DML_ACTIVATION_SIGMOID_OPERATOR_DESC,
    DML_ACTIVATION_SOFTPLUS_OPERATOR_DESC,
    DML_ACTIVATION_SOFTSIGN_OPERATOR_DESC,
    DML_ACTIVATION_TANH_OPERATOR_DESC,
    DML_ACTIVATION_THRESHOLDED_RELU_OPERATOR_DESC,
    DML_ACTIVATION_SHRINK_OPERATOR_DESC,
    DML_ACTIVATION_CELU_OPERATOR_DESC,
    DML_ELEMENT_WISE_CLIP_OPERATOR_DESC,
)


# ---------------------------------------------------------------------------------------------
# The four operators dml_ep maps ONNX nodes to.


def convolution_output_sizes(in_spatial, kernel, strides, dilations, start_padding, end_padding) -> tuple[int, ...]:
    """Output size per spatial dimension: (padded input - dilated kernel) // stride + 1.

    ValueError(span, padded input) when the dilated kernel is larger than the padded input.
    """
    sizes = []
    for size, k, s, d, p0, p1 in zip(in_spatial, kernel, strides, dilations, start_padding, end_padding):
        span, padded = (k - 1) * d + 1, size + p0 + p1
        if padded < span:
            raise ValueError(span, padded)
        sizes.append((padded - span) // s + 1)
    return tuple(sizes)


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC(OperatorDesc):
    """QUANTIZED_LINEAR_CONVOLUTION (ONNX QLinearConv), DML_FEATURE_LEVEL_2_1 and up."""

    InputTensor: TensorDesc
    InputScaleTensor: TensorDesc
    InputZeroPointTensor: TensorDesc
    FilterTensor: TensorDesc
    FilterScaleTensor: TensorDesc
    FilterZeroPointTensor: TensorDesc
    BiasTensor: TensorDesc
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc
    OutputTensor: TensorDesc
    DimensionCount: int
    Strides: tuple[int, ...]
    Dilations: tuple[int, ...]
    StartPadding: tuple[int, ...]
    EndPadding: tuple[int, ...]
    GroupCount: int

    OPERATOR_TYPE = OP.QUANTIZED_LINEAR_CONVOLUTION
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = _rules(
        {
            "InputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "InputScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "InputZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "FilterTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "FilterScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4), FL.FL_5_2: (1, 4)}),
            "FilterZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "BiasTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
            "OutputScaleTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "OutputZeroPointTensor": (True, {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4)}),
            "OutputTensor": (False, {FL.FL_2_1: (4, 4), FL.FL_4_0: (3, 4)}),
        },
        {
            "InputTensor": QUANTIZED,
            "InputScaleTensor": FLOAT32,
            "InputZeroPointTensor": QUANTIZED,
            "FilterTensor": QUANTIZED,
            "FilterScaleTensor": FLOAT32,
            "FilterZeroPointTensor": QUANTIZED,
            "BiasTensor": INT32,
            "OutputScaleTensor": FLOAT32,
            "OutputZeroPointTensor": QUANTIZED,
            "OutputTensor": QUANTIZED,
        },
    )
    SAME_TYPE = (
        ("OutputTensor", "OutputZeroPointTensor"),
        ("InputTensor", "InputZeroPointTensor"),
        ("FilterTensor", "FilterZeroPointTensor"),
    )

    def validate_shapes(self, feature_level: FL) -> None:
        if self.DimensionCount != 2:
            self.fail(f"{self.DimensionCount} is not supported (only 2 spatial dimensions)", "DimensionCount")
        for name in ("Strides", "Dilations", "StartPadding", "EndPadding"):
            values = getattr(self, name)
            if len(values) != self.DimensionCount:
                self.fail(f"has {len(values)} values, DimensionCount is {self.DimensionCount}", name)
            least = 0 if name.endswith("Padding") else 1
            if any(v < least for v in values):
                self.fail(f"{list(values)} must be at least {least}", name)
        dims = self.InputTensor.DimensionCount
        for field in ("FilterTensor", "BiasTensor", "OutputTensor"):
            tensor = getattr(self, field)
            if tensor is not None and tensor.DimensionCount != dims:
                self.fail(f"DimensionCount {tensor.DimensionCount} must equal InputTensor's {dims}", field)
        batch, channels, *in_spatial = self.sizes4("InputTensor")
        out_channels, filter_channels, *kernel = self.sizes4("FilterTensor")
        groups = self.GroupCount
        if groups < 1 or channels % groups or out_channels % groups:
            self.fail(f"{groups} must divide the {channels} input and {out_channels} output channels", "GroupCount")
        if filter_channels * groups != channels:
            self.fail(
                f"FilterChannelCount {filter_channels} must be input channels / GroupCount = {channels // groups}",
                "FilterTensor",
            )
        try:
            out_spatial = convolution_output_sizes(in_spatial, kernel, self.Strides, self.Dilations, self.StartPadding, self.EndPadding)
        except ValueError as exc:
            span, padded = exc.args
            self.fail(f"the dilated filter ({span}) is larger than the padded input ({padded})", "FilterTensor")
        expected = (batch, out_channels, *out_spatial)
        if self.sizes4("OutputTensor") != expected:
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be {list(expected)}", "OutputTensor")
        scalar = [(1, 1, 1, 1)]
        per_channel = scalar + [(1, out_channels, 1, 1)]
        for field in ("InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"):
            self.check_sizes(field, scalar, "{1,1,1,1} (per tensor)")
        for field in ("FilterScaleTensor", "FilterZeroPointTensor"):
            self.check_sizes(field, per_channel, f"{{1,1,1,1}} or {{1,{out_channels},1,1}} (per output channel)")
        self.check_sizes("BiasTensor", [(1, out_channels, 1, 1)], f"{{1,{out_channels},1,1}}")


_MATMUL_TENSORS = (
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
QUANTIZED_BINARY_INPUTS = _MATMUL_TENSORS[:-1]
_QUANTIZED_BINARY_TYPES = {
    field: (FLOAT32 if "Scale" in field else QUANTIZED) for field in _MATMUL_TENSORS
}
_QUANTIZED_BINARY_SAME_TYPE = (
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
    AZeroPointTensor: TensorDesc
    BTensor: TensorDesc
    BScaleTensor: TensorDesc
    BZeroPointTensor: TensorDesc
    OutputScaleTensor: TensorDesc
    OutputZeroPointTensor: TensorDesc
    OutputTensor: TensorDesc


@dataclasses.dataclass(frozen=True)
class DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC(QuantizedBinaryDesc):
    """QUANTIZED_LINEAR_MATRIX_MULTIPLY (ONNX QLinearMatMul), DML_FEATURE_LEVEL_2_1 and up."""

    OPERATOR_TYPE = OP.QUANTIZED_LINEAR_MATRIX_MULTIPLY
    INTRODUCED = FL.FL_2_1
    TENSOR_RULES = _rules(
        {
            field: (
                "ZeroPoint" in field,
                {FL.FL_2_1: (4, 4), FL.FL_4_0: (1, 4) if ("Scale" in field or "ZeroPoint" in field) else (2, 4)},
            )
            for field in _MATMUL_TENSORS
        },
        _QUANTIZED_BINARY_TYPES,
    )
    SAME_TYPE = _QUANTIZED_BINARY_SAME_TYPE

    def validate_shapes(self, feature_level: FL) -> None:
        batch, channels, m, k = self.sizes4("ATensor")
        b_batch, b_channels, b_k, n = self.sizes4("BTensor")
        if (b_batch, b_channels) != (batch, channels):
            self.fail(f"BatchCount and ChannelCount {[b_batch, b_channels]} must equal ATensor's {[batch, channels]}", "BTensor")
        if b_k != k:
            self.fail(f"Height {b_k} must equal ATensor's Width {k} (the inner dimension)", "BTensor")
        if self.sizes4("OutputTensor") != (batch, channels, m, n):
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be {[batch, channels, m, n]}", "OutputTensor")
        scalar = (1, 1, 1, 1)
        per_row = [scalar, (1, 1, m, 1)]
        for field in ("AScaleTensor", "AZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"):
            self.check_sizes(field, per_row, f"{{1,1,1,1}} or {{1,1,{m},1}} (per row)")
        for field in ("BScaleTensor", "BZeroPointTensor"):
            self.check_sizes(field, [scalar, (1, 1, 1, n)], f"{{1,1,1,1}} or {{1,1,1,{n}}} (per column)")


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC(QuantizedBinaryDesc):
    """ELEMENT_WISE_QUANTIZED_LINEAR_ADD (com.microsoft QLinearAdd), DML_FEATURE_LEVEL_4_0 and up."""

    OPERATOR_TYPE = OP.ELEMENT_WISE_QUANTIZED_LINEAR_ADD
    INTRODUCED = FL.FL_4_0
    TENSOR_RULES = _rules(
        {field: ("ZeroPoint" in field, {FL.FL_4_0: (1, 8)}) for field in _MATMUL_TENSORS},
        _QUANTIZED_BINARY_TYPES,
    )
    SAME_TYPE = _QUANTIZED_BINARY_SAME_TYPE

    def validate_shapes(self, feature_level: FL) -> None:
        tensors = self.tensors()
        for field, tensor in tensors.items():
            if tensor.DimensionCount != self.ATensor.DimensionCount:
                self.fail(f"DimensionCount {tensor.DimensionCount} must equal ATensor's {self.ATensor.DimensionCount}", field)
            if ("Scale" in field or "ZeroPoint" in field) and tensor.element_count != 1:
                self.fail(f"must hold exactly 1 element (sizes {list(tensor.Sizes)})", field)
        for field in ("ATensor", "BTensor"):
            if tensors[field].Sizes != self.OutputTensor.Sizes:
                self.fail(f"sizes {list(tensors[field].Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", field)


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_ADD1_OPERATOR_DESC(OperatorDesc):
    """ELEMENT_WISE_ADD1: ``FusedActivation(A + B)``, DML_FEATURE_LEVEL_2_0 and up."""

    ATensor: TensorDesc
    BTensor: TensorDesc
    OutputTensor: TensorDesc
    FusedActivation: Optional[ActivationDesc] = None

    OPERATOR_TYPE = OP.ELEMENT_WISE_ADD1
    INTRODUCED = FL.FL_2_0
    TENSOR_RULES = _rules(
        {f: (False, {FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}) for f in ("ATensor", "BTensor", "OutputTensor")},
        {"ATensor": FLOATS, "BTensor": FLOATS, "OutputTensor": FLOATS},
    )
    SAME_TYPE = (("ATensor", "BTensor", "OutputTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        for field in ("ATensor", "BTensor"):
            tensor = getattr(self, field)
            if tensor.Sizes != self.OutputTensor.Sizes:
                self.fail(f"sizes {list(tensor.Sizes)} must equal OutputTensor's {list(self.OutputTensor.Sizes)}", field)
        if self.FusedActivation is not None:
            if not isinstance(self.FusedActivation, FUSABLE_ACTIVATIONS):
                self.fail(f"{type(self.FusedActivation).__name__} cannot be fused", "FusedActivation")
            if not self.FusedActivation.fused:
                self.fail("a fused activation must have null InputTensor and OutputTensor", "FusedActivation")
            try:
                self.FusedActivation.validate(feature_level)
            except DescValidationError as exc:
                self.fail(str(exc), "FusedActivation")
