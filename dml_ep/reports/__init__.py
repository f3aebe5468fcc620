"""Layer 7, describing a plan or a comparison: one row per plan entry (``node_table``), a comparison's data
(``report``), their metadata (``meta``), the rewritten model (``rewritten_model``), and their renderings as text
(``text``, ``inspect``), HTML (``html``, templates in ``assets/``) and Model Explorer node data (``model_explorer``);
the JSON reports' schema is ``schemas/``.
"""
