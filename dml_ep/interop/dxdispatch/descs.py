"""DirectML descs in DxDispatch's JSON spelling, both ways.

DxDispatch (microsoft/DirectML, ``DxDispatch/doc/Guide.md``) writes a DML_OPERATOR_DESC as
``{"type": "DML_OPERATOR_<NAME>", "desc": {<the struct's fields>}}``: DirectML's field names,
enum values by full name or by the suffix after their type's prefix (``"UINT8"``,
``"ACTIVATION_RELU"``), a fused activation inline (``{"Type": "ACTIVATION_ELU", "Alpha": 0.5}``),
and tensor descs whose fields DxDispatch fills in when left out (``Flags`` NONE,
``DimensionCount`` from ``Sizes``, packed ``Strides``, ``TotalTensorSizeInBytes`` computed).
Optional tensors that are null are left out. This differs from :meth:`OperatorDesc.to_dict`
(``inspect --json``), which keeps every field and nests ``Desc``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import cast

from ...core.enums import DML_OPERATOR_TYPE, DML_TENSOR_DATA_TYPE, DML_TENSOR_FLAGS, FieldEnum
from ...core.errors import DxDispatchError
from ...core.tensor_desc import DML_BUFFER_TENSOR_DESC, calc_buffer_tensor_size, packed_strides
from ...operators.activation import ActivationDesc
from ...operators.base import OperatorDesc, field_kind
from ...operators.registration import OPERATORS

# DirectML's enums a desc field holds, by the annotation that names one (the field's kind): written in full.
ENUM_FIELDS = {enum.__name__: enum for enum in FieldEnum.__subclasses__()}

# The desc class of each operator dml_ep models (the operator table's).
DESC_CLASSES = {op: entry.desc for op, entry in OPERATORS.items()}

MODELLED = ", ".join(str(t) for t, cls in DESC_CLASSES.items() if not issubclass(cls, ActivationDesc))


class NotModelled(DxDispatchError):
    """A DirectML operator that DxDispatch knows and dml_ep does not model."""


def output_fields(desc) -> tuple[str, ...]:
    """The desc fields a dispatch writes, in the node's output order: ``OutputTensor``, or a desc's
    own ``OUTPUT_FIELDS`` (DYNAMIC_QUANTIZE_LINEAR's scale and zero point are outputs too)."""
    return getattr(desc, "OUTPUT_FIELDS", ("OutputTensor",))


# --- to DxDispatch ---------------------------------------------------------------------------


def to_dict(desc: OperatorDesc) -> dict:
    """A dispatchable: ``{"type": "DML_OPERATOR_<NAME>", "desc": {...}}``."""
    return {"type": str(desc.OPERATOR_TYPE), "desc": _fields_to_dict(desc)}


def tensor_to_dict(tensor: DML_BUFFER_TENSOR_DESC) -> dict:
    """DataType, Sizes, Strides (when not packed), Flags and TotalTensorSizeInBytes."""
    out: dict[str, object] = {"DataType": tensor.DataType.name, "Sizes": list(tensor.Sizes)}
    if tensor.Strides is not None:
        out["Strides"] = list(tensor.Strides)
    out["Flags"] = _flags_name(tensor.Flags)
    out["TotalTensorSizeInBytes"] = tensor.TotalTensorSizeInBytes
    if tensor.GuaranteedBaseOffsetAlignment:
        out["GuaranteedBaseOffsetAlignment"] = tensor.GuaranteedBaseOffsetAlignment
    return out


def _flags_name(flags: DML_TENSOR_FLAGS) -> str:
    return "OWNED_BY_DML" if flags & DML_TENSOR_FLAGS.OWNED_BY_DML else "NONE"


def _fields_to_dict(desc: OperatorDesc) -> dict:
    out = {}
    for field in dataclasses.fields(desc):
        value = getattr(desc, field.name)
        if value is None:
            continue  # a null optional tensor, activation or scale-bias
        if isinstance(value, DML_BUFFER_TENSOR_DESC):
            value = tensor_to_dict(value)
        elif field_kind(field) == "TensorDescArray":
            value = [tensor_to_dict(each) for each in value]
        elif isinstance(value, OperatorDesc):  # a fused activation: its fields inline beside Type
            value = {"Type": value.OPERATOR_TYPE.name, **_fields_to_dict(value)}
        elif field_kind(field) == SCALE_BIAS:
            value = {"Scale": value[0], "Bias": value[1]}
        elif field_kind(field) in ENUM_FIELDS:
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[field.name] = json_number(value)
    return out


SCALE_BIAS = "Optional[tuple[float, float]]"  # a DML_SCALE_BIAS, written {"Scale": ..., "Bias": ...}
FLOAT_WORDS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}  # DxDispatch's strings for floats


def json_number(value):
    """Infinite and NaN floats as the strings DxDispatch reads ("inf", "-inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


# --- from DxDispatch -------------------------------------------------------------------------


def from_dict(dispatchable: dict) -> OperatorDesc:
    """The desc of a DirectML dispatchable (``type`` and ``desc``; ``Type``/``Desc`` accepted).

    Raises :class:`NotModelled` for an operator dml_ep does not model, and
    :class:`DxDispatchError` for a desc that is not well formed.
    """
    op_type = operator_type(_either(dispatchable, "type", "Type", "dispatchable"))
    desc = _either(dispatchable, "desc", "Desc", str(op_type))
    return _desc_from_dict(op_type, desc, str(op_type))


def operator_type(text) -> DML_OPERATOR_TYPE:
    """``DML_OPERATOR_X`` or ``X`` as dml_ep's enum member; NotModelled when dml_ep has no desc for it."""
    member = _member(DML_OPERATOR_TYPE, "DML_OPERATOR_", text)
    if member not in DESC_CLASSES:
        name = str(text).removeprefix("DML_OPERATOR_")
        raise NotModelled(f"DML_OPERATOR_{name} is not modelled by dml_ep (it models {MODELLED} and the activations)")
    return member


def _desc_from_dict(op_type: DML_OPERATOR_TYPE, data, where: str, fused: bool = False) -> OperatorDesc:
    if not isinstance(data, dict):
        raise DxDispatchError(f"{where}: the desc must be an object, not {type(data).__name__}")
    cls = DESC_CLASSES[op_type]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise DxDispatchError(f"{where}: {cls.__name__} has no field {unknown[0]!r} (fields: {', '.join(fields)})")
    values: dict[str, object] = {}
    for name, field in fields.items():
        at, kind = f"{where}.{name}", field_kind(field)
        if fused and kind.startswith("TensorDesc"):
            continue  # DxDispatch reads a fused activation's tensors as null, whatever is written
        if name not in data:
            if not _optional(cls, name, kind):
                raise DxDispatchError(f"{at}: missing")
            if field.default is dataclasses.MISSING:
                values[name] = None
            continue
        values[name] = _field_from_dict(kind, data[name], at)
    return cls(**values)


def _optional(cls, name: str, kind: str) -> bool:
    """Whether the field may be left out, as DxDispatch's parsers read it: a tensor DirectML lets be
    null (its support-table row), or an optional pointer (FusedActivation, ScaleBias). Numbers and
    arrays are required, an activation's parameters too."""
    if kind.startswith("TensorDesc"):
        return any(rule.field == name and rule.optional for rule in cls.TENSOR_RULES)
    return kind.startswith("Optional[")


def _field_from_dict(kind: str, value, where: str):
    if kind == "TensorDescArray":
        if not isinstance(value, list) or not value:
            raise DxDispatchError(f"{where}: expected a non-empty list of tensor descs")
        return tuple(tensor_from_dict(each, f"{where}[{index}]") for index, each in enumerate(value))
    if kind.startswith("TensorDesc"):
        return tensor_from_dict(value, where)
    if kind == "Optional[ActivationDesc]":
        return _activation_from_dict(value, where)
    if kind in ENUM_FIELDS:
        enum = ENUM_FIELDS[kind]
        member = _member(enum, f"{kind}_", value)
        if member is None:
            raise DxDispatchError(f"{where}: unknown {kind} {value!r} ({', '.join(enum.__members__)})")
        return member
    if kind == "int":
        return _integer(value, where)
    if kind.startswith("tuple[int"):
        return _integers(value, where)
    if kind == "SignedIntegers":  # an INT array (SLICE1's InputWindowStrides)
        return _integers(value, where, signed=True)
    if kind == "float":
        return _float(value, where)
    if kind == SCALE_BIAS:
        if not isinstance(value, dict) or set(value) != {"Scale", "Bias"}:
            raise DxDispatchError(f"{where}: expected {{\"Scale\": ..., \"Bias\": ...}}")
        return (_float(value["Scale"], f"{where}.Scale"), _float(value["Bias"], f"{where}.Bias"))
    raise DxDispatchError(f"{where}: fields of type {kind} are not read")  # not reached by dml_ep's descs


def _activation_from_dict(value, where: str) -> ActivationDesc:
    """``{"Type": "ACTIVATION_X", <fields>}`` or ``{"Type": ..., "Desc": {<fields>}}``."""
    if not isinstance(value, dict) or "Type" not in value:
        raise DxDispatchError(f"{where}: expected an object with a Type")
    op_type = operator_type(value["Type"])
    cls = DESC_CLASSES[op_type]
    if not issubclass(cls, ActivationDesc):
        raise DxDispatchError(f"{where}: {op_type} is not an activation")
    fields = value["Desc"] if set(value) == {"Type", "Desc"} else {k: v for k, v in value.items() if k != "Type"}
    return cast(ActivationDesc, _desc_from_dict(op_type, fields, where, fused=True))  # an activation's class: checked above


def tensor_from_dict(value, where: str) -> DML_BUFFER_TENSOR_DESC:
    """A buffer tensor desc, DxDispatch's defaults filled in; ``{"Type": "BUFFER", "Desc": {...}}`` too."""
    if isinstance(value, dict) and "Desc" in value:
        if str(value.get("Type", "BUFFER")).removeprefix("DML_TENSOR_TYPE_") != "BUFFER":
            raise DxDispatchError(f"{where}: only DML_TENSOR_TYPE_BUFFER tensors exist")
        value = value["Desc"]
    if not isinstance(value, dict):
        raise DxDispatchError(f"{where}: expected a tensor desc object, not {value!r}")
    known = {"DataType", "Flags", "DimensionCount", "Sizes", "Strides", "TotalTensorSizeInBytes", "GuaranteedBaseOffsetAlignment"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise DxDispatchError(f"{where}: a tensor desc has no field {unknown[0]!r}")
    if "DataType" not in value or "Sizes" not in value:
        raise DxDispatchError(f"{where}: a tensor desc needs DataType and Sizes")
    data_type = data_type_of(value["DataType"], f"{where}.DataType")
    sizes = _integers(value["Sizes"], f"{where}.Sizes")
    strides = None if value.get("Strides") is None else _integers(value["Strides"], f"{where}.Strides")
    count = _integer(value.get("DimensionCount", len(sizes)), f"{where}.DimensionCount")
    if count != len(sizes) or (strides is not None and len(strides) != count):
        raise DxDispatchError(f"{where}: DimensionCount {count}, {len(sizes)} sizes and "
                              f"{'no' if strides is None else len(strides)} strides do not agree")
    least = calc_buffer_tensor_size(data_type, sizes, strides)
    total = _integer(value.get("TotalTensorSizeInBytes", least), f"{where}.TotalTensorSizeInBytes")
    if total < least:
        raise DxDispatchError(f"{where}: TotalTensorSizeInBytes {total} is less than the {least} bytes the sizes and strides span")
    return DML_BUFFER_TENSOR_DESC(
        DataType=data_type,
        Flags=_flags(value.get("Flags", "NONE"), f"{where}.Flags"),
        DimensionCount=count,
        Sizes=sizes,
        Strides=None if strides == packed_strides(sizes) else strides,
        TotalTensorSizeInBytes=total,
        GuaranteedBaseOffsetAlignment=_integer(value.get("GuaranteedBaseOffsetAlignment", 0), f"{where}.GuaranteedBaseOffsetAlignment"),
    )


def data_type_of(text, where: str) -> DML_TENSOR_DATA_TYPE:
    """``DML_TENSOR_DATA_TYPE_X`` or ``X``."""
    member = _member(DML_TENSOR_DATA_TYPE, "DML_TENSOR_DATA_TYPE_", text)
    if member is None:
        raise DxDispatchError(f"{where}: unknown data type {text!r}")
    return member


def _flags(value, where: str) -> DML_TENSOR_FLAGS:
    """One flag name, or a list of them (full or short spelling)."""
    flags = DML_TENSOR_FLAGS.NONE
    for name in value if isinstance(value, list) else [value]:
        member = _member(DML_TENSOR_FLAGS, "DML_TENSOR_FLAG_", name)
        if member is None:
            raise DxDispatchError(f"{where}: unknown tensor flag {name!r} (NONE, OWNED_BY_DML)")
        flags |= member
    return flags


def _member(enum, prefix: str, text):
    """The member named ``text``, written in full (``prefix`` + name) or by its name alone, as
    DxDispatch reads every enum; None when there is none."""
    return enum.__members__.get(str(text).removeprefix(prefix))


def _integer(value, where: str, signed: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (value < 0 and not signed):
        raise DxDispatchError(f"{where}: expected a {'' if signed else 'non-negative '}integer, not {value!r}")
    return value


def _integers(value, where: str, signed: bool = False) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise DxDispatchError(f"{where}: expected a list of integers, not {value!r}")
    return tuple(_integer(v, f"{where}[{i}]", signed) for i, v in enumerate(value))


def _float(value, where: str) -> float:
    if isinstance(value, str) and value in FLOAT_WORDS:
        return FLOAT_WORDS[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DxDispatchError(f"{where}: expected a number, not {value!r}")
    return float(value)


def _either(data: dict, key: str, other: str, where: str):
    if not isinstance(data, dict) or (key not in data and other not in data):
        raise DxDispatchError(f"{where}: missing {key!r}")
    return data[key] if key in data else data[other]
