"""DML_OPERATOR_MULTIHEAD_ATTENTION1 (DML_FEATURE_LEVEL_6_3) for com.microsoft GroupQueryAttention, and
DML_OPERATOR_MULTIHEAD_ATTENTION (6_1) for com.microsoft MultiHeadAttention: descs, import, kernels.

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
  onnxruntime's CPU writes nothing (zeros) unless it shares the buffer. That is the buffer
  onnxruntime-genai shares (IOBinding of one buffer to past and present, past_present_share_buffer):
  onnxruntime's allocation planner honours a kernel's alias only for an intermediate value, and a
  graph output (an LLM's present) is allocated afresh (allocation_planner.cc, kAllocateOutput). So
  in a plain run() of the real EP the operator never sees the past: its present, and a decode step's
  attention over the past rows, hold whatever that fresh buffer held (inferred); a prompt, which
  attends to its own rows only, is unaffected.
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
- "onnxruntime": onnxruntime's CPU GroupQueryAttention without its flash kernel (gqa_attention_base.h,
  :func:`mlas_attention`): per query head, float16 converted to float32, MLAS's SGEMM of Q and K^T with
  alpha = Scale (``kernels.mlas_sgemm``, one thread: the kernel passes no pool), MlasComputeSoftmax of
  each row's visible keys (``activation_softmax.mlas_softmax``), MLAS's SGEMM with V, rounded to
  float16 at the end. Bit for bit for float16 (measured: x86-64 with AVX-512F; onnxruntime's float16
  path on a host with MLAS float16 GEMMs, ARM64, is not modelled), and for float32 where onnxruntime
  runs that path (a total of 1 key, or ORT_GQA_DISABLE_FLASH_ATTENTION=1). Otherwise onnxruntime 1.30+
  runs float32 through its tiled flash kernel (an online softmax), which dml_ep does not reproduce:
  measured within 19 float32 ULP of the output's largest magnitude at 24 keys (onnxruntime itself is
  16 from the exact value there, dml_ep's "directml" 3); the tests pin 24. onnxruntime's Scale is
  ``1/sqrtf(H)``, the DML EP's ``1/sqrt(H)`` in double then float: they can differ by an ULP where H is
  not a power of 4; dml_ep uses the desc's.
MultiHeadAttention (DmlOperatorMultiHeadAttention.cpp): one MULTIHEAD_ATTENTION, no casts; Scale =
``scale`` or 1/sqrt(head), MaskFilterValue = ``mask_filter_value`` or -10000, HeadCount = num_heads;
``unidirectional`` is never read (non-causal). dml_ep models the separate 3-D query/key/value form
with its optional bias [2*hidden + v_hidden], key_padding_mask ([B] key lengths as
KEY_SEQUENCE_LENGTH; [B, T], [B, S, T], [B, N, S, T] as a BOOLEAN mask read with the scores' sizes),
attention_bias (exactly [B, N, S, T]: the EP does not broadcast it) and a non-empty past
([B, N, P, H], before the new keys); packed QKV or KV, a key that is the past, a [3B + 2] mask,
past_sequence_length, cache_indirection and the qk output fall back, not modelled. A masked score
gets MaskFilterValue added (as onnxruntime's CPU does; DirectML's page says both "set to" and
"added"), after the attention bias. "directml" as above, the bias added in float32. "onnxruntime": the
CPU MultiHeadAttention's MLAS path (:func:`mlas_multihead_attention`), bit for bit in float32 and
float16 (which onnxruntime runs in float32 between casts) where it takes that path: with a mask, an
attention bias, a past or present outputs; without them its float32 flash kernel runs, which dml_ep
does not reproduce (measured within 1 float32 ULP of the largest output).

No exact value: neither quantizes.
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
from ..numerics.kernels.mlas_exp import mlas_lane_sum, mlas_sum_exp_values
from ..numerics.kernels.mlas_sgemm import GemmCall, host_sgemm, sgemm_batch
from .activation_softmax import host_sum_exp_lanes, mlas_softmax
from .base import FLOATS, INT32, DevicePrecision, Operator, OperatorDesc, TensorDesc, rules
from .importing import Fallback, NodeContext, operand, tensor
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

    OUTPUT_FIELDS = _OUTPUTS  # the node's outputs, in order (DxDispatch writes them)
    READS_OUTPUTS = _OUTPUTS[1:]  # the presents hold the past when the operator runs (aliased), and get the new rows
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


@dataclasses.dataclass(frozen=True)
class DML_MULTIHEAD_ATTENTION_OPERATOR_DESC(OperatorDesc):
    """MULTIHEAD_ATTENTION (DML_FEATURE_LEVEL_6_1): ``[bias add] -> Query x Key^T * Scale ->
    [+ RelativePositionBias] -> [mask] -> softmax -> x Value`` per head (the page's order), the past
    keys and values before the new ones; non-causal."""

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
    OutputTensor: TensorDesc
    OutputPresentKeyTensor: TensorDesc | None
    OutputPresentValueTensor: TensorDesc | None
    Scale: float
    MaskFilterValue: float
    HeadCount: int
    MaskType: DML_MULTIHEAD_ATTENTION_MASK_TYPE

    OPERATOR_TYPE = OP.MULTIHEAD_ATTENTION
    INTRODUCED = FL.FL_6_1
    TENSOR_RULES = rules({field: (field != "OutputTensor", {FL.FL_6_1: dims}) for field, dims in _DIMS.items()
                          if field != "PastSequenceLengthsTensor"}, _TYPES)
    SAME_TYPE = (("QueryTensor", "KeyTensor", "ValueTensor", "BiasTensor", "RelativePositionBiasTensor", "PastKeyTensor", "PastValueTensor",
                  "OutputTensor", "OutputPresentKeyTensor", "OutputPresentValueTensor"),)

    @property
    def OUTPUT_FIELDS(self) -> tuple[str, ...]:
        """The node's outputs, in order (DxDispatch writes them): the presents where asked for."""
        return tuple(field for field in _OUTPUTS if getattr(self, field) is not None)

    def validate_shapes(self, feature_level: FL) -> None:
        """The separate Query/Key/Value form: [B, S, N*H], [B, T, N*H], [B, T, N*Hv]; the past [B, N, P, H]."""
        if self.QueryTensor is None or self.KeyTensor is None or self.ValueTensor is None:
            self.fail("dml_ep models the separate Query, Key and Value form only", "QueryTensor")
            return
        batch, _, hidden = self.QueryTensor.Sizes[-3:]
        if self.HeadCount < 1 or hidden % self.HeadCount or self.ValueTensor.Sizes[-1] % self.HeadCount:
            self.fail(f"hidden sizes {hidden} and {self.ValueTensor.Sizes[-1]} must be multiples of HeadCount {self.HeadCount}", "HeadCount")
        keys = self.KeyTensor.Sizes[-2]
        if tuple(self.KeyTensor.Sizes[-3:]) != (batch, keys, hidden) or tuple(self.ValueTensor.Sizes[-3:-1]) != (batch, keys):
            self.fail(f"Key {list(self.KeyTensor.Sizes)} and Value {list(self.ValueTensor.Sizes)} must be [{batch}, T, ...] of one T", "KeyTensor")


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
    desc = DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC(
        QueryTensor=tensor(dtype, (batch, sequence, hidden)), KeyTensor=tensor(dtype, tuple(key)), ValueTensor=tensor(dtype, tuple(ctx.shape(2))),
        StackedQueryKeyTensor=None, StackedKeyValueTensor=None, StackedQueryKeyValueTensor=None, BiasTensor=None, MaskTensor=None,
        RelativePositionBiasTensor=None, PastKeyTensor=None, PastValueTensor=None, PastSequenceLengthsTensor=tensor(np.int32, (batch,)),
        OutputTensor=tensor(dtype, (batch, sequence, hidden)), OutputPresentKeyTensor=tensor(dtype, present),
        OutputPresentValueTensor=tensor(dtype, present),
        Scale=_scale(ctx, head), MaskFilterValue=MASK_FILTER_VALUE, QueryHeadCount=heads, KeyValueHeadCount=kv_heads,
        MaskType=DML_MULTIHEAD_ATTENTION_MASK_TYPE.NONE)
    # node inputs 0-5 -> fields: the past buffers are the present ones (aliased); seqlens_k only when S == 1
    presents = ("OutputPresentKeyTensor", "OutputPresentValueTensor") if past else ("PastKeyTensor", "PastValueTensor")  # null: not bound
    fields: tuple[str, ...] = ("QueryTensor", "KeyTensor", "ValueTensor", *presents, "PastSequenceLengthsTensor")
    fields = fields if sequence == 1 else fields[:SEQLENS_K]
    entry = ctx.dml_node(desc, fields, (batch, sequence, hidden), more_output_shapes=(present, present))
    if sequence > 1:  # FILL_VALUE_CONSTANT's zeros
        entry.inputs["PastSequenceLengthsTensor"] = np.zeros(batch, np.int32)
    return entry


MHA_INPUTS = ("QueryTensor", "KeyTensor", "ValueTensor", "BiasTensor", "MaskTensor", "RelativePositionBiasTensor", "PastKeyTensor",
              "PastValueTensor")
ON_MHA = ON_DML_AS.format("MULTIHEAD_ATTENTION")


def multi_head_attention(ctx: NodeContext) -> DmlNode:
    """com.microsoft MultiHeadAttention in the separate Query/Key/Value form DmlOperatorMultiHeadAttention
    builds (``unidirectional`` never read: non-causal)."""
    shapes = _separate_operands(ctx)
    dtype, heads = ctx.info(0).dtype, int(ctx.attr("num_heads"))
    (batch, sequence, hidden), (_, keys, _), value = shapes[0], shapes[1], shapes[2]
    past = shapes[6][2] if 6 in shapes and 7 in shapes else 0
    scores = (batch, heads, sequence, past + keys)
    _check_operands(ctx, shapes, scores, 2 * hidden + value[2])
    mask, mask_type = _mask(ctx, shapes.get(4), scores)
    head = hidden // heads
    present_sizes = [(*scores[:2], scores[3], head)] * 2  # OperatorHelper.cpp: both [B, N, T, head_size]
    wanted = [len(ctx.node.output) > index and bool(ctx.node.output[index]) for index in (1, 2)]
    if wanted[1] and value[2] != hidden:
        raise RealEpError(f"present_value is described as {list(present_sizes[1])} (MultiHeadAttentionHelper: the query's head size) "
                          f"but the value's head size is {value[2] // heads} (inferred: DirectML refuses the operator)", node=ctx.node)
    presents = [tensor(dtype, sizes) if want else None for sizes, want in zip(present_sizes, wanted)]

    def optional(index: int) -> TensorDesc | None:
        return tensor(dtype, shapes[index]) if index in shapes and (index < 6 or past) else None

    desc = DML_MULTIHEAD_ATTENTION_OPERATOR_DESC(
        QueryTensor=tensor(dtype, shapes[0]), KeyTensor=tensor(dtype, shapes[1]), ValueTensor=tensor(dtype, value), StackedQueryKeyTensor=None,
        StackedKeyValueTensor=None, StackedQueryKeyValueTensor=None, BiasTensor=optional(3), MaskTensor=mask,
        RelativePositionBiasTensor=optional(5), PastKeyTensor=optional(6), PastValueTensor=optional(7),
        OutputTensor=tensor(dtype, (batch, sequence, value[2])), OutputPresentKeyTensor=presents[0], OutputPresentValueTensor=presents[1],
        Scale=_scale(ctx, head), MaskFilterValue=float(np.float32(ctx.attr("mask_filter_value", MASK_FILTER_VALUE))), HeadCount=heads,
        MaskType=mask_type)
    more = [sizes for sizes, present in zip(present_sizes, presents) if present is not None]
    return ctx.dml_node(desc, MHA_INPUTS, (batch, sequence, value[2]), more_output_shapes=more)


def _separate_operands(ctx: NodeContext) -> dict[int, tuple[int, ...]]:
    """The shapes of inputs 0 to 7 given, or Fallback for the forms dml_ep does not model."""
    shapes = {index: tuple(ctx.shape(index)) for index in range(8) if ctx.input_name(index)}
    if any(len(shapes.get(index, ())) != 3 for index in range(3)):
        raise Fallback("only separate 3-D query, key and value are modelled (not packed QKV or KV, nor a key that is the past)", ON_MHA)
    if any(ctx.input_name(index) for index in range(8, len(ctx.node.input))) or (len(ctx.node.output) > 3 and ctx.node.output[3]):
        raise Fallback("past_sequence_length, cache_indirection and the qk output are not modelled", ON_MHA)
    if 4 in shapes and 6 in shapes and len(shapes[4]) == 2:
        raise Fallback("a 2-D key_padding_mask with a past is not modelled (the DML EP reads it as [B, kv_sequence_length])", ON_MHA)
    return shapes


def _check_operands(ctx: NodeContext, shapes: dict, scores: tuple, bias: int) -> None:
    """The DML EP's ML_CHECK_VALID_ARGUMENTs on bias and attention_bias: errors, not fallbacks."""
    if 3 in shapes and shapes[3] != (bias,):
        raise RealEpError(f"bias of shape {list(shapes[3])} must be [{bias}] (ML_CHECK_VALID_ARGUMENT)", node=ctx.node)
    if 5 in shapes and shapes[5] != scores:
        raise RealEpError(f"attention_bias of shape {list(shapes[5])} must be exactly {list(scores)} (the DML EP does not broadcast it)",
                          node=ctx.node)


def _scale(ctx: NodeContext, head: int) -> float:
    """``scale``, or the DML EP's ``1.0f / std::sqrt(headSize)`` (in double, then float)."""
    scale = ctx.attr("scale")
    return float(np.float32(1.0 / np.sqrt(float(head)))) if scale is None else float(np.float32(scale))


def _mask(ctx: NodeContext, shape: tuple | None, scores: tuple) -> tuple[TensorDesc | None, DML_MULTIHEAD_ATTENTION_MASK_TYPE]:
    """key_padding_mask as the DML EP describes it: [B] key lengths (KEY_SEQUENCE_LENGTH, read as
    {1, B}), else a BOOLEAN mask read with the scores' sizes [B, N, S, T]."""
    if shape is None:
        return None, DML_MULTIHEAD_ATTENTION_MASK_TYPE.NONE
    dtype, (batch, heads, sequence, total) = ctx.info(4).dtype, scores
    if shape == (batch,):
        return tensor(dtype, (1, batch)), DML_MULTIHEAD_ATTENTION_MASK_TYPE.KEY_SEQUENCE_LENGTH
    if len(shape) == 1:
        raise Fallback(f"a key_padding_mask of shape {list(shape)} (query and key start/end bounds) is not modelled", ON_MHA)
    expected = {2: (batch, total), 3: (batch, sequence, total), 4: scores}.get(len(shape))
    if expected != tuple(shape):
        raise RealEpError(f"key_padding_mask of shape {list(shape)} does not fit the scores {list(scores)} (ML_CHECK_VALID_ARGUMENT)", node=ctx.node)
    actual = {2: (batch, 1, 1, total), 3: (batch, 1, sequence, total), 4: scores}[len(shape)]
    return operand(dtype, actual, scores), DML_MULTIHEAD_ATTENTION_MASK_TYPE.BOOLEAN


def _total_sequence_length(ctx: NodeContext) -> int:
    """Input 6, a scalar the real EP reads from CPU memory (OperatorHelper.cpp: "total_sequence_length must be a scalar")."""
    value = ctx.constants.get(ctx.input_name(TOTAL_SEQUENCE_LENGTH))
    if value is None:
        raise Fallback("total_sequence_length is not known before a run", ON_DML_AS.format("MULTIHEAD_ATTENTION1"))
    if np.asarray(value).size != 1:
        raise RealEpError(f"total_sequence_length must be a scalar (it has shape {list(np.shape(value))})", node=ctx.node)
    return int(np.asarray(value).reshape(()))


# --- kernel ----------------------------------------------------------------------------------


def multihead_attention1(desc: DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState,
                         compiled: bool = False) -> list[np.ndarray]:
    """The output and the two present buffers (see the module's docstring for the two arithmetics;
    ``compiled``: MLAS's panels summed by ``kernels.compiled.sgemm``, the same bits)."""
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
        if arithmetic.onnxruntime:
            out[b] = mlas_attention(queries, keys, values, desc.Scale, past, compiled).reshape(heads, sequence, head)
            continue
        scores = np.matmul(queries, keys[:, None].swapaxes(-1, -2))  # [kvN, group, S, past + S]
        probabilities = _softmax(scores, desc.Scale, False, hidden=_causal(sequence, past + sequence, past))
        out[b] = np.matmul(probabilities, values[:, None]).reshape(heads, sequence, head).astype(np.float32)
    dtype = desc.OutputTensor.DataType.numpy()
    return [out.transpose(0, 2, 1, 3).reshape(batch, sequence, hidden).astype(dtype), present_key, present_value]


def mlas_attention(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float, past: int, compiled: bool = False) -> np.ndarray:
    """onnxruntime's CPU GroupQueryAttention without its flash kernel (gqa_attention_base.h
    ComputeAttentionProbs, ComputeVxAttentionScore), per query head (``queries`` [kvN, group, S, H],
    ``keys`` and ``values`` [kvN, T, H], float32): MLAS's SGEMM of Q and K^T with alpha = Scale on one
    thread, MlasComputeSoftmax over each row's visible keys (the others 0), MLAS's SGEMM of that and V."""
    host, lanes = dataclasses.replace(host_sgemm(), threads=1), host_sum_exp_lanes()
    kv_heads, group, sequence, head = queries.shape
    # Every head's GEMMs in one stack: one thread sums each alike, so as onnxruntime's per-head calls.
    keys_t = np.repeat(np.ascontiguousarray(keys.swapaxes(-1, -2)), group, axis=0)
    scores = sgemm_batch(queries.reshape(-1, sequence, head), keys_t, GemmCall(trans_b=True, alpha=scale), host, None, compiled)
    probabilities = _causal_mlas_softmax(scores, past, lanes)
    out = sgemm_batch(probabilities, np.repeat(values, group, axis=0), GemmCall(), host, None, compiled)
    return out.reshape(kv_heads, group, sequence, -1)


def _causal_mlas_softmax(scores: np.ndarray, past: int, lanes: int) -> np.ndarray:
    """MlasComputeSoftmax of each row of ``scores`` [heads, S, T] over its visible keys 0 .. past + row,
    the others 0, all rows at once: the max and the sum are each row's, the exps element-wise; the
    8- and 16-lane sums take a row's trailing zeros as adding +0, the SSE2 one's tail does not."""
    hidden = _causal(scores.shape[1], scores.shape[2], past)
    if lanes == 4:
        probabilities = np.zeros(scores.shape, np.float32)
        for row in range(scores.shape[1]):
            probabilities[:, row, :past + row + 1] = mlas_softmax(scores[:, row, :past + row + 1], lanes)
        return probabilities
    negative_maximum = -np.where(hidden, np.float32(-np.inf), scores).max(axis=-1, keepdims=True)
    exps = np.where(hidden, np.float32(0), mlas_sum_exp_values(np.add(scores, negative_maximum, dtype=np.float32), lanes))
    scale = np.divide(np.float32(1), mlas_lane_sum(exps.reshape(-1, exps.shape[-1]), lanes), dtype=np.float32)
    return np.where(hidden, np.float32(0), np.multiply(exps, scale.reshape(*exps.shape[:2], 1), dtype=np.float32))


def mlas_multihead_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, added: list, compiled: bool = False) -> np.ndarray:
    """onnxruntime's CPU MultiHeadAttention without its flash kernel (attention_cpu_base.h), on
    float32 [B, N, rows, H] operands: one MlasGemmBatch of every head's Q and K^T with alpha = Scale on
    the session's threads, each row's attention bias then mask added (MlasEltwiseAdd), MlasComputeSoftmax,
    then each head's P x V (math::MatMul, one thread). Returns [B, N, S, Hv]."""
    heads = q.shape[0] * q.shape[1]
    stacked = sgemm_batch(q.reshape(heads, *q.shape[2:]), np.ascontiguousarray(k.reshape(heads, *k.shape[2:]).swapaxes(-1, -2)),
                          GemmCall(trans_b=True, alpha=scale), host_sgemm(), None, compiled)
    scores = stacked.reshape(*q.shape[:3], k.shape[2])
    for term in added:
        scores = np.add(scores, term, dtype=np.float32)
    probabilities = mlas_softmax(scores.reshape(-1, scores.shape[-1]), host_sum_exp_lanes()).reshape(heads, q.shape[2], -1)
    one = dataclasses.replace(host_sgemm(), threads=1)
    values = v.reshape(heads, *v.shape[2:])
    out = sgemm_batch(probabilities, values, GemmCall(), one, None, compiled)  # each head's on one thread: a stack sums each alike
    return out.reshape(*q.shape[:3], v.shape[-1])


def multihead_attention(desc: DML_MULTIHEAD_ATTENTION_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState, compiled: bool = False):
    """The output, and the present key and value where the desc has them (a list then): the bias
    added to Q, K and V in float32, the past rows before the new ones, masked keys given
    MaskFilterValue (added, as onnxruntime's CPU adds it; the page says both "set" and "added")."""
    described, heads = desc.tensors(), desc.HeadCount
    q, k, v = (view(tensors[field], described[field]).astype(np.float32) for field in ("QueryTensor", "KeyTensor", "ValueTensor"))
    batch, sequence, hidden = q.shape
    if desc.BiasTensor is not None:
        bias = view(tensors["BiasTensor"], desc.BiasTensor).astype(np.float32)
        q, k, v = q + bias[:hidden], k + bias[hidden:2 * hidden], v + bias[2 * hidden:]
    dtype = desc.OutputTensor.DataType.numpy()
    q, k, v = (x.reshape(batch, x.shape[1], heads, -1).transpose(0, 2, 1, 3) for x in (q, k, v))  # [B, N, rows, H]
    if desc.PastKeyTensor is not None and desc.PastValueTensor is not None:
        k = np.concatenate([view(tensors["PastKeyTensor"], desc.PastKeyTensor).astype(np.float32), k], axis=2)
        v = np.concatenate([view(tensors["PastValueTensor"], desc.PastValueTensor).astype(np.float32), v], axis=2)
    relative = desc.RelativePositionBiasTensor
    added = [] if relative is None else [view(tensors["RelativePositionBiasTensor"], relative).astype(np.float32)]
    masked = _masked(desc, tensors, (*q.shape[:3], k.shape[2]))
    if masked is not None:  # after the relative bias, each added in float32
        added.append(np.where(masked, np.float32(desc.MaskFilterValue), np.float32(0)))
    if arithmetic.onnxruntime:
        out = mlas_multihead_attention(q, k, v, desc.Scale, added, compiled)
    else:
        probabilities = _softmax(np.matmul(q.astype(np.float64), k.astype(np.float64).swapaxes(-1, -2)), desc.Scale, False, added=added)
        out = np.matmul(probabilities.astype(np.float64), v.astype(np.float64)).astype(np.float32)
    out = out.transpose(0, 2, 1, 3).reshape(batch, sequence, -1).astype(dtype)
    presents = [x.astype(dtype) for x, field in ((k, "OutputPresentKeyTensor"), (v, "OutputPresentValueTensor")) if getattr(desc, field) is not None]
    return [out, *presents] if presents else out


def _masked(desc: DML_MULTIHEAD_ATTENTION_OPERATOR_DESC, tensors: dict, scores: tuple) -> np.ndarray | None:
    """Where a key is masked out, broadcastable to the scores [B, N, S, T], or None."""
    if desc.MaskTensor is None:
        return None
    mask = view(tensors["MaskTensor"], desc.MaskTensor)
    if desc.MaskType == DML_MULTIHEAD_ATTENTION_MASK_TYPE.KEY_SEQUENCE_LENGTH:  # {1, B} key lengths
        return np.arange(scores[-1])[None, None, None, :] >= mask.reshape(-1)[:, None, None, None]
    return mask == 0


def _present(tensors: dict, field: str, desc: TensorDesc) -> np.ndarray:
    """A present buffer: the past bound to it (fewer rows, or none, grown with zeros) as a new array."""
    batch, kv_heads, rows, head = desc.Sizes[-4:]
    present = np.zeros((batch, kv_heads, rows, head), desc.DataType.numpy())
    past = tensors.get(field)
    if past is not None and np.size(past):
        past = np.asarray(past).reshape(batch, kv_heads, -1, head)
        present[:, :, :past.shape[2]] = past[:, :, :rows]
    return present


def _softmax(scores: np.ndarray, scale: float, onnxruntime: bool, hidden=None, added=()) -> np.ndarray:
    """Softmax over the last axis of ``scores * scale`` in float32, each of ``added`` (float32) added
    in turn first and the ``hidden`` keys taking no part; the "directml" point value with Scale, exp
    and the sum each rounded once from float64."""
    if onnxruntime:  # float32 throughout: the sum scaled, exp, the sum, one reciprocal
        x = scores.astype(np.float32) * np.float32(scale)
    else:
        x = (scores * scale).astype(np.float32)
    for term in added:
        x = x + term
    if hidden is not None:
        x = np.where(hidden, np.float32(-np.inf), x)
    if onnxruntime:
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e * (np.float32(1) / e.sum(axis=-1, keepdims=True, dtype=np.float32))
    e = np.exp((x - x.max(axis=-1, keepdims=True)).astype(np.float64)).astype(np.float32)
    return (e / e.sum(axis=-1, keepdims=True, dtype=np.float64)).astype(np.float32)


def _causal(sequence: int, keys: int, past: int) -> np.ndarray:
    """Query row i sees keys 0 .. past + i: True where it does not."""
    return np.arange(keys)[None, :] > past + np.arange(sequence)[:, None]


def compiled_multihead_attention1(desc: DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState) -> list[np.ndarray]:
    """:func:`multihead_attention1` with MLAS's panels summed by ``kernels.compiled.sgemm``."""
    return multihead_attention1(desc, tensors, arithmetic, state, compiled=True)


def compiled_multihead_attention(desc: DML_MULTIHEAD_ATTENTION_OPERATOR_DESC, tensors: dict, arithmetic, state: KernelState):
    """:func:`multihead_attention` with MLAS's panels summed by ``kernels.compiled.sgemm``."""
    return multihead_attention(desc, tensors, arithmetic, state, compiled=True)


def device_precision(desc: DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC | DML_MULTIHEAD_ATTENTION_OPERATOR_DESC) -> DevicePrecision:
    """WebNN's tolerances summed over the steps (WPT-B ``getPrecisionTolerance``): matmul 2*K for
    Q.K^T (K = H) and for P.V (K = the keys' rows T), softmax 3*T + 3."""
    heads = desc.QueryHeadCount if isinstance(desc, DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC) else desc.HeadCount
    head = desc.QueryTensor.Sizes[-1] // heads if desc.QueryTensor is not None else 0
    if isinstance(desc, DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC):
        rows = desc.OutputPresentKeyTensor.Sizes[-2] if desc.OutputPresentKeyTensor is not None else 0
    else:
        rows = sum(tensor.Sizes[-2] for tensor in (desc.KeyTensor, desc.PastKeyTensor) if tensor is not None)
    ulp = 2 * head + 3 * rows + 3 + 2 * rows
    return DevicePrecision("WebNN conformance: matmul 2*K (Q.K^T, P.V) + softmax 3*N+3, summed", ulp32=ulp, ulp16=ulp)


OPERATORS = (Operator(desc=DML_MULTIHEAD_ATTENTION1_OPERATOR_DESC, kernel=multihead_attention1, compiled_kernel=compiled_multihead_attention1, exact_value=None,
                      device_precision=device_precision),
             Operator(desc=DML_MULTIHEAD_ATTENTION_OPERATOR_DESC, kernel=multihead_attention, compiled_kernel=compiled_multihead_attention, exact_value=None,
                      device_precision=device_precision))
"""com.microsoft GroupQueryAttention on DML_OPERATOR_MULTIHEAD_ATTENTION1 and MultiHeadAttention on
DML_OPERATOR_MULTIHEAD_ATTENTION (``dml_ep/operators/multihead_attention.py``): GQA planned with the
real EP's casts and zeros inside, its present the past buffer with the new rows written (aliased);
not bit for bit with onnxruntime's CPU kernels (float16 within an ULP, float32 within float32
rounding of the largest output)."""
