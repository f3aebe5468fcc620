"""Layer 6, planning: ONNX node -> desc or fallback by the operator table (``importer``), model -> rewrites ->
DirectML graphs split -> plan (``planner``, the one planning entry point), and the plan itself (``plan``).
"""
