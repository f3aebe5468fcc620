"""DML_OPERATOR_ELEMENT_WISE_ADD1 (Add, two-input Sum, com.microsoft.dml DmlFusedAdd/DmlFusedSum):
desc, import, kernel.

Import, as DmlOperatorElementWise.cpp: every tensor is right-aligned to at least 4 dimensions (at
most 8) and read with the output's sizes; ONNX broadcasting is a stride of 0. A Relu or LeakyRelu
that the DML EP's graph transformer folded into an Add or Sum (com.microsoft.dml
DmlFusedAdd/DmlFusedSum, made by passes/dml_fusion.py; its fusion table lists Add 7/13/14 and Sum
8/13) becomes ADD1's FusedActivation. The real EP uses ELEMENT_WISE_ADD for an Add with nothing to
fuse: the same math as ADD1 without an activation.

Kernel: ``FusedActivation(A + B)`` computed in float32 and rounded once to the tensors' type: for
float16 the sum is not rounded before the activation (DirectML computes float16 in float32 unless
half-precision computation is allowed; onnxruntime's CPU EP, lacking a float16 LeakyRelu, runs the
Add and the activation in float32 between casts, which gives the same). A single float16 addition
is correctly rounded either way.

No exact value: ADD1 does not quantize.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .activation import (DML_ACTIVATION_GELU_OPERATOR_DESC, ActivationDesc, apply_activation, fused_activation, gelu, validate_fused_activation,
                         with_fused_activation)
from .base import FLOATS, Operator, rules
from .element_wise_arithmetic import FLOAT_TYPES, INTEGERS, ROUNDED, BinaryDesc, binary, integer_add
from .importing import Fallback, NodeContext
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DML_ELEMENT_WISE_ADD1_OPERATOR_DESC(BinaryDesc):
    """ELEMENT_WISE_ADD1: ``FusedActivation(A + B)``, DML_FEATURE_LEVEL_2_0 and up."""

    FusedActivation: Optional[ActivationDesc] = None

    OPERATOR_TYPE = OP.ELEMENT_WISE_ADD1
    INTRODUCED = FL.FL_2_0
    TENSOR_RULES = rules(
        {f: (False, {FL.FL_2_0: (4, 5), FL.FL_3_0: (1, 8)}) for f in ("ATensor", "BTensor", "OutputTensor")},
        {"ATensor": FLOATS, "BTensor": FLOATS, "OutputTensor": FLOATS},
    )

    def validate_shapes(self, feature_level: FL) -> None:
        super().validate_shapes(feature_level)
        validate_fused_activation(self, feature_level)


# --- import from ONNX ------------------------------------------------------------------------


def add(ctx: NodeContext) -> DmlNode:
    """Add, or a two-input Sum (the registration row matches the since-version and the input count);
    an integer one is ELEMENT_WISE_ADD's."""
    if ctx.info(0).dtype in INTEGERS and ctx.node.op_type == "Add":
        return integer_add(ctx)
    return binary(ctx, DML_ELEMENT_WISE_ADD1_OPERATOR_DESC, "ELEMENT_WISE_ADD", types=FLOAT_TYPES)


def fused_add(ctx: NodeContext) -> DmlNode:
    """Add or two-input Sum with the activation the DML EP's fusion folded into it (passes/dml_fusion.py)."""
    entry = add(ctx)
    entry.desc = dataclasses.replace(entry.desc, FusedActivation=fused_activation(ctx))
    return entry


def bias_gelu(ctx: NodeContext) -> DmlNode:
    """com.microsoft BiasGelu, and FastGelu with a bias, as DmlOperatorBiasGelu.cpp builds them: ADD1
    of the input and the bias with a fused GELU (exact, with erf: not FastGelu's tanh approximation);
    a FastGelu without a bias is a standalone ACTIVATION_GELU."""
    if len(ctx.node.input) < 2 or not ctx.node.input[1]:
        return gelu(ctx)
    entry = binary(ctx, DML_ELEMENT_WISE_ADD1_OPERATOR_DESC, "ELEMENT_WISE_ADD", types=FLOAT_TYPES)
    entry.desc = dataclasses.replace(entry.desc, FusedActivation=DML_ACTIVATION_GELU_OPERATOR_DESC())
    return entry


def two_inputs(ctx: NodeContext) -> None:
    """The support query of Sum rows: dml_ep takes a two-input Sum only, one DirectML operator (the
    real EP has no query and runs other counts as a loop of adds)."""
    if len(ctx.node.input) != 2:
        raise Fallback(f"Sum with {len(ctx.node.input)} inputs (only a two-input Sum is one DirectML operator)", ON_DML_AS.format("ELEMENT_WISE_ADD, once per input"))


# --- kernel ----------------------------------------------------------------------------------


def element_wise_add1(desc, tensors: dict, options, state: KernelState) -> np.ndarray:
    """IEEE: overflow to infinity, inf - inf is NaN; silently, as its callers run kernels
    (Executor.run, compare_model, DxDispatchModel.run: np.errstate once, not per node)."""
    a = view(tensors["ATensor"], desc.ATensor)
    b = view(tensors["BTensor"], desc.BTensor)
    out = np.add(a, b, dtype=np.float32)
    if desc.FusedActivation is not None:
        return apply_activation(desc.FusedActivation, out, options, a.dtype)  # onnxruntime's kernel in its arithmetic (BiasGelu's Gelu)
    return out.astype(a.dtype, copy=False)


def device_precision(desc: DML_ELEMENT_WISE_ADD1_OPERATOR_DESC):
    """The addition's envelope (Direct3D's 0.5 ULP, WebNN's 1 ULP), plus its fused activation's
    (activation.py's; None for one without an envelope)."""
    return with_fused_activation(ROUNDED, desc.FusedActivation)


OPERATORS = (Operator(desc=DML_ELEMENT_WISE_ADD1_OPERATOR_DESC, kernel=element_wise_add1, exact_value=None, device_precision=device_precision),)
