"""Layer 1, onnxruntime: its CPU (and DML) sessions as references (``reference``) and its type and shape
inference (``inference``).
"""
