"""Layer 4, the real DML EP's decisions: its kernel table per release (``kernel_registry``, generated data in
``data/``), its support queries (``support_queries``) and where it places every node (``placement``: GetCapability and
GetCpuPreferredNodes replayed).
"""
