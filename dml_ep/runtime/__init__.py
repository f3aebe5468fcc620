"""Layer 8, running a plan: the executor (DirectML nodes by dml_ep's kernels, the rest by onnxruntime), the
onnxruntime-shaped ``InferenceSession`` (``session``) with its IOBinding and profiles, inputs from files or drawn
at random (``inputs``), and inspect's plan, for shapes or of a run (``inspection``).
"""
