"""The DirectML operators dml_ep models: one module per operator, and one table.

Each operator module holds what dml_ep knows of its operator: the desc dataclass with its support
tables and validation, the importers from ONNX, the kernel, compare's exact value (or None for an
operator that does not quantize), layout facts, and its ``OPERATORS`` entries
(:class:`~dml_ep.operators.base.Operator`):

- ``quantized_linear_convolution``: DML_OPERATOR_QUANTIZED_LINEAR_CONVOLUTION (QLinearConv)
- ``quantized_linear_matrix_multiply``: DML_OPERATOR_QUANTIZED_LINEAR_MATRIX_MULTIPLY (QLinearMatMul)
- ``element_wise_quantized_linear_add``: DML_OPERATOR_ELEMENT_WISE_QUANTIZED_LINEAR_ADD (com.microsoft QLinearAdd)
- ``element_wise_add1``: DML_OPERATOR_ELEMENT_WISE_ADD1 (Add, Sum, com.microsoft.dml DmlFusedAdd/DmlFusedSum)
- ``activation``: DML_OPERATOR_ACTIVATION_* and ELEMENT_WISE_CLIP (fused into ADD1, or standalone)

Shared: ``base`` (the desc base class, support-table rules, type sets, the ``Operator`` entry),
``importing`` (the node context, ``Fallback``, desc placement and parameter checks), and
``registration``: the ONNX ops each importer takes (``REGISTRATIONS``) and the operators by
``DML_OPERATOR_TYPE`` (``OPERATORS``). The kernels' shared plumbing is ``dml_ep.numerics.kernels``.

This package imports nothing itself, so that its modules can be imported one at a time.
"""
