"""A float32 GEMM panel summed in k order from zero, as MLAS's SGEMM kernels sum one (the numpy
twin is ``kernels.mlas_sgemm.panel_sum``): ``fmaf`` per product on hosts whose MLAS fuses, else a
multiply then an add, each rounded to float32 (contraction is off in every build: setup.py)."""

from libc.math cimport fmaf


def panel_sum(const float[:, :, :] a, const float[:, :, :] b, float[:, :, ::1] out, bint fused):
    """``out`` (zeros, {batch, M, N}) += ``a`` {batch, M, K} x ``b`` {batch, K, N}, k by k."""
    cdef Py_ssize_t batch = a.shape[0], rows = a.shape[1], depth = a.shape[2], columns = b.shape[2]
    cdef Py_ssize_t g, i, k, j
    cdef float x, product
    cdef float* y
    with nogil:
        for g in range(batch):
            for i in range(rows):
                y = &out[g, i, 0]
                for k in range(depth):
                    x = a[g, i, k]
                    if fused:
                        for j in range(columns):
                            y[j] = fmaf(x, b[g, k, j], y[j])
                    else:
                        for j in range(columns):
                            product = x * b[g, k, j]
                            y[j] = y[j] + product
