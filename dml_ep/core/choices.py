"""The choices dml_ep's API and command line offer (arithmetics, engines, references, candidates)
and their defaults, in a module that imports nothing: the command line's parser is built from it
(``--help``) without numpy, onnx or onnxruntime, and the modules that act on them import them from here."""

ARITHMETICS = ("directml", "onnxruntime")  # dml_ep.numerics.arithmetic.Arithmetic's modes
ENGINES = ("onnxruntime", "numpy")  # dml_ep.numerics.engines: what computes the quantized products' exact integer sums
CPU_REFERENCES = ("ort", "ort-exact", "ort-unfused")  # dml_ep.ort.reference: onnxruntime's CPU EP, three ways
DML_REFERENCE = "dml"  # the real DML EP
REFERENCES = CPU_REFERENCES + (DML_REFERENCE,)
CANDIDATES = ("dml_ep", "ort", "ort-exact")  # dml_ep.conformance.compare: what is compared with the reference
FLOAT_ATOL = 1e-5  # dml_ep.reports.report: Polygraphy's default tolerances, for float tensors without a quantized step
FLOAT_RTOL = 1e-5
DEFAULT_DB = "dml-ep-sweep.db"  # dml_ep.sweep.run: a sweep's database, unless given
