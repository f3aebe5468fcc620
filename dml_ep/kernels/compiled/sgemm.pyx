"""A float32 GEMM panel summed in k order from zero, as MLAS's SGEMM kernels sum one (the numpy
twin is ``kernels.mlas_sgemm.panel_sum``): ``fmaf`` per product on hosts whose MLAS fuses, else a
multiply then an add, each rounded to float32 (contraction is off in every build: setup.py). The
sums of a tile of C stay in registers over all of K (sgemm_tile.h); each element still takes its
products in k order."""

cdef extern from "sgemm_tile.h" nogil:
    int TILE_ROWS
    int TILE_COLUMNS
    void dml_ep_sgemm_tile_fused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* b, Py_ssize_t b_k, float* c,
                                 Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)
    void dml_ep_sgemm_tile_unfused(const float* a, Py_ssize_t a_row, Py_ssize_t a_k, const float* b, Py_ssize_t b_k, float* c,
                                   Py_ssize_t c_row, Py_ssize_t rows, Py_ssize_t columns, Py_ssize_t depth)


def panel_sum(const float[:, :, :] a, const float[:, :, ::1] b, float[:, :, ::1] out, bint fused):
    """``out`` ({batch, M, N}) = ``a`` {batch, M, K} x ``b`` {batch, K, N}, k by k from zero."""
    cdef Py_ssize_t batch = a.shape[0], rows = a.shape[1], depth = a.shape[2], columns = b.shape[2]
    cdef Py_ssize_t a_row = a.strides[1] // 4, a_k = a.strides[2] // 4
    cdef Py_ssize_t g, ti, tj, i, j, tall = TILE_ROWS, wide = TILE_COLUMNS
    if rows == 0 or columns == 0 or depth == 0:
        return
    with nogil:
        for g in range(batch):
            for ti in range((rows + tall - 1) // tall):
                i = ti * tall
                for tj in range((columns + wide - 1) // wide):
                    j = tj * wide
                    if fused:
                        dml_ep_sgemm_tile_fused(&a[g, i, 0], a_row, a_k, &b[g, 0, j], columns, &out[g, i, j], columns,
                                                min(TILE_ROWS, rows - i), min(TILE_COLUMNS, columns - j), depth)
                    else:
                        dml_ep_sgemm_tile_unfused(&a[g, i, 0], a_row, a_k, &b[g, 0, j], columns, &out[g, i, j], columns,
                                                  min(TILE_ROWS, rows - i), min(TILE_COLUMNS, columns - j), depth)
