"""``python -m dml_ep`` and the ``dml-ep`` command: the CLI, or one line saying that no onnxruntime
is installed (the CLI's modules import it, so they are imported only once it is there); ``--version``
answers either way."""

import sys

from .errors import missing_runtime
from .version import __version__


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    missing = missing_runtime()
    if missing is not None:
        if args[:1] == ["--version"]:
            import numpy
            import onnx

            print(f"dml-ep {__version__} (onnxruntime not installed: pip install 'dml_ep[cpu]'; onnx {onnx.__version__}, "
                  f"numpy {numpy.__version__})")
            return 0
        print(f"dml-ep: error: {missing}", file=sys.stderr)
        return 2
    from .cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
