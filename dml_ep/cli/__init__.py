"""Layer 12, the command line: its grammar (``arguments``) and each command's parse, call and write
(``commands``); what ``--version`` says is ``dml_ep.core.about``.
"""
