"""DML_OPERATOR_MULTIHEAD_ATTENTION1 (DML_FEATURE_LEVEL_6_3) for com.microsoft GroupQueryAttention:
desc, import, kernel.

What the real EP builds (DmlOperatorGroupQueryAttention.cpp): one MULTIHEAD_ATTENTION1 of Query,
Key and Value ([B, S, N*H], [B, S, kvN*H], 3-D), PastSequenceLengths (INT32 [B]) and the three
outputs, QueryHeadCount = num_heads, KeyValueHeadCount = kv_num_heads, Scale = the ``scale``
attribute or ``1 / sqrt(head_size)``, MaskFilterValue = -10000, no mask, bias or past tensors. For
float16 it CASTs Q, K and V to float32 and the three outputs back, and feeds PastSequenceLengths
from ``seqlens_k`` when S == 1, else from a FILL_VALUE_CONSTANT of zeros: a prompt attends as if
there were no past, whatever ``seqlens_k`` says (the EP's comment: as CUDA's kernel does).

dml_ep plans the node as that one operator, with the casts and the zeros inside it:
- the casts: the EP's own comment says DirectML eliminates them and computes in half precision; in
  the "directml" arithmetic a float16 tensor is widened to float32 exactly (what the input CASTs
  do) and the outputs are rounded once to float16 (what the output CASTs do), so the graph's value
  is this node's. A split would also need the float16 past cast up into the float32 present, a
  node the real EP does not build: the present buffers are the past's (below).
- the zeros: bound as a constant [B] of int32 zeros, FILL_VALUE_CONSTANT's output.
- aliasing: the EP's row aliases past_key -> present_key and past_value -> present_value, and binds
  no past tensor: MULTIHEAD_ATTENTION1 reads the past from the present buffers and writes the new
  K and V into them at rows PastSequenceLengths[b] .. + S. dml_ep binds past_key and past_value to
  OutputPresentKeyTensor and OutputPresentValueTensor (the buffer they share) and returns a present
  that is the past, grown with zeros to max(past length, total_sequence_length) rows (OperatorHelper's
  output shape), the new rows written. Rows past the total keep the buffer's content, where
  onnxruntime's CPU writes nothing (zeros) unless it shares the buffer.
- total_sequence_length must be a CPU tensor (the row's required CPU input); its value, known when
  run, sizes the present.

What the real EP ignores, so dml_ep too (plain global causal attention, unlike onnxruntime's CPU):
``local_window_size``, ``softcap``, ``smooth_softmax``, ``do_rotary`` and the cos/sin caches,
position ids, attention_bias, head_sink, and ``seqlens_k`` when S > 1 (a chunked prefill with a
past, and a right-padded batch's lengths, are not honoured). It refuses (a kernel error, which
dml_ep raises as RealEpError): ``causal`` 0, q/k norm weights (inputs 14, 15), Q, K or V not 3-D
(packed QKV).

Semantics modelled (DirectML leaves PastSequenceLengths and the head counts "TBD" and says nothing
of causality without a mask: dml_ep's reading): for batch b with past p = PastSequenceLengths[b],
query row i of head n attends to present rows 0 .. p + i of KV head n // (N / kvN); masked rows take
no part (MaskFilterValue -10000 plus a score underflows to 0 in exp unless scores near -10000).

Kernel:
- "directml": Q.K^T as the float64 sum of exact products times Scale, rounded once to float32;
  softmax in float32 with exp and the sum taken in float64 and each rounded once; P.V as a float64
  sum rounded once; then rounded once to the output type.
- "onnxruntime": onnxruntime's CPU GroupQueryAttention (contrib_ops/cpu/bert/gqa_attention_base.h:
  float32 Q.K^T scaled after the sum, softmax, P.V; float16 computed in float32) in numpy's float32
  order. Not bit for bit: onnxruntime 1.30+ runs float32 through its tiled flash kernel
  (MlasFlashAttentionGQA, an online softmax) and MLAS's exp. Measured in units of the output's
  largest magnitude's float32 ULP: up to 19 at 24 keys (20% of elements bit-equal; onnxruntime is 16
  from the exact value there, dml_ep's "directml" 3), 9 at 100; float16 within 0.25 ULP (99.8%
  equal). The tests pin 24 and 1.
No exact value: it does not quantize.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.enums import DML_FEATURE_LEVEL as FL
from ..core.enums import DML_MULTIHEAD_ATTENTION_MASK_TYPE
from ..core.enums import DML_OPERATOR_TYPE as OP
from ..core.errors import RealEpError, ShapeError
from ..core.tensor_desc import view
from ..realep.placement import ON_DML_AS
from .base import FLOATS, INT32, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, tensor
from .kernel_state import KernelState
from .nodes import DmlNode

# --- desc ------------------------------------------------------------------------------------

_INPUTS = ("QueryTensor", "KeyTensor", "ValueTensor", "StackedQueryKeyTensor", "StackedKeyValueTensor", "StackedQueryKeyValueTensor",
           "BiasTensor", "MaskTensor", "RelativePositionBiasTensor", "PastKeyTensor", "PastValueTensor")
_OUTPUTS = ("OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor")
_DIMS = {"QueryTensor": (3, 5), "KeyTensor": (3, 5), "ValueTensor": (3, 5), "StackedQueryKeyTensor": (5, 5),
         "StackedKeyValueTensor": (5, 5), "StackedQueryKeyValueTensor": (5, 5), "BiasTensor": (1, 5), "MaskTensor": (2, 5),
         "RelativePositionBiasTensor": (4, 5), "PastKeyTensor": (4, 5), "PastValueTensor": (4, 5), "PastSequenceLengthsTensor": (1, 5),
         "OutputTensor": (3, 5), "OutputPresentKeyTensor": (4, 5), "OutputPresentValueTensor": (4, 5)}
_TYPES = {field: FLOATS for field in _DIMS}
_TYPES["PastSequenceLengthsTensor"] = INT32  # the page lists FLOAT32/FLOAT16; the real EP passes INT32, which DirectML takes
_TYPES["MaskTensor"] = FLOATS | INT32
MASK_FILTER_VALUE = -10000.0  # the real EP's


@dataclasses.dataclass(frozen=True)
class DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC(OperatorDesc):
    """MULTIHEAD_ATTENTION1: ``softmax(Query x Key^T * Scale [+ bias, mask]) x Value`` per head, the
    query heads in KeyValueHeadCount groups sharing a key/value head, the past read from and the new
    key/value rows written into the present buffers at PastSequenceLengths."""

    QueryTensor: TensorDesc | None
    KeyTensor: TensorDesc | None
    ValueTensor: TensorDesc | None
    StackedQueryKeyTensor: TensorDesc | None
    StackedKeyValueTensor: TensorDesc | None
    StackedQueryKeyValueTensor: TensorDesc | None
    BiasTensor: TensorDesc | None
    MaskTensor: TensorDesc | None
    RelativePositionBiasTensor: TensorDesc | None
    PastKeyTensor: TensorDesc | None
    PastValueTensor: TensorDesc | None
    PastSequenceLengthsTensor: TensorDesc | None
    OutputTensor: TensorDesc
    OutputPresentKeyTensor: TensorDesc | None
    OutputPresentValueTensor: TensorDesc | None
    Scale: float
    MaskFilterValue: float
    QueryHeadCount: int
    KeyValueHeadCount: int
    MaskType: DML_MULTIHEAD_ATTENTION_MASK_TYPE

    OPERATOR_TYPE = OP.MULTIHEAD_ATTENTION1
    INTRODUCED = FL.FL_6_3
    TENSOR_RULES = rules({field: (field != "OutputTensor", {FL.FL_6_3: dims}) for field, dims in _DIMS.items()}, _TYPES)
    SAME_TYPE = (("QueryTensor", "KeyTensor", "ValueTensor", "OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor"),)

    def validate_shapes(self, feature_level: FL) -> None:
        """The separate Query/Key/Value form the real EP builds: [B, S, heads * H], the present
        [B, kvN, T, H] with T at least S, the query heads whole groups of the key/value heads."""
        if self.QueryTensor is None or self.KeyTensor is None or self.ValueTensor is None:
            self.fail("dml_ep models the separate Query, Key and Value form only", "QueryTensor")
            return
        if self.QueryHeadCount < 1 or self.KeyValueHeadCount < 1 or self.QueryHeadCount % self.KeyValueHeadCount:
            self.fail(f"QueryHeadCount {self.QueryHeadCount} must be a multiple of KeyValueHeadCount {self.KeyValueHeadCount}", "QueryHeadCount")
        batch, sequence, hidden = self.QueryTensor.Sizes[-3:]
        head = hidden // self.QueryHeadCount
        if hidden % self.QueryHeadCount:
            self.fail(f"hidden size {hidden} is not a multiple of QueryHeadCount {self.QueryHeadCount}", "QueryTensor")
        for field, operand in (("KeyTensor", self.KeyTensor), ("ValueTensor", self.ValueTensor)):
            if tuple(operand.Sizes[-3:]) != (batch, sequence, self.KeyValueHeadCount * head):
                self.fail(f"sizes {list(operand.Sizes)} must be {[batch, sequence, self.KeyValueHeadCount * head]}", field)
        if tuple(self.OutputTensor.Sizes[-3:]) != (batch, sequence, hidden):
            self.fail(f"sizes {list(self.OutputTensor.Sizes)} must be Query's", "OutputTensor")
        for field in ("OutputPresentKeyTensor", "OutputPresentValueTensor"):
            present = getattr(self, field)
            if present is not None and (tuple(present.Sizes[-4:-2]) != (batch, self.KeyValueHeadCount) or present.Sizes[-1] != head
                                        or present.Sizes[-2] < sequence):
                self.fail(f"sizes {list(present.Sizes)} must be [{batch}, {self.KeyValueHeadCount}, T >= {sequence}, {head}]", field)


# --- import from ONNX ------------------------------------------------------------------------

SEQLENS_K, TOTAL_SEQUENCE_LENGTH = 5, 6
Q_NORM_WEIGHT, K_NORM_WEIGHT = 14, 15


def group_query_attention(ctx: NodeContext) -> DmlNode:
    """com.microsoft GroupQueryAttention as DmlOperatorGroupQueryAttention builds it."""
    if ctx.attr("causal", 1) != 1:
        raise RealEpError("the DML EP's GroupQueryAttention implements causal=1 only (ML_CHECK_VALID_ARGUMENT)", node=ctx.node)
    if ctx.input_name(Q_NORM_WEIGHT) or ctx.input_name(K_NORM_WEIGHT):
        raise RealEpError("the DML EP's GroupQueryAttention takes no q_norm_weight / k_norm_weight (inputs 14, 15)", node=ctx.node)
    if not (ctx.input_name(1) and ctx.input_name(2)) or any(len(ctx.shape(i)) != 3 for i in range(3)):
        raise RealEpError("the DML EP's GroupQueryAttention needs Q, K and V each 3-D (no packed QKV)", node=ctx.node)
    dtype = ctx.info(0).dtype
    heads, kv_heads = int(ctx.attr("num_heads")), int(ctx.attr("kv_num_heads"))
    (batch, sequence, hidden), key = ctx.shape(0), ctx.shape(1)
    head = hidden // heads
    total = _total_sequence_length(ctx)
    past = ctx.shape(3)[2] if ctx.input_name(3) and ctx.input_name(4) else 0
    present = (batch, kv_heads, max(past, total), head)
    lengths = ctx.shape(SEQLENS_K)
    if sequence == 1 and tuple(lengths) not in ((batch,), (batch, 1)):
        raise RealEpError(f"seqlens_k of shape {list(lengths)} must be [{batch}] or [{batch}, 1] (ML_CHECK_VALID_ARGUMENT)", node=ctx.node)
    scale = ctx.attr("scale")
    desc = DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC(
        QueryTensor=tensor(dtype, (batch, sequence, hidden)), KeyTensor=tensor(dtype, tuple(key)), ValueTensor=tensor(dtype, tuple(ctx.shape(2))),
        StackedQueryKeyTensor=None, StackedKeyValueTensor=None, StackedQueryKeyValueTensor=None, BiasTensor=None, MaskTensor=None,
        RelativePositionBiasTensor=None, PastKeyTensor=None, PastValueTensor=None, PastSequenceLengthsTensor=tensor(np.int32, (batch,)),
        OutputTensor=tensor(dtype, (batch, sequence, hidden)), OutputPresentKeyTensor=tensor(dtype, present),
        OutputPresentValueTensor=tensor(dtype, present),
        Scale=float(np.float32(1.0 / np.sqrt(float(head)))) if scale is None else float(np.float32(scale)),
        MaskFilterValue=MASK_FILTER_VALUE, QueryHeadCount=heads, KeyValueHeadCount=kv_heads, MaskType=DML_MULTIHEAD_ATTENTION_MASK_TYPE.NONE)
    # node inputs 0-5 -> fields: the past buffers are the present ones (aliased); seqlens_k only when S == 1
    presents = ("OutputPresentKeyTensor", "OutputPresentValueTensor") if past else ("PastKeyTensor", "PastValueTensor")  # null: not bound
    fields: tuple[str, ...] = ("QueryTensor", "KeyTensor", "ValueTensor", *presents, "PastSequenceLengthsTensor")
    fields = fields if sequence == 1 else fields[:SEQLENS_K]
    entry = ctx.dml_node(desc, fields, (batch, sequence, hidden), more_output_shapes=(present, present))
    if sequence > 1:  # FILL_VALUE_CONSTANT's zeros
        entry.inputs["PastSequenceLengthsTensor"] = np.zeros(batch, np.int32)
    return entry


def _total_sequence_length(ctx: NodeContext) -> int:
    """Input 6, a scalar the real EP reads from CPU memory (OperatorHelper.cpp: "total_sequence_length must be a scalar")."""
    value = ctx.constants.get(ctx.input_name(TOTAL_SEQUENCE_LENGTH))
    if value is None:
        raise Fallback("total_sequence_length is not known before a run", ON_DML_AS.format("MULTIHEAD_ATTENTION1"))
    if np.asarray(value).size != 1:
        raise RealEpError(f"total_sequence_length must be a scalar (it has shape {list(np.shape(value))})", node=ctx.node)
    return int(np.asarray(value).reshape(()))


# --- kernel ----------------------------------------------------------------------------------


def multihead_attention1(desc: DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> list[np.ndarray]:
    """The output and the two present buffers (see the module's docstring for the two arithmetics)."""
    wide = np.float32 if arithmetic.onnxruntime else np.float64
    described = desc.tensors()
    q = view(tensors["QueryTensor"], described["QueryTensor"])
    batch, sequence, hidden = q.shape
    heads, kv_heads = desc.QueryHeadCount, desc.KeyValueHeadCount
    head = hidden // heads
    pasts = np.asarray(tensors["PastSequenceLengthsTensor"]).reshape(-1)
    present_key = _present(tensors, "OutputPresentKeyTensor", described["OutputPresentKeyTensor"])
    present_value = _present(tensors, "OutputPresentValueTensor", described["OutputPresentValueTensor"])
    rows = present_key.shape[2]
    out = np.empty((batch, heads, sequence, head), np.float32)
    for b in range(batch):
        past = int(pasts[b])
        if not 0 <= past <= rows - sequence:
            raise ShapeError(f"PastSequenceLengths[{b}] = {past} puts the {sequence} new rows outside the present's {rows}")
        for present, field in ((present_key, "KeyTensor"), (present_value, "ValueTensor")):
            present[b, :, past:past + sequence] = view(tensors[field], described[field])[b].reshape(sequence, kv_heads, head).transpose(1, 0, 2)
        queries = q[b].reshape(sequence, kv_heads, heads // kv_heads, head).transpose(1, 2, 0, 3).astype(wide)  # [kvN, group, S, H]
        keys, values = present_key[b, :, :past + sequence].astype(wide), present_value[b, :, :past + sequence].astype(wide)
        scores = np.matmul(queries, keys[:, None].swapaxes(-1, -2))  # [kvN, group, S, past + S]
        probabilities = _softmax(scores, desc.Scale, past, arithmetic.onnxruntime)
        out[b] = np.matmul(probabilities.astype(wide), values[:, None]).reshape(heads, sequence, head).astype(np.float32)
    dtype = desc.OutputTensor.DataType.numpy()
    return [out.transpose(0, 2, 1, 3).reshape(batch, sequence, hidden).astype(dtype), present_key, present_value]


def _present(tensors: dict, field: str, desc: TensorDesc) -> np.ndarray:
    """A present buffer: the past bound to it (fewer rows, or none, grown with zeros) as a new array."""
    batch, kv_heads, rows, head = desc.Sizes[-4:]
    present = np.zeros((batch, kv_heads, rows, head), desc.DataType.numpy())
    past = tensors.get(field)
    if past is not None and np.size(past):
        past = np.asarray(past).reshape(batch, kv_heads, -1, head)
        present[:, :, :past.shape[2]] = past[:, :, :rows]
    return present


def _softmax(scores: np.ndarray, scale: float, past: int, onnxruntime: bool) -> np.ndarray:
    """Causal softmax over the last axis, query row i seeing keys 0 .. past + i, in float32; the
    "directml" point value with Scale, exp and the sum each rounded once from float64."""
    sequence, keys = scores.shape[-2:]
    hidden = np.arange(keys)[None, :] > past + np.arange(sequence)[:, None]
    if onnxruntime:  # float32 throughout: the sum scaled, exp, the sum, one reciprocal
        x = scores.astype(np.float32) * np.float32(scale)
        x[..., hidden] = -np.inf
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e * (np.float32(1) / e.sum(axis=-1, keepdims=True, dtype=np.float32))
    x = (scores * scale).astype(np.float32)
    x[..., hidden] = -np.inf
    e = np.exp((x - x.max(axis=-1, keepdims=True)).astype(np.float64)).astype(np.float32)
    return (e / e.sum(axis=-1, keepdims=True, dtype=np.float64)).astype(np.float32)


def device_precision(desc: DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC) -> DevicePrecision:
    """WebNN's tolerances summed over the steps (WPT-B ``getPrecisionTolerance``): matmul 2*K for
    Q.K^T (K = H) and for P.V (K = the present's rows T), softmax 3*T + 3."""
    head = desc.QueryTensor.Sizes[-1] // desc.QueryHeadCount if desc.QueryTensor is not None else 0
    rows = desc.OutputPresentKeyTensor.Sizes[-2] if desc.OutputPresentKeyTensor is not None else 0
    ulp = 2 * head + 3 * rows + 3 + 2 * rows
    return DevicePrecision("WebNN conformance: matmul 2*K (Q.K^T, P.V) + softmax 3*N+3, summed", ulp32=ulp, ulp16=ulp)


OPERATORS = (Operator(desc=DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC, kernel=multihead_attention1, exact_value=None,
                      device_precision=device_precision),)
"""com.microsoft GroupQueryAttention on DML_OPERATOR_MULTIHEAD_ATTENTION1
(``dml_ep/operators/multihead_attention.py``): planned there with the real EP's casts and zeros inside;
the present is the past buffer with the new rows written (aliased); not bit for bit with onnxruntime's
CPU GroupQueryAttention (float16 within an ULP, float32 within float32 rounding of the largest output)."""
