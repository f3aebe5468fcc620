"""The ONNX ops the real EP builds as small DirectML graphs (one module each, with ``parts``): each
part is a node of an operator row of :mod:`dml_ep.operators.registration`; their rows are ``registration.GRAPHS``.
"""
