"""A float32 GEMM panel summed in k order from zero, as MLAS's SGEMM kernels sum one (the numpy
twin is ``kernels.mlas_sgemm.panel_sum``): ``fmaf`` per product on hosts whose MLAS fuses, else a
multiply then an add, each rounded to float32 (contraction is off in every build: setup.py). As
MLAS does, B is copied 16 columns at a time into a contiguous panel, which every tile of rows then
reads; the sums of a tile of C stay in registers over all of K (sgemm_tile.h). Each element still
takes its products in k order."""

from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cdef extern from "sgemm_tile.h" nogil:
    int TILE_ROWS
    int TILE_COLUMNS
    void dml_ep_sgemm_tile_fused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* panel, float* c,
                                 Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)
    void dml_ep_sgemm_tile_unfused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* panel, float* c,
                                   Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)


def panel_sum(const float[:, :, :] a, const float[:, :, :] b, float[:, :, :] out, bint fused):
    """``out`` ({batch, M, N}) = ``a`` {batch, M, K} x ``b`` {batch, K, N} (B's and the output's rows contiguous),
    k by k from zero."""
    cdef Py_ssize_t batch = a.shape[0], rows = a.shape[1], depth = a.shape[2], columns = b.shape[2]
    cdef Py_ssize_t a_row = a.strides[1] // 4, a_k = a.strides[2] // 4, c_row = out.strides[1] // 4
    cdef Py_ssize_t g, ti, tj, i, j, k, width, tall = TILE_ROWS, wide = TILE_COLUMNS
    cdef float* panel
    if rows == 0 or columns == 0 or depth == 0:
        return
    if out.strides[2] != sizeof(float) or b.strides[2] != sizeof(float):
        raise ValueError("B's and the output's rows must be contiguous")
    panel = <float*> malloc(depth * wide * sizeof(float))
    if panel == NULL:
        raise MemoryError("no memory for a GEMM panel")
    with nogil:
        for g in range(batch):
            for tj in range((columns + wide - 1) // wide):
                j = tj * wide
                width = min(wide, columns - j)
                if width < wide:
                    memset(panel, 0, depth * wide * sizeof(float))
                for k in range(depth):
                    memcpy(panel + k * wide, &b[g, k, j], width * sizeof(float))
                for ti in range((rows + tall - 1) // tall):
                    i = ti * tall
                    if fused:
                        dml_ep_sgemm_tile_fused(&a[g, i, 0], a_row, a_k, panel, &out[g, i, j], c_row, min(tall, rows - i), width, depth)
                    else:
                        dml_ep_sgemm_tile_unfused(&a[g, i, 0], a_row, a_k, panel, &out[g, i, j], c_row, min(tall, rows - i), width, depth)
    free(panel)
