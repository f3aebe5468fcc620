"""Layer 12, the command line: its grammar (``arguments``), each command's parse, call and write (``commands``),
and what ``--version`` says (``about``).
"""
