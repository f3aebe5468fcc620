"""Operator desc validation: one test per rule of the tables in DML_OPERATORS.md, per operator.

Each case starts from a desc that is valid by the documentation and changes one thing; a broken
rule must raise DescValidationError whose message names the operator and the tensor (or field).
"""

import dataclasses

import pytest

from dml_ep.core.enums import DML_FEATURE_LEVEL as FL
from dml_ep.core.enums import DML_OPERATOR_TYPE as OP
from dml_ep.core.enums import DML_TENSOR_DATA_TYPE as DT
from dml_ep.core.errors import DmlEpError, DescValidationError, FeatureLevelError
from dml_ep.core.tensor_desc import DML_BUFFER_TENSOR_DESC
from dml_ep.operators.activation import (DML_ACTIVATION_CELU_OPERATOR_DESC, DML_ACTIVATION_RELU_OPERATOR_DESC, DML_ACTIVATION_SHRINK_OPERATOR_DESC,
    DML_ELEMENT_WISE_CLIP_OPERATOR_DESC, FUSABLE_ACTIVATIONS)
from dml_ep.operators.element_wise_add1 import DML_ELEMENT_WISE_ADD1_OPERATOR_DESC
from dml_ep.operators.element_wise_quantized_linear_add import DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC
from dml_ep.operators.quantized_linear_convolution import DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC
from dml_ep.operators.quantized_linear_matrix_multiply import DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC

U8, I8, I32, F32, F16 = DT.UINT8, DT.INT8, DT.INT32, DT.FLOAT32, DT.FLOAT16
SCALAR4 = (1, 1, 1, 1)


def t(data_type, sizes, strides=None):
    return DML_BUFFER_TENSOR_DESC.create(data_type, sizes, strides)


def rejects(desc, level, field, *words):
    """validate() fails at ``level`` with a message naming the operator, ``field`` and ``words``."""
    with pytest.raises(DescValidationError) as info:
        desc.validate(level)
    message = str(info.value)
    for word in (str(desc.OPERATOR_TYPE), field, *words):
        assert word in message, message


# ---------------------------------------------------------------------------------------------
# Enums


def test_feature_level_and_operator_values_match_directml_h():
    assert {level.label: level.value for level in FL} == {
        "1_0": 0x1000, "2_0": 0x2000, "2_1": 0x2100, "3_0": 0x3000, "3_1": 0x3100, "4_0": 0x4000,
        "4_1": 0x4100, "5_0": 0x5000, "5_1": 0x5100, "5_2": 0x5200, "6_0": 0x6000, "6_1": 0x6100,
        "6_2": 0x6200, "6_3": 0x6300, "6_4": 0x6400,
    }  # fmt: skip
    expected = {
        "ELEMENT_WISE_IDENTITY": 1, "ELEMENT_WISE_ADD": 4, "ELEMENT_WISE_CLIP": 8,
        "ELEMENT_WISE_QUANTIZE_LINEAR": 33, "ELEMENT_WISE_DEQUANTIZE_LINEAR": 34, "ACTIVATION_ELU": 35,
        "ACTIVATION_HARD_SIGMOID": 37, "ACTIVATION_IDENTITY": 38, "ACTIVATION_LEAKY_RELU": 39,
        "ACTIVATION_LINEAR": 40, "ACTIVATION_PARAMETRIC_SOFTPLUS": 43, "ACTIVATION_RELU": 44,
        "ACTIVATION_SCALED_ELU": 45, "ACTIVATION_SCALED_TANH": 46, "ACTIVATION_SIGMOID": 47,
        "ACTIVATION_SOFTPLUS": 49, "ACTIVATION_SOFTSIGN": 50, "ACTIVATION_TANH": 51,
        "ACTIVATION_THRESHOLDED_RELU": 52, "CONVOLUTION": 53, "GEMM": 54, "ELEMENT_WISE_ADD1": 89,
        "ACTIVATION_SHRINK": 90, "QUANTIZED_LINEAR_MATRIX_MULTIPLY": 118, "QUANTIZED_LINEAR_CONVOLUTION": 120,
        "ACTIVATION_CELU": 128, "ELEMENT_WISE_QUANTIZED_LINEAR_ADD": 147,
    }  # fmt: skip
    assert {name: OP[name].value for name in expected} == expected
    assert str(FL.FL_5_2) == "DML_FEATURE_LEVEL_5_2"
    assert str(OP.ELEMENT_WISE_ADD1) == "DML_OPERATOR_ELEMENT_WISE_ADD1"


@pytest.mark.parametrize(
    "spelling", ["4_0", "4.0", "FL_4_0", "fl4_0", "DML_FEATURE_LEVEL_4_0", " dml_feature_level_4_0 ", 0x4000, FL.FL_4_0]
)
def test_feature_level_parse_spellings(spelling):
    assert FL.parse(spelling) is FL.FL_4_0


@pytest.mark.parametrize("spelling", ["4_5", "7_0", "4", "", "latest", 0x4500, 4])
def test_feature_level_parse_unknown(spelling):
    with pytest.raises(FeatureLevelError, match="unknown DirectML feature level"):
        FL.parse(spelling)
    assert issubclass(FeatureLevelError, DmlEpError)


# ---------------------------------------------------------------------------------------------
# DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC


def conv(**changes):
    """Valid: uint8 1x4x5x5 input, 6 int8 filters of 2x3x3 (GroupCount 2), padding 1 -> 1x6x5x5."""
    desc = DML_QUANTIZED_LINEAR_CONVOLUTION_OPERATOR_DESC(
        InputTensor=t(U8, (1, 4, 5, 5)),
        InputScaleTensor=t(F32, SCALAR4),
        InputZeroPointTensor=t(U8, SCALAR4),
        FilterTensor=t(I8, (6, 2, 3, 3)),
        FilterScaleTensor=t(F32, (1, 6, 1, 1)),
        FilterZeroPointTensor=t(I8, SCALAR4),
        BiasTensor=t(I32, (1, 6, 1, 1)),
        OutputScaleTensor=t(F32, SCALAR4),
        OutputZeroPointTensor=t(U8, SCALAR4),
        OutputTensor=t(U8, (1, 6, 5, 5)),
        DimensionCount=2,
        Strides=(1, 1),
        Dilations=(1, 1),
        StartPadding=(1, 1),
        EndPadding=(1, 1),
        GroupCount=2,
    )
    return dataclasses.replace(desc, **changes)


def conv3d_tensors():
    """Valid at FL 4_0 with 3-D tensors (read as {1,C,H,W}): 2x5x5 input, one 2x3x3 filter -> 1x5x5."""
    return conv(
        InputTensor=t(U8, (2, 5, 5)),
        FilterTensor=t(I8, (2, 3, 3)),
        FilterScaleTensor=t(F32, (1, 1, 1)),
        BiasTensor=t(I32, (1, 1, 1)),
        OutputTensor=t(U8, (1, 5, 5)),
        GroupCount=1,
    )


@pytest.mark.parametrize("level", ["2_1", "4_0", "5_2", "6_4"])
def test_conv_valid(level):
    conv().validate(level)


def test_conv_introduced_in_2_1():
    rejects(conv(), "2_0", "", "requires DML_FEATURE_LEVEL_2_1")


# (field, replacement, {feature level: accepted?})
CONV_DIMS = [
    ("InputScaleTensor", t(F32, (1,)), {"2_1": False, "4_0": True}),
    ("InputZeroPointTensor", t(U8, (1,)), {"2_1": False, "4_0": True}),
    ("FilterScaleTensor", t(F32, (1,)), {"2_1": False, "4_0": False, "5_1": False, "5_2": True}),
    ("FilterScaleTensor", t(F32, (6, 1, 1)), {"2_1": False, "4_0": True}),
    ("FilterScaleTensor", t(F32, (1, 1)), {"4_0": False, "5_2": True}),
    ("FilterZeroPointTensor", t(I8, (1,)), {"2_1": False, "4_0": True}),
    ("OutputScaleTensor", t(F32, (1,)), {"2_1": False, "4_0": True}),
    ("OutputZeroPointTensor", t(U8, (1, 1)), {"2_1": False, "4_0": True}),
    ("InputScaleTensor", t(F32, (1, 1, 1, 1, 1)), {"6_4": False}),
    ("BiasTensor", t(I32, (6,)), {"4_0": False, "6_4": False}),
    ("InputTensor", t(U8, (4, 25)), {"4_0": False}),
    ("FilterTensor", t(I8, (6, 18)), {"4_0": False}),
    ("OutputTensor", t(U8, (1, 1, 6, 5, 5)), {"6_4": False}),
]


@pytest.mark.parametrize(
    "field, tensor, level, accepted",
    [(f, tensor, level, ok) for f, tensor, levels in CONV_DIMS for level, ok in levels.items()],
)
def test_conv_dimension_counts_per_feature_level(field, tensor, level, accepted):
    desc = conv(**{field: tensor})
    if accepted:
        desc.validate(level)
    else:
        rejects(desc, level, field, f"DimensionCount {tensor.DimensionCount} is not supported at DML_FEATURE_LEVEL_{level}")


def test_conv_3d_tensors_from_4_0():
    conv3d_tensors().validate("4_0")
    rejects(conv3d_tensors(), "2_1", "InputTensor", "DimensionCount 3", "allowed: 4")


@pytest.mark.parametrize(
    "field, data_type",
    [
        ("InputTensor", F32), ("InputTensor", I32), ("InputScaleTensor", F16), ("InputScaleTensor", U8),
        ("InputZeroPointTensor", I32), ("FilterTensor", F32), ("FilterScaleTensor", F16),
        ("FilterZeroPointTensor", F32), ("BiasTensor", F32), ("BiasTensor", I8), ("OutputScaleTensor", I32),
        ("OutputZeroPointTensor", I32), ("OutputTensor", I32),
    ],
)  # fmt: skip
def test_conv_data_types(field, data_type):
    tensor = getattr(conv(), field)
    rejects(conv(**{field: t(data_type, tensor.Sizes)}), "6_4", field, f"DataType {data_type.name} is not supported")


def test_conv_int8_input_and_uint8_filter_are_valid():
    conv(
        InputTensor=t(I8, (1, 4, 5, 5)), InputZeroPointTensor=t(I8, SCALAR4),
        FilterTensor=t(U8, (6, 2, 3, 3)), FilterZeroPointTensor=t(U8, SCALAR4),
        OutputTensor=t(I8, (1, 6, 5, 5)), OutputZeroPointTensor=t(I8, SCALAR4),
    ).validate()  # fmt: skip


@pytest.mark.parametrize("field", ["InputZeroPointTensor", "FilterZeroPointTensor", "BiasTensor", "OutputZeroPointTensor"])
def test_conv_optional_tensors(field):
    conv(**{field: None}).validate("2_1")


@pytest.mark.parametrize(
    "field", ["InputTensor", "InputScaleTensor", "FilterTensor", "FilterScaleTensor", "OutputScaleTensor", "OutputTensor"]
)
def test_conv_required_tensors(field):
    rejects(conv(**{field: None}), "6_4", field, "required tensor is missing")


@pytest.mark.parametrize(
    "field, data_type, partner",
    [("InputZeroPointTensor", I8, "InputTensor"), ("FilterZeroPointTensor", U8, "FilterTensor"), ("OutputZeroPointTensor", I8, "OutputTensor")],
)
def test_conv_zero_point_shares_data_type(field, data_type, partner):
    rejects(conv(**{field: t(data_type, SCALAR4)}), "6_4", field, f"must equal {partner}'s")


@pytest.mark.parametrize("field", ["FilterScaleTensor", "FilterZeroPointTensor"])
def test_conv_filter_quantization_per_tensor_or_per_output_channel(field):
    data_type = getattr(conv(), field).DataType
    conv(**{field: t(data_type, SCALAR4)}).validate()
    conv(**{field: t(data_type, (1, 6, 1, 1))}).validate()
    for sizes in [(1, 3, 1, 1), (6, 1, 1, 1), (1, 1, 1, 6)]:
        rejects(conv(**{field: t(data_type, sizes)}), "6_4", field, "{1,1,1,1} or {1,6,1,1}")


@pytest.mark.parametrize("field", ["InputScaleTensor", "InputZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"])
def test_conv_input_and_output_quantization_per_tensor_only(field):
    data_type = getattr(conv(), field).DataType
    rejects(conv(**{field: t(data_type, (1, 6, 1, 1))}), "6_4", field, "{1,1,1,1} (per tensor)")


@pytest.mark.parametrize("sizes", [(1, 1, 1, 1), (1, 3, 1, 1), (6, 1, 1, 1)])
def test_conv_bias_is_one_per_output_channel(sizes):
    rejects(conv(BiasTensor=t(I32, sizes)), "6_4", "BiasTensor", "{1,6,1,1}")


@pytest.mark.parametrize(
    "changes, output",
    [
        ({}, (1, 6, 5, 5)),  # (5 + 1 + 1 - 3) / 1 + 1
        ({"Strides": (2, 2)}, (1, 6, 3, 3)),  # (5 + 2 - 3) // 2 + 1
        ({"Dilations": (2, 2)}, (1, 6, 3, 3)),  # dilated span 5: (7 - 5) + 1
        ({"StartPadding": (0, 0), "EndPadding": (0, 2)}, (1, 6, 3, 5)),  # H: 5 - 3 + 1, W: 7 - 3 + 1
    ],
)
def test_conv_output_sizes(changes, output):
    conv(OutputTensor=t(U8, output), **changes).validate()
    wrong = output[:3] + (output[3] + 1,)
    rejects(conv(OutputTensor=t(U8, wrong), **changes), "6_4", "OutputTensor", f"must be {list(output)}")


def test_conv_filter_larger_than_padded_input():
    rejects(conv(Dilations=(4, 4)), "6_4", "FilterTensor", "larger than the padded input")


@pytest.mark.parametrize("groups", [0, 3, 4])  # 4 input channels / 6 output channels: 3 and 4 do not divide both
def test_conv_group_count_divides_channels(groups):
    rejects(conv(GroupCount=groups), "6_4", "GroupCount", "must divide")


def test_conv_filter_channels_are_input_channels_over_groups():
    rejects(conv(GroupCount=1), "6_4", "FilterTensor", "FilterChannelCount 2 must be input channels / GroupCount = 4")


def test_conv_depthwise():
    """GroupCount == input channels: one 1-channel filter per channel."""
    conv(
        FilterTensor=t(I8, (4, 1, 3, 3)),
        FilterScaleTensor=t(F32, (1, 4, 1, 1)),
        BiasTensor=t(I32, (1, 4, 1, 1)),
        OutputTensor=t(U8, (1, 4, 5, 5)),
        GroupCount=4,
    ).validate()


@pytest.mark.parametrize("count", [1, 3])
def test_conv_dimension_count_must_be_2(count):
    n = (1,) * count
    rejects(conv(DimensionCount=count, Strides=n, Dilations=n, StartPadding=(0,) * count, EndPadding=(0,) * count),
            "6_4", "DimensionCount", "only 2")  # fmt: skip


@pytest.mark.parametrize(
    "field, value",
    [("Strides", (1,)), ("Dilations", (1, 1, 1)), ("StartPadding", (1,)), ("Strides", (0, 1)), ("Dilations", (1, 0)), ("EndPadding", (-1, 0))],
)
def test_conv_window_parameters(field, value):
    rejects(conv(**{field: value}), "6_4", field)



@pytest.mark.parametrize("field, value", [("Strides", (2**32, 1)), ("EndPadding", (0, 2**40)), ("GroupCount", 2**32)])
def test_uint_fields_hold_32_bits(field, value):
    """DirectML's UINT fields (a DxDispatch model may hold any JSON integer)."""
    rejects(conv(**{field: value}), "6_4", field, "UINT", "4294967295")

def test_conv_tensors_share_dimension_count():
    """Bias, Filter, Input and Output have the same DimensionCount (each alone is allowed at 4_0)."""
    rejects(conv(OutputTensor=t(U8, (6, 5, 5))), "4_0", "OutputTensor", "DimensionCount 3 must equal InputTensor's 4")
    rejects(conv(BiasTensor=t(I32, (6, 1, 1))), "4_0", "BiasTensor", "DimensionCount 3 must equal InputTensor's 4")
    filter4d = dataclasses.replace(conv3d_tensors(), FilterTensor=t(I8, (1, 2, 3, 3)))
    rejects(filter4d, "4_0", "FilterTensor", "DimensionCount 4 must equal InputTensor's 3")


# ---------------------------------------------------------------------------------------------
# DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC


def matmul(**changes):
    """Valid: uint8 A {1,1,2,3} x int8 B {1,1,3,4} -> uint8 {1,1,2,4}, per-tensor quantization."""
    desc = DML_QUANTIZED_LINEAR_MATRIX_MULTIPLY_OPERATOR_DESC(
        ATensor=t(U8, (1, 1, 2, 3)),
        AScaleTensor=t(F32, SCALAR4),
        AZeroPointTensor=t(U8, SCALAR4),
        BTensor=t(I8, (1, 1, 3, 4)),
        BScaleTensor=t(F32, SCALAR4),
        BZeroPointTensor=t(I8, SCALAR4),
        OutputScaleTensor=t(F32, SCALAR4),
        OutputZeroPointTensor=t(U8, SCALAR4),
        OutputTensor=t(U8, (1, 1, 2, 4)),
    )
    return dataclasses.replace(desc, **changes)


def matmul2d():
    """The same product with 2-D A, B and Output and 1-D scales and zero points (FL 4_0 and up)."""
    return matmul(
        ATensor=t(U8, (2, 3)), BTensor=t(I8, (3, 4)), OutputTensor=t(U8, (2, 4)),
        **{f: t(getattr(matmul(), f).DataType, (1,)) for f in ("AScaleTensor", "AZeroPointTensor", "BScaleTensor",
                                                               "BZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor")},
    )  # fmt: skip


def test_matmul_valid_and_introduced_in_2_1():
    matmul().validate("2_1")
    matmul().validate("6_4")
    rejects(matmul(), "2_0", "", "requires DML_FEATURE_LEVEL_2_1")


def test_matmul_dimension_counts_per_feature_level():
    matmul2d().validate("4_0")
    rejects(matmul2d(), "2_1", "ATensor", "DimensionCount 2 is not supported at DML_FEATURE_LEVEL_2_1")
    rejects(matmul(AScaleTensor=t(F32, (1,))), "2_1", "AScaleTensor", "DimensionCount 1", "allowed: 4")
    matmul(AScaleTensor=t(F32, (1,))).validate("4_0")
    rejects(matmul(ATensor=t(U8, (6,))), "4_0", "ATensor", "DimensionCount 1", "allowed: 2 to 4")
    rejects(matmul(BTensor=t(I8, (1, 1, 1, 3, 4))), "6_4", "BTensor", "DimensionCount 5")
    rejects(matmul(OutputTensor=t(U8, (8,))), "6_4", "OutputTensor", "DimensionCount 1")
    rejects(matmul(BZeroPointTensor=t(I8, (1, 1, 1, 1, 1))), "6_4", "BZeroPointTensor", "DimensionCount 5")


@pytest.mark.parametrize(
    "field, data_type",
    [("ATensor", F32), ("AScaleTensor", F16), ("AZeroPointTensor", I32), ("BTensor", I32), ("BScaleTensor", U8),
     ("BZeroPointTensor", F32), ("OutputScaleTensor", I8), ("OutputZeroPointTensor", I32), ("OutputTensor", F32)],
)  # fmt: skip
def test_matmul_data_types(field, data_type):
    tensor = getattr(matmul(), field)
    rejects(matmul(**{field: t(data_type, tensor.Sizes)}), "6_4", field, f"DataType {data_type.name} is not supported")


@pytest.mark.parametrize("field", ["AZeroPointTensor", "BZeroPointTensor", "OutputZeroPointTensor"])
def test_matmul_optional_zero_points(field):
    matmul(**{field: None}).validate("2_1")


@pytest.mark.parametrize("field", ["ATensor", "AScaleTensor", "BTensor", "BScaleTensor", "OutputScaleTensor", "OutputTensor"])
def test_matmul_required_tensors(field):
    rejects(matmul(**{field: None}), "6_4", field, "required tensor is missing")


@pytest.mark.parametrize(
    "field, data_type, partner",
    [("AZeroPointTensor", I8, "ATensor"), ("BZeroPointTensor", U8, "BTensor"), ("OutputZeroPointTensor", I8, "OutputTensor")],
)
def test_matmul_zero_point_shares_data_type(field, data_type, partner):
    rejects(matmul(**{field: t(data_type, SCALAR4)}), "6_4", field, f"must equal {partner}'s")


@pytest.mark.parametrize(
    "field, good, bad",
    [
        ("AScaleTensor", (1, 1, 2, 1), (1, 1, 1, 3)),  # per row of A (M = 2), never per column
        ("AZeroPointTensor", (1, 1, 2, 1), (1, 1, 1, 3)),
        ("BScaleTensor", (1, 1, 1, 4), (1, 1, 3, 1)),  # per column of B (N = 4), never per row
        ("BZeroPointTensor", (1, 1, 1, 4), (1, 1, 3, 1)),
        ("OutputScaleTensor", (1, 1, 2, 1), (1, 1, 1, 4)),  # per row of the output
        ("OutputZeroPointTensor", (1, 1, 2, 1), (1, 1, 1, 4)),
    ],
)
def test_matmul_quantization_shapes(field, good, bad):
    data_type = getattr(matmul(), field).DataType
    matmul(**{field: t(data_type, good)}).validate()
    rejects(matmul(**{field: t(data_type, bad)}), "6_4", field, f"{{1,1,1,1}} or {{{','.join(map(str, good))}}}")


def test_matmul_shapes():
    rejects(matmul(BTensor=t(I8, (1, 1, 4, 4))), "6_4", "BTensor", "must equal ATensor's Width 3")
    rejects(matmul(BTensor=t(I8, (2, 1, 3, 4))), "6_4", "BTensor", "BatchCount and ChannelCount")
    rejects(matmul(OutputTensor=t(U8, (1, 1, 4, 2))), "6_4", "OutputTensor", "must be [1, 1, 2, 4]")
    matmul(ATensor=t(U8, (2, 3, 2, 3)), BTensor=t(I8, (2, 3, 3, 4)), OutputTensor=t(U8, (2, 3, 2, 4))).validate("2_1")


# ---------------------------------------------------------------------------------------------
# DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC


def qadd(**changes):
    """Valid: uint8 {1,1,2,2} + uint8 {1,1,2,2}, every scale and zero point {1,1,1,1}."""
    desc = DML_ELEMENT_WISE_QUANTIZED_LINEAR_ADD_OPERATOR_DESC(
        ATensor=t(U8, (1, 1, 2, 2)),
        AScaleTensor=t(F32, SCALAR4),
        AZeroPointTensor=t(U8, SCALAR4),
        BTensor=t(U8, (1, 1, 2, 2)),
        BScaleTensor=t(F32, SCALAR4),
        BZeroPointTensor=t(U8, SCALAR4),
        OutputScaleTensor=t(F32, SCALAR4),
        OutputZeroPointTensor=t(U8, SCALAR4),
        OutputTensor=t(U8, (1, 1, 2, 2)),
    )
    return dataclasses.replace(desc, **changes)


def qadd_with_rank(rank):
    desc = qadd()
    return qadd(**{f: t(v.DataType, (1,) * (rank - 1) + (v.Sizes[-1],)) for f, v in desc.tensors().items()})


def test_qadd_valid_and_introduced_in_4_0():
    qadd().validate("4_0")
    rejects(qadd(), "3_1", "", "requires DML_FEATURE_LEVEL_4_0")


def test_qadd_dimension_counts_1_to_8():
    qadd_with_rank(1).validate("4_0")
    qadd_with_rank(8).validate("4_0")
    rejects(qadd_with_rank(9), "6_4", "ATensor", "DimensionCount 9", "allowed: 1 to 8")


@pytest.mark.parametrize(
    "field, data_type",
    [("ATensor", F32), ("AScaleTensor", F16), ("AZeroPointTensor", I32), ("BTensor", I32), ("BScaleTensor", U8),
     ("BZeroPointTensor", F32), ("OutputScaleTensor", I8), ("OutputZeroPointTensor", I32), ("OutputTensor", F16)],
)  # fmt: skip
def test_qadd_data_types(field, data_type):
    rejects(qadd(**{field: t(data_type, getattr(qadd(), field).Sizes)}), "6_4", field, f"DataType {data_type.name}")


@pytest.mark.parametrize("field", ["AZeroPointTensor", "BZeroPointTensor", "OutputZeroPointTensor"])
def test_qadd_optional_zero_points(field):
    qadd(**{field: None}).validate("4_0")


@pytest.mark.parametrize("field", ["ATensor", "AScaleTensor", "BTensor", "BScaleTensor", "OutputScaleTensor", "OutputTensor"])
def test_qadd_required_tensors(field):
    rejects(qadd(**{field: None}), "6_4", field, "required tensor is missing")


@pytest.mark.parametrize(
    "field, data_type, partner",
    [("AZeroPointTensor", I8, "ATensor"), ("BZeroPointTensor", I8, "BTensor"), ("OutputZeroPointTensor", I8, "OutputTensor")],
)
def test_qadd_zero_point_shares_data_type(field, data_type, partner):
    rejects(qadd(**{field: t(data_type, SCALAR4)}), "6_4", field, f"must equal {partner}'s")


def test_qadd_a_and_b_types_may_differ():
    qadd(BTensor=t(I8, (1, 1, 2, 2)), BZeroPointTensor=t(I8, SCALAR4)).validate()


@pytest.mark.parametrize(
    "field", ["AScaleTensor", "AZeroPointTensor", "BScaleTensor", "BZeroPointTensor", "OutputScaleTensor", "OutputZeroPointTensor"]
)
def test_qadd_scales_and_zero_points_hold_one_element(field):
    data_type = getattr(qadd(), field).DataType
    rejects(qadd(**{field: t(data_type, (1, 1, 1, 2))}), "6_4", field, "exactly 1 element")


@pytest.mark.parametrize("field", ["AScaleTensor", "BZeroPointTensor", "BTensor", "OutputTensor"])
def test_qadd_all_tensors_share_dimension_count(field):
    tensor = getattr(qadd(), field)
    rejects(qadd(**{field: t(tensor.DataType, tensor.Sizes[1:])}), "6_4", field, "DimensionCount 3 must equal ATensor's 4")


def test_qadd_sizes_equal_broadcasting_by_strides():
    rejects(qadd(BTensor=t(U8, (1, 1, 1, 2))), "6_4", "BTensor", "must equal OutputTensor's [1, 1, 2, 2]")
    qadd(BTensor=t(U8, (1, 1, 2, 2), (0, 0, 0, 1))).validate()


# ---------------------------------------------------------------------------------------------
# DML_ELEMENT_WISE_ADD1_OPERATOR_DESC


def add1(sizes=(1, 1, 2, 3), data_type=F32, **changes):
    """Valid: A + B with equal sizes, no fused activation."""
    desc = DML_ELEMENT_WISE_ADD1_OPERATOR_DESC(
        ATensor=t(data_type, sizes), BTensor=t(data_type, sizes), OutputTensor=t(data_type, sizes)
    )
    return dataclasses.replace(desc, **changes)


def test_add1_introduced_in_2_0():
    add1().validate("2_0")
    rejects(add1(), "1_0", "", "requires DML_FEATURE_LEVEL_2_0")


@pytest.mark.parametrize(
    "rank, level, accepted",
    [(4, "2_0", True), (5, "2_1", True), (3, "2_1", False), (6, "2_0", False), (1, "3_0", True), (8, "3_0", True), (9, "6_4", False)],
)
def test_add1_dimension_counts_per_feature_level(rank, level, accepted):
    desc = add1((1,) * (rank - 1) + (3,))
    if accepted:
        desc.validate(level)
    else:
        rejects(desc, level, "ATensor", f"DimensionCount {rank} is not supported at DML_FEATURE_LEVEL_{level}")


@pytest.mark.parametrize("data_type", [U8, I8, I32, DT.FLOAT64])
def test_add1_data_types_float_only(data_type):
    rejects(add1(data_type=data_type), "6_4", "ATensor", f"DataType {data_type.name} is not supported")


def test_add1_float16_and_same_data_type():
    add1(data_type=F16).validate()
    rejects(add1(OutputTensor=t(F16, (1, 1, 2, 3))), "6_4", "OutputTensor", "must equal ATensor's FLOAT32")


@pytest.mark.parametrize("field", ["ATensor", "BTensor", "OutputTensor"])
def test_add1_required_tensors(field):
    rejects(add1(**{field: None}), "6_4", field, "required tensor is missing")


def test_add1_equal_sizes_broadcasting_by_strides():
    rejects(add1(BTensor=t(F32, (1, 1, 1, 3))), "6_4", "BTensor", "must equal OutputTensor's [1, 1, 2, 3]")
    add1(BTensor=t(F32, (1, 1, 2, 3), (0, 0, 0, 1))).validate()


@pytest.mark.parametrize("activation", FUSABLE_ACTIVATIONS, ids=lambda cls: cls.__name__)
def test_add1_fuses_every_fusable_activation(activation):
    add1(FusedActivation=activation()).validate("6_4")


def test_add1_fused_activation_must_be_fusable():
    rejects(add1(FusedActivation=add1()), "6_4", "FusedActivation", "cannot be fused")


def test_add1_fused_activation_has_null_tensors():
    relu = DML_ACTIVATION_RELU_OPERATOR_DESC(InputTensor=t(F32, (1, 1, 2, 3)), OutputTensor=t(F32, (1, 1, 2, 3)))
    relu.validate()  # valid on its own, not as a fused activation
    rejects(add1(FusedActivation=relu), "6_4", "FusedActivation", "null InputTensor and OutputTensor")
    half = DML_ACTIVATION_RELU_OPERATOR_DESC(OutputTensor=t(F32, (1, 1, 2, 3)))
    rejects(add1(FusedActivation=half), "6_4", "FusedActivation", "null InputTensor and OutputTensor")


def test_add1_fused_clip_from_6_0():
    clip = DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(Min=0.0, Max=6.0)
    add1(FusedActivation=clip).validate("6_0")
    rejects(add1(FusedActivation=clip), "5_2", "FusedActivation", "DML_OPERATOR_ELEMENT_WISE_CLIP", "requires DML_FEATURE_LEVEL_6_0")
    rejects(add1(FusedActivation=DML_ELEMENT_WISE_CLIP_OPERATOR_DESC(Min=1.0, Max=0.0)), "6_4", "FusedActivation", "Min 1.0")


def test_add1_fused_activation_feature_level():
    """CELU arrived in 3_0 and SHRINK in 2_0 (their DirectML reference pages)."""
    rejects(add1(FusedActivation=DML_ACTIVATION_CELU_OPERATOR_DESC()), "2_1", "FusedActivation", "requires DML_FEATURE_LEVEL_3_0")
    add1(FusedActivation=DML_ACTIVATION_CELU_OPERATOR_DESC()).validate("3_0")
    add1(FusedActivation=DML_ACTIVATION_SHRINK_OPERATOR_DESC()).validate("2_0")
    rejects(DML_ACTIVATION_SHRINK_OPERATOR_DESC(), "1_0", "", "requires DML_FEATURE_LEVEL_2_0")


def test_sizes_of_zero_are_invalid():
    rejects(add1(sizes=(1, 1, 0, 3)), "6_4", "ATensor", "size below 1")
