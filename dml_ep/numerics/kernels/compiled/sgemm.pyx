"""A float32 GEMM panel summed in k order from zero, as MLAS's SGEMM kernels sum one (the numpy
twin is ``kernels.mlas_sgemm.panel_sum``): ``fmaf`` per product on hosts whose MLAS fuses, else a
multiply then an add, each rounded to float32 (contraction is off in every build: setup.py). As
MLAS does, B is first copied 16 columns at a time into contiguous panels (``pack_panels``; a
constant weight's once), which every tile of rows then reads; the sums of a tile of C stay in
registers over all of K (sgemm_tile.h). Each element still takes its products in k order."""

from libc.string cimport memcpy, memset

cdef extern from "sgemm_tile.h" nogil:
    int TILE_ROWS
    int TILE_COLUMNS
    void dml_ep_sgemm_tile_fused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* panel, float* c,
                                 Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)
    void dml_ep_sgemm_tile_unfused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* panel, float* c,
                                   Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)

DEPTH_BLOCK = 64  # rows of B copied together: 64 streams read, 4 KB written per panel


def pack_panels(const float[:, :, :] b, float[:, :, :, ::1] panels):
    """``panels`` ({batch, ceil(N / 16), K, 16}) = B ({batch, K, N}, its rows contiguous) 16 columns
    at a time, the last panel's missing columns 0; K in blocks, so that reads and writes both stay
    on few pages."""
    cdef Py_ssize_t batch = b.shape[0], depth = b.shape[1], columns = b.shape[2], wide = TILE_COLUMNS
    cdef Py_ssize_t g, t, k, kb, k0, k1, j, width, block = DEPTH_BLOCK
    if b.strides[2] != sizeof(float):
        raise ValueError("B's rows must be contiguous")
    if depth == 0 or columns == 0:
        return
    with nogil:
        for g in range(batch):
            for kb in range((depth + block - 1) // block):
                k0 = kb * block
                k1 = min(depth, k0 + block)
                for t in range((columns + wide - 1) // wide):
                    j = t * wide
                    width = min(wide, columns - j)
                    for k in range(k0, k1):
                        memcpy(&panels[g, t, k, 0], &b[g, k, j], width * sizeof(float))
                        if width < wide:
                            memset(&panels[g, t, k, width], 0, (wide - width) * sizeof(float))


def panel_sum(const float[:, :, :] a, const float[:, :, :, ::1] panels, float[:, :, :] out, bint fused):
    """``out`` ({batch, M, N}, its rows contiguous) = ``a`` {batch, M, K} x B, B as ``pack_panels``
    packed it ({batch or 1, ceil(N / 16), K, 16}: one B for every GEMM), k by k from zero."""
    cdef Py_ssize_t batch = a.shape[0], rows = a.shape[1], depth = a.shape[2], columns = out.shape[2]
    cdef Py_ssize_t shared = panels.shape[0] == 1
    cdef Py_ssize_t a_row = a.strides[1] // 4, a_k = a.strides[2] // 4, c_row = out.strides[1] // 4
    cdef Py_ssize_t g, ti, tj, i, j, tall = TILE_ROWS, wide = TILE_COLUMNS
    if rows == 0 or columns == 0:
        return
    if depth == 0:  # an empty sum
        out[:, :, :] = 0
        return
    if out.strides[2] != sizeof(float):
        raise ValueError("the output's rows must be contiguous")
    with nogil:
        for g in range(batch):
            for tj in range((columns + wide - 1) // wide):
                j = tj * wide
                for ti in range((rows + tall - 1) // tall):
                    i = ti * tall
                    if fused:
                        dml_ep_sgemm_tile_fused(&a[g, i, 0], a_row, a_k, &panels[0 if shared else g, tj, 0, 0], &out[g, i, j], c_row, min(tall, rows - i),
                                                min(wide, columns - j), depth)
                    else:
                        dml_ep_sgemm_tile_unfused(&a[g, i, 0], a_row, a_k, &panels[0 if shared else g, tj, 0, 0], &out[g, i, j], c_row,
                                                  min(tall, rows - i), min(wide, columns - j), depth)


cdef extern from "math.h" nogil:
    float fmaf(float x, float y, float z)


def lane_sums(const float[::1] a, float[:, :] sums, const float[:, :] weights=None, const signed char[:, :] codes=None,
              const float[:, :] scales=None, Py_ssize_t block=1):
    """``sums`` ({L, N}, zero on entry): lane j of column n sums ``fmaf(w[k, n], a[k], .)`` over
    k = j (mod L), k increasing, as MLAS's M=1 SQ4BitGemm CompFp32 kernels' vector lanes do (the
    numpy twin is ``kernels.mlas_sqnbit_m1.lane_sums``). The weight {K, N} is ``weights``, or
    ``codes[k, n] * scales[k / block, n]`` rounded to float32 (MLAS's ``(q - zp) * scale`` of a
    4-bit block: the differences ``q - zp`` and their blocks' scales, a quarter of the float
    weight's bytes). Rows are contiguous (a part of a GEMM's columns is a view of them)."""
    cdef bint coded = codes is not None
    cdef Py_ssize_t depth = a.shape[0], columns = sums.shape[1], width = sums.shape[0], k, n
    cdef float x
    cdef float* lane
    cdef const float* row
    cdef const signed char* code
    cdef const float* scale
    if width == 0 or (weights is None) != coded:
        raise ValueError("lanes, and either weights or codes, are needed")
    if coded and (codes.shape[0] != depth or codes.shape[1] != columns or scales is None or scales.shape[1] != columns or block <= 0
                  or scales.shape[0] * block < depth or codes.strides[1] != 1 or scales.strides[1] != sizeof(float)):
        raise ValueError("codes {K, N} and scales {K / block, N} (rows contiguous) do not agree with a {K} and sums {L, N}")
    if not coded and (weights.shape[0] != depth or weights.shape[1] != columns or weights.strides[1] != sizeof(float)):
        raise ValueError("weights {K, N} (rows contiguous) do not agree with a {K} and sums {L, N}")
    if sums.strides[1] != sizeof(float):
        raise ValueError("the rows of sums must be contiguous")
    if columns == 0:
        return
    with nogil:
        for k in range(depth):
            x = a[k]
            lane = &sums[k % width, 0]
            if coded:
                code = &codes[k, 0]
                scale = &scales[k // block, 0]
                for n in range(columns):
                    lane[n] = fmaf(<float>code[n] * scale[n], x, lane[n])
            else:
                row = &weights[k, 0]
                for n in range(columns):
                    lane[n] = fmaf(row[n], x, lane[n])
