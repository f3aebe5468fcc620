"""A float32 GEMM panel summed in k order from zero, as MLAS's SGEMM kernels sum one (the numpy
twin is ``kernels.mlas_sgemm.panel_sum``): ``fmaf`` per product on hosts whose MLAS fuses, else a
multiply then an add, each rounded to float32 (contraction is off in every build: setup.py). The
columns go in tiles whose rows of B stay in cache; each element still takes its products in k order."""

from libc.math cimport fmaf

cdef enum:
    TILE = 128  # columns of B and C at a time


def panel_sum(const float[:, :, :] a, const float[:, :, ::1] b, float[:, :, ::1] out, bint fused):
    """``out`` (zeros, {batch, M, N}) += ``a`` {batch, M, K} x ``b`` {batch, K, N}, k by k."""
    cdef Py_ssize_t batch = a.shape[0], rows = a.shape[1], depth = a.shape[2], columns = b.shape[2]
    cdef Py_ssize_t g, tile, start, stop, i, k, j
    cdef float x, product
    cdef float* y
    cdef const float* row
    with nogil:
        for g in range(batch):
            for tile in range((columns + TILE - 1) // TILE):
                start = tile * TILE
                stop = min(start + TILE, columns)
                for i in range(rows):
                    y = &out[g, i, 0]
                    for k in range(depth):
                        x = a[g, i, k]
                        row = &b[g, k, 0]
                        if fused:
                            for j in range(start, stop):
                                y[j] = fmaf(x, row[j], y[j])
                        else:
                            for j in range(start, stop):
                                product = x * row[j]
                                y[j] = y[j] + product
