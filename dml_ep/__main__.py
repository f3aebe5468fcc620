"""``python -m dml_ep`` and the ``dml-ep`` command: the CLI, or one line saying that no onnxruntime
is installed (the commands import it); ``--version`` answers either way. Nothing here, nor what the
parser is built from, imports numpy, onnx or onnxruntime: each command imports what it needs."""

import sys

from .core.errors import missing_runtime


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    missing = missing_runtime()
    if missing is not None:
        if args[:1] == ["--version"]:
            from .core.about import version_line

            print(version_line())
            return 0
        print(f"dml-ep: error: {missing}", file=sys.stderr)
        return 2
    from .cli.commands import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
