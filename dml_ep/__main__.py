"""``python -m dml_ep`` and the ``dml-ep`` command: the CLI, or one line saying that no onnxruntime
is installed (the CLI's modules import it, so they are imported only once it is there)."""

import sys

from .errors import missing_runtime


def main(argv=None) -> int:
    missing = missing_runtime()
    if missing is not None:
        print(f"dml-ep: error: {missing}", file=sys.stderr)
        return 2
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
