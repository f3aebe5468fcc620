"""An element-wise operator of two 8-bit inputs as a table lookup: ``out = table[a << 8 | b]``,
one pass reading both inputs through their strides (QLinearAdd's numpy twin builds an index
array, then gathers).

The inputs are walked as rows of a span (``dml_ep.numerics.kernels.strided_rows``): ``*_rows`` are each
row's first element (byte offsets from ``a`` and ``b``, the addresses of the inputs' first
elements, which the caller keeps alive), and ``*_step`` the input's stride along the span (0:
broadcast, constant over it; 1: dense); ``out`` is dense, row after row.
"""

from libc.stdint cimport int64_t, uint8_t


def lookup(const uint8_t[::1] table, size_t a, const int64_t[::1] a_rows, Py_ssize_t a_step,
           size_t b, const int64_t[::1] b_rows, Py_ssize_t b_step, uint8_t[::1] out, Py_ssize_t span):
    """``out[r * span + i] = table[a[a_rows[r] + i * a_step] << 8 | b[b_rows[r] + i * b_step]]``."""
    cdef Py_ssize_t rows = a_rows.shape[0], r, i
    cdef const uint8_t* t = &table[0]
    cdef const uint8_t* x
    cdef const uint8_t* y
    cdef const uint8_t* line
    cdef uint8_t* o
    with nogil:
        for r in range(rows):
            x, y, o = <const uint8_t*>a + a_rows[r], <const uint8_t*>b + b_rows[r], &out[r * span]
            if a_step == 1 and b_step == 1:
                for i in range(span):
                    o[i] = t[(<Py_ssize_t>x[i] << 8) | y[i]]
            elif b_step == 0:  # one row of the table
                line = t + y[0]
                for i in range(span):
                    o[i] = line[<Py_ssize_t>x[i * a_step] << 8]
            elif a_step == 0:  # one column of the table
                line = t + (<Py_ssize_t>x[0] << 8)
                for i in range(span):
                    o[i] = line[y[i * b_step]]
            else:
                for i in range(span):
                    o[i] = t[(<Py_ssize_t>x[i * a_step] << 8) | y[i * b_step]]
