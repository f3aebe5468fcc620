"""Layer 0, the foundations: typed errors (``errors``), DirectML's enums, feature levels and tensor descs
(``enums``, ``feature_levels``, ``tensor_desc``), onnxruntime's releases as dml_ep models them (``releases``), the
choices the API and CLI offer (``choices``), 4-bit values two to a byte (``nibbles``), reading and checking ONNX models
(``graph``), writing files safely (``files``), memory accounting (``memory``) and SIGTERM as an exception (``sigterm``).

``errors``, ``feature_levels``, ``releases`` and ``choices`` import no numpy, onnx or onnxruntime: the CLI's parser is
built from them alone. This package imports nothing itself.
"""
