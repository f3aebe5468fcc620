"""Layer 11, sweeps: a task per model and settings (``tasks``), their SQLite database (``db``), running them on
Dask or in order (``run``) and the summary page (``page``).
"""
