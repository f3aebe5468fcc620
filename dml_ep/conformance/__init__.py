"""Layer 10, conformance: comparing dml_ep with onnxruntime output by output and node by node
(``compare``), why an element differs (``causes``), the comparison cases of a command (``cases``: a model, a zoo
data set, a Polygraphy iteration), and ``run``'s runs, checked against a Polygraphy runner's outputs (``runs``).
"""
