"""Integer-GEMM engines: the exact sums ``sum_k (a[..., m, k] - za) * (b[..., k, n] - zb[..., n])``
behind the quantized kernels' integer cores.

Two engines compute the same integers, so each checks the other:

- ``"onnxruntime"`` (the default: 2-4x faster): onnxruntime's MatMulInteger, whose int32 result
  is exact by the ONNX spec. One session per prepared operand, a constant B as an initializer
  (MLAS prepacks it). A always enters as uint8 (int8 codes shifted by 128, with their zero point).
  B enters as int8 only where the host probe shows that onnxruntime's uint8 x int8 kernels do not
  saturate pairs of products to int16; elsewhere it is shifted to uint8 too, and uint8 x uint8 is
  exact on every CPU (MLAS widens it to 16 bits).
- ``"numpy"``: float32 BLAS in K-blocks short enough to be exact (``kernels/integer_gemm.py``).

onnxruntime's sums come back as int32: MatMulIntegerToFloat with unit scales would give float32,
but its MLAS output step costs more than the pass it saves (ResNet-50's GEMMs, 2-core Xeon with
AMX: 11.0 ms a run against 8.7). A product's bias is the requantize step's to add
(``kernels.quantize.Requantizer``), in the same pass. The numpy engine's come back as float32
where every sum provably stays below 2^24 in magnitude (from the weights and the widest input
code), else int32.

The engine also chooses the kernels around the sums: ``"onnxruntime"`` runs dml_ep's compiled
kernels (``dml_ep.numerics.kernels.compiled``, where built), ``"numpy"`` their numpy twins, so that the two
engines cross-check those too.

Exactness, per onnxruntime kernel kind (MLAS, x86-64, measured by ``arithmetic.host_saturates_u8s8``
and pinned in tests/numerics/test_engines.py): uint8 x uint8, int8 x uint8 and int8 x int8 products are
exact on every CPU (MLAS widens them to 16 bits, or has VNNI); uint8 x int8 is exact with
AVX512-VNNI or AVX-VNNI and on ARM64, and saturates pairs of products to int16 on AVX2 without VNNI
(VPMADDUBSW). So the exact products every caller relies on (the "directml" arithmetic, the
"onnxruntime" arithmetic on a host that does not saturate, compare's ideal values) never go in as
uint8 x int8 on a saturating host.

Where the "onnxruntime" arithmetic asks for onnxruntime's saturated sums on a host whose
onnxruntime saturates, the onnxruntime engine makes them with that same kernel (``saturating``:
B goes in as its raw int8 codes), as fast as an exact product; the numpy engine has no such kernel
(``saturates_u8s8`` False), and the kernels add ``kernels/u8s8.py``'s correction to its exact sums
instead. ``DML_EP_ENGINE`` in the environment sets the default engine.
"""

from __future__ import annotations

import functools
import os
import weakref

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from ..core.choices import ENGINES
from ..core.errors import DmlEpError
from ..core.graph import internal_model
from ..ort.reference import cpu_session
from .arithmetic import host_saturates_u8s8
from .kernels.integer_gemm import FLOAT32_EXACT, exact_matmul, weight_blocks
from .kernels.mlas_sgemm import logical_cores

INT8_SHIFT = 128  # int8 code + 128 = the same value's uint8 code, one XOR of the sign bit
WIDEST_INPUT = 255  # |a - za| for uint8 codes (int8 ones are shifted into uint8 first)
# Thread choice (see OnnxruntimeEngine._threads): a product runs on a pool of a thread per core when
SMALL_PRODUCT = 1 << 28  # ... it has at least this many multiply-adds per call,
LARGE_OPERAND = 1 << 20  # ... or A has at least this many codes (rows * K, 1 MiB),
MANY_COLUMNS = 1 << 14  # ... or B is a stack of single columns (depthwise) met by this many rows in all


def default_engine() -> str:
    """``DML_EP_ENGINE`` if set, else the fastest exact engine."""
    return os.environ.get("DML_EP_ENGINE") or "onnxruntime"


def get_engine(name: str | None = None):
    """The engine called ``name`` (default: :func:`default_engine`)."""
    name = name or default_engine()
    if name not in ENGINES:
        raise DmlEpError(f"unknown engine {name!r} (choose from {', '.join(ENGINES)})")
    return _ENGINES[name]()


def as_uint8(codes: np.ndarray, zero_point):
    """8-bit codes and their zero point as uint8 codes of the same differences (int8: + 128)."""
    if codes.dtype == np.uint8:
        return codes, zero_point
    return np.bitwise_xor(codes.view(np.uint8), np.uint8(0x80)), int(zero_point) + INT8_SHIFT


def centred(b: np.ndarray, b_zero_point: np.ndarray, dtype=np.int64) -> np.ndarray:
    """``b - zb`` with ``zb`` per column (shape ``b.shape[:-2] + (N,)``) or a scalar."""
    zero_point = np.expand_dims(b_zero_point, -2) if b_zero_point.ndim else b_zero_point
    return np.subtract(b, zero_point, dtype=dtype)


def fits_float32(b: np.ndarray, b_zero_point: np.ndarray) -> bool:
    """Whether every ``sum_k (a - za) * (b - zb)`` is below 2^24 in magnitude for any input codes,
    so that float32 holds it exactly."""
    column_bound = np.abs(centred(b, b_zero_point)).sum(axis=-2) * WIDEST_INPUT
    return bool(column_bound.max(initial=0) < FLOAT32_EXACT)


def content_key(*arrays) -> tuple:
    """Arrays by dtype, shape and a digest of their bytes (None stays None): equal keys, equal arrays."""
    import hashlib  # here: importing it loads OpenSSL, 3.5 MB of memory a model without integer products never uses

    key: list[tuple | None] = []
    for array in arrays:
        if array is None:
            key.append(None)
            continue
        array = np.asarray(array)
        key.append((array.dtype.str, array.shape, hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=32).digest()))
    return tuple(key)


class Engine:
    """What both engines share: one product per distinct B, zero point and thread count, for
    as long as a kernel holds it. quantize_static writes one weight DequantizeLinear for a weight
    that several nodes read; EnsureUniqueDQForNodeUnit gives each node its copy, and each becomes a
    node of its own with the same filter: they share one product (one session, one prepacked B)."""

    name: str
    compiled_kernels: bool  # whether the kernels around the sums run compiled (else their numpy twins)
    saturates_u8s8: bool  # whether it can make uint8 x int8 sums saturated as the host's onnxruntime does

    def __init__(self):
        self._products = weakref.WeakValueDictionary()

    def product(self, b: np.ndarray, b_zero_point, constant: bool = True, rows=None, saturating: bool = False):
        """The product for B (``constant``: B bound now; else B comes with each call, and only its
        dtype and rank matter). ``rows`` is how many rows of A a call is expected to bring.
        ``saturating``: onnxruntime's saturated uint8 x int8 sums instead of the exact ones (only
        where ``saturates_u8s8``)."""
        if saturating and not self.saturates_u8s8:
            raise ValueError(f"the {self.name} engine has no saturating uint8 x int8 product on this host")
        threads = self._threads(b, rows)
        b_key = content_key(b) if constant else (b.dtype.str, b.ndim)
        key = (b_key, content_key(b_zero_point), constant, threads, saturating)
        made = self._products.get(key)
        if made is None:
            made = self._products[key] = self._make(b, b_zero_point, constant, threads, saturating)
        return made

    def _threads(self, b: np.ndarray, rows) -> int:
        return 1

    def _make(self, b, b_zero_point, constant: bool, threads: int, saturating: bool):
        """A new product (each engine makes its own)."""
        raise NotImplementedError


class NumpyEngine(Engine):
    """float32 BLAS in exact K-blocks."""

    name = "numpy"
    compiled_kernels = False
    saturates_u8s8 = False

    def _make(self, b, b_zero_point, constant, threads, saturating) -> "NumpyProduct":
        return NumpyProduct(b, b_zero_point, constant)


class NumpyProduct:
    """``a -> sum_k (a - za) * (b - zb)`` for one B, prepared: centred in float32, with
    K-blocks exact against inputs centred on 128 (|a - 128| <= 128), and the column sums that
    put the input zero point back. A B that is not ``constant`` comes with each call."""

    def __init__(self, b: np.ndarray, b_zero_point, constant: bool = True):
        self.b_zero_point = np.asarray(b_zero_point, np.int64)
        if constant:
            self.b = centred(b, self.b_zero_point, np.float32)
            self.blocks = weight_blocks(np.swapaxes(self.b, -1, -2), INT8_SHIFT)
            self.column_sums = self.b.sum(axis=-2, keepdims=True, dtype=np.float64)
            self.dtype = np.float32 if fits_float32(b, self.b_zero_point) else np.int32

    def __call__(self, a: np.ndarray, a_zero_point, b: np.ndarray | None = None) -> np.ndarray:
        if b is not None:
            return NumpyProduct(b, self.b_zero_point)(a, a_zero_point)
        a, a_zero_point = as_uint8(a, a_zero_point)
        acc = exact_matmul(np.subtract(a, INT8_SHIFT, dtype=np.float32), self.b, self.blocks).astype(np.float64, copy=False)
        acc += (INT8_SHIFT - float(a_zero_point)) * self.column_sums
        return acc.astype(self.dtype)


class OnnxruntimeEngine(Engine):
    """onnxruntime's MatMulInteger (MatMulIntegerToFloat with unit scales where float32 is exact)."""

    name = "onnxruntime"
    compiled_kernels = True

    @functools.cached_property
    def saturates_u8s8(self) -> bool:  # type: ignore[override]
        """Whether the host's onnxruntime saturates uint8 x int8 pairs. Measured at the first
        product, so that a model with none makes no probe session."""
        return host_saturates_u8s8()

    @property
    def signed_b(self) -> bool:
        """Whether an exact product may take B as int8: only where the host does not saturate."""
        return not self.saturates_u8s8

    def _make(self, b, b_zero_point, constant, threads, saturating) -> "OnnxruntimeProduct":
        return OnnxruntimeProduct(b, b_zero_point, constant, threads, signed_b=saturating or self.signed_b)

    def _threads(self, b: np.ndarray, rows) -> int:
        """``rows``, the rows of A a call is expected to bring, sizes the session's thread pool: a
        pool of a thread per core for a product of at least ``SMALL_PRODUCT`` multiply-adds, or
        whose A has at least ``LARGE_OPERAND`` codes, or a stack of single-column Bs (a depthwise
        convolution: one [rows, 9] x [9, 1] product per channel) met by at least ``MANY_COLUMNS``
        rows in all; other products run on the calling thread alone.

        Measured on a 2-core Xeon (medians of 30 interleaved calls, each followed by one numpy pass
        over the result as the requantize step makes; time on two threads / time on one). Waking a
        sleeping pool thread and then reading the half of the result it wrote from the other core's
        cache cost more than the second core saves for most GEMMs under 2e8 multiply-adds:
        ResNet-50's 784x1152x128 1.20, 196x2304x256 1.27, 3136x256x64 1.25, 3136x64x256 1.09,
        MobileNet's 1x1 convolutions 1.3-2.1, transformer 128x768x768 1.54, 256x768x768 1.33.
        Larger ones gain: 128x768x3072 0.87, 512x1536x384 0.90, 256x768x3072 0.79, 512x768x3072
        0.73 (512x768x768, 3e8, still 1.07). Under 2e8, the GEMMs that gain have a large A:
        3136x576x64 0.93, 12544x147x64 0.94, 6272x576x64 0.77, and A's size separates them from
        those that lose (784x1152, 3136x256, 12544x64 and 2048x256 rows x K all lose). A stack of
        single columns, tiny products each, gains once it has some 16k rows in all (onnxruntime
        splits the stack's products between the threads): 144 x 3136x9x1 0.65, 32 x 12544x9x1
        0.67, 576 x 49x9x1 0.84, 32 x 784x9x1 0.91, but not 64 x 196x9x1 (1.16), 32 x 196x9x1
        (1.5); batched
        products with more columns follow the rules above (attention's 12 x 128x64x128 1.23;
        groups of 3: 1.2-1.6). Each pool is a thread.
        The pools sleep between runs instead of spinning: dozens of pools spinning would take the
        cores from each other and from the numpy work between two GEMMs. On a machine whose other
        core is busy, a pool's second thread seldom gets to run and the caller does the work
        alone, as fast as on one thread.
        (onnxruntime's global thread pool would share one pool, but once set it refuses every
        session of the process that has a pool of its own, the user's included.) The sessions'
        outputs come from one shared memory arena, not an arena per session."""
        if rows is None:
            return logical_cores()
        k, n = b.shape[-2:]
        stacked = b.ndim > 2 and n == 1 and rows * int(np.prod(b.shape[:-2])) >= MANY_COLUMNS
        large = rows * k * n >= SMALL_PRODUCT or rows * k >= LARGE_OPERAND or stacked
        return logical_cores() if large else 1


class OnnxruntimeProduct:
    """One onnxruntime MatMulInteger session for one B: an initializer when ``constant``, else B
    comes with each call (of the dtype and rank given here). An int8 B goes in as int8 where
    ``signed_b``, else shifted to uint8 (exact on every CPU).

    Its zero point goes in as MatMulInteger's per-column ``b_zero_point`` where onnxruntime takes
    that shape (B of rank 2, or a scalar); otherwise B is multiplied uncentred and
    ``zb * sum_k (a - za)`` is taken off after.
    """

    def __init__(self, b: np.ndarray, b_zero_point, constant: bool, threads: int, signed_b: bool):
        self.b_dtype = b.dtype
        self.signed_b = signed_b
        zero_point = np.asarray(b_zero_point, np.int64)
        self.late_zero_point = None
        if zero_point.ndim and not (b.ndim == 2 and zero_point.ndim == 1):  # a shape MatMulInteger refuses
            if np.all(zero_point == zero_point.flat[0]):
                zero_point = zero_point.reshape(-1)[0]
            else:
                self.late_zero_point, zero_point = zero_point, np.zeros((), np.int64)
        b_zero_point = numpy_helper.from_array(self._b_codes(zero_point), "b_zero_point")
        inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, None),
                  helper.make_tensor_value_info("a_zero_point", TensorProto.UINT8, [])]
        if constant:
            initializers = [b_zero_point, numpy_helper.from_array(self._b_codes(b), "b")]
        else:
            initializers = [b_zero_point]
            inputs.append(helper.make_tensor_value_info("b", b_zero_point.data_type, [None] * b.ndim))
        node = helper.make_node("MatMulInteger", ["a", "b", "a_zero_point", "b_zero_point"], ["y"])
        output = helper.make_tensor_value_info("y", TensorProto.INT32, None)
        graph = helper.make_graph([node], "integer_product", inputs, [output], initializers)
        self.session = cpu_session(internal_model(graph, 13), threads=threads, spinning=False, shared_arena=True)
        # The session's own run, without the Python wrapper's per-call feed checks (about 2 us of
        # a 6 us call for a small product): these feeds are dml_ep's, made to the model above.
        self._run, self._options = self.session._sess.run, ort.RunOptions()

    def _b_codes(self, codes: np.ndarray) -> np.ndarray:
        """B's codes (or zero points) as the engine multiplies them: int8 kept where exact, else uint8."""
        if self.b_dtype == np.uint8 or self.signed_b:
            return np.asarray(codes).astype(self.b_dtype, copy=False)
        return (np.asarray(codes, np.int64) + INT8_SHIFT).astype(np.uint8)

    def __call__(self, a: np.ndarray, a_zero_point, b: np.ndarray | None = None) -> np.ndarray:
        a, a_zero_point = as_uint8(a, a_zero_point)
        feeds = {"a": np.ascontiguousarray(a), "a_zero_point": np.asarray(a_zero_point, np.uint8)}
        if b is not None:
            feeds["b"] = np.ascontiguousarray(self._b_codes(b))
        acc = self._run(["y"], feeds, self._options)[0]
        if self.late_zero_point is not None:
            row_sums = np.subtract(a.sum(axis=-1, keepdims=True, dtype=np.int64), a.shape[-1] * int(a_zero_point))
            acc -= (row_sums * np.expand_dims(self.late_zero_point, -2)).astype(np.int32)
        return acc


_ENGINES = {"numpy": functools.lru_cache(maxsize=1)(NumpyEngine), "onnxruntime": functools.lru_cache(maxsize=1)(OnnxruntimeEngine)}
