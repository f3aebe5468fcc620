"""Layer 9, other tools' formats: DxDispatch models (``dxdispatch``), Polygraphy's files (``polygraphy_json``)
and its ``polygraphy run`` plugin (``polygraphy_plugin``), and the ONNX backend (``backend``).
"""
