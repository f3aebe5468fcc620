"""Layer 2, arithmetic: dml_ep's arithmetics and the host's (``arithmetic``), the integer engines that
compute exact sums (``engines``), and the code the kernels share (``kernels``, with the compiled kernels).
"""
