"""The ``dml-ep`` command line's grammar: the subcommands, their options and help, and the exit
statuses its epilog lists; ``dml_ep.cli.commands`` binds each subcommand to its handler."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Callable

# Light modules only (tests/package/test_startup.py): --help and --version build this parser without numpy, onnx or onnxruntime.
from ..core.choices import ARITHMETICS, CANDIDATES, DEFAULT_DB, ENGINES, FLOAT_ATOL, FLOAT_RTOL, REFERENCES
from ..core.feature_levels import DEFAULT_FEATURE_LEVEL
from ..core.releases import DEFAULT_RELEASE, RELEASE_NAMES, RELEASES

U8S8_SATURATION = {"auto": None, "on": True, "off": False}

EXIT_STATUS = """exit status:
  0    success
  1    compare, run --load-outputs, sweep: an output out of tolerance
  2    usage or input error (one line on stderr); sweep: a task failed
  3    internal error (--debug shows the traceback)
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM)"""


SAVE_REWRITTEN_HELP = ("also write the graph after onnxruntime's rewrites for the DML EP as an ONNX model that onnxruntime "
                       "loads and Netron shows, each node's placement and DirectML operator in its metadata (dml_ep.*)")


# Options of Polygraphy and onnxruntime's tools that dml-ep spells otherwise or does not need: what to say instead.
OTHER_TOOLS_OPTIONS = {
    "--onnxrt": "dml-ep compare runs onnxruntime's CPU EP itself (choose how with --reference)",
    "--dml-ep": "that is polygraphy run's plugin option; dml-ep compare runs dml_ep itself",
    "--providers": "choose the reference with --reference (ort, ort-exact, ort-unfused, dml)",
    "--execution-provider": "choose the reference with --reference (ort, ort-exact, ort-unfused, dml)",
    "--load-input-data": "--load-inputs",
    "--save-input-data": "--save-inputs",
    "--input-shape": "--input-shapes NAME:[D0,D1,...] (or --shape NAME=D0,D1,...)",
    "--check-error-stat": "dml-ep checks element by element, as Polygraphy's default (elemwise)",
    "--mark-all": "--per-node (or --onnx-outputs mark all)",
    "--verbose": "compare --per-node --only-differing shows each node that differs, with its cause",
}


class _Formatter(argparse.HelpFormatter):
    """argparse's help, with the examples, exit statuses and version line laid out as written
    (descriptions wrap)."""

    def _fill_text(self, text, width, indent):
        if text.startswith(("examples:", "exit status:", "dml-ep ")):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Extend(argparse.Action):
    """``action="extend"`` for every option taking several values: a repeated option adds its values
    (``--arithmetic directml --arithmetic onnxruntime`` is both, as ``--shape`` repeated is), and the
    default stands only for an absent option (argparse's own extend would add to a non-empty one)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*(() if given is None or given is self.default else given), *values])


class _Version(argparse.Action):
    """``--version``: its line (:func:`dml_ep.core.about.version_line`) made only when asked, as it reads
    the installed packages' metadata, which the other commands need not."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ..core.about import version_line

        print(version_line())
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as the one-line ``dml-ep: error: ...`` and exit status 2."""

    def error(self, message):
        print(f"dml-ep: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """``parser.parse_args``, where an unknown option gets a hint: the option of its command it
    looks like, or what dml-ep has for a Polygraphy or onnxruntime option."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        options = [o for action in commands.choices[args.command]._actions for o in action.option_strings]
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{_hint(unknown, options)}")
    return args


def _hint(unknown: list[str], options: list[str]) -> str:
    """For the first unknown option: what dml-ep has for it, or the option it looks like."""
    for token in unknown:
        option = token.split("=", 1)[0]
        if not option.startswith("--"):
            continue
        if option in OTHER_TOOLS_OPTIONS:
            return f" ({option}: {OTHER_TOOLS_OPTIONS[option]})"
        close = difflib.get_close_matches(option, options, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


# Each command's --help ends with these (tests/cli/test_commands.py runs them on a shipped model in place of model.onnx).
EXAMPLES = {
    "inspect": """examples:
  dml-ep inspect model.onnx                                where each node runs, by op type and MACs
  dml-ep inspect model.onnx --nodes --shape input=4,64     every node, for a batch of 4
  dml-ep inspect model.onnx --html plan.html               the graph the real EP runs, as a page""",
    "run": """examples:
  dml-ep run model.onnx --output-dir out                   each output as out/<name>.npy
  dml-ep run model.onnx --save-inputs in.json --save-outputs dml.json   Polygraphy's files
  dml-ep run model.onnx --load-inputs in.json --load-outputs dml.json --atol 1e-3   check against saved outputs""",
    "compare": """examples:
  dml-ep compare model.onnx                                each output against onnxruntime's CPU EP
  dml-ep compare model.onnx --reference ort-exact          against exact uint8 x int8 products (same on every CPU)
  dml-ep compare model.onnx --per-node --only-differing    each node that differs, and why
  dml-ep compare model.onnx --atol 1e-3 --rtol 1e-3 --onnx-outputs mark all   Polygraphy's spellings
  dml-ep compare model.onnx --html report.html             the graph, coloured by differences""",
    "sweep": """examples:
  dml-ep sweep model.onnx --arithmetic directml onnxruntime --report sweep.html   both arithmetics, a summary page
  dml-ep sweep model.onnx --ort-release 1.24+ none --db sweep.db --timeout 600    resumable; a hung task fails
  dml-ep sweep model.onnx --plan-only --feature-level 4_0 6_4 --sequential        plans only, in this process""",
    "report": """examples:
  dml-ep report sweep.db                                   every task of a sweep, as a table
  dml-ep report sweep.db --html sweep.html                 the summary page""",
    "export": """examples:
  dml-ep export model.onnx --dxdispatch dxd                a DxDispatch model in dxd/, to run on real DirectML""",
}


def build_parser(handlers: dict[str, Callable[[argparse.Namespace], int]]) -> argparse.ArgumentParser:
    """The subcommands, sharing --feature-level/--debug and (run, compare, export) the input options,
    each bound to its handler (``handlers``: command -> handler)."""
    common = _Parser(add_help=False)
    # SUPPRESS: unless given after the command, the subcommand leaves the main parser's --debug as it is
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    common.add_argument("--shape", action="append", type=_shape, default=[], metavar="NAME=D0,D1,...",
                        help="an input's shape for the plan and its random values, instead of the declared one "
                             "with symbolic dimensions as 1 (repeatable)")
    common.add_argument("--input-shapes", dest="shape", action=_Extend, nargs="+", type=_polygraphy_shape, metavar="NAME:[D0,D1,...]",
                        help="the same in Polygraphy's spelling: --input-shapes input:[1,3,224,224] mask:[1,128]")
    planning = _Parser(add_help=False)
    planning.add_argument("--feature-level", default=DEFAULT_FEATURE_LEVEL.label, metavar="L",
                          help="DirectML feature level to target, e.g. 4_0 (default: %(default)s)")
    planning.add_argument("--ort-release", "--qdq-rules", dest="qdq_rules", choices=RELEASES, default=DEFAULT_RELEASE, metavar="RELEASE",
                          help="the onnxruntime release whose graph rewrites for DML nodes apply: its QDQ -> QLinear rules "
                               f"and the fusions that changed between releases ({', '.join(RELEASE_NAMES)}; default: %(default)s)")
    planning.add_argument("--no-qdq-fusion", dest="qdq_rules", action="store_const", const=None,
                          help="no QDQ rewrites, as onnxruntime's session.disable_quant_qdq=1")
    files_in = _Parser(add_help=False)
    files_in.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                          help="an input from a .npy or TensorProto .pb file (repeatable)")
    files_in.add_argument("--input-dir", metavar="DIR",
                          help="inputs from <name>.npy or input_<i>.pb files (ONNX test data)")
    drawn = _Parser(add_help=False)
    drawn.add_argument("--seed", type=_non_negative, default=0,
                       help="seed of the random inputs given neither way (default: %(default)s)")
    drawn.add_argument("--val-range", action="append", default=[], metavar="NAME=LO,HI",
                       help="the inclusive range of an input's random values (also Polygraphy's NAME:[LO,HI], and "
                            "[LO,HI] for every input not named; repeatable); default: integers of 32 and 64 bits in "
                            "[0, 1], or within the data of a Gather they index; of 8 and 16 bits, their whole type; "
                            "floats standard normal")
    feeding = [files_in, drawn]
    arithmetic = _Parser(add_help=False)
    arithmetic.add_argument("--arithmetic", choices=ARITHMETICS, default="directml",
                         help="dml_ep's arithmetic (default: %(default)s)")
    products = _Parser(add_help=False)
    products.add_argument("--u8s8-saturation", choices=U8S8_SATURATION, default="auto",
                         help="with --arithmetic onnxruntime, saturate uint8 x int8 product pairs to int16 as "
                              "onnxruntime does on AVX2 CPUs without VNNI; auto: if this CPU is one (default: %(default)s)")
    products.add_argument("--engine", choices=ENGINES, default=None,
                         help="what computes the quantized products' exact integer sums: onnxruntime's MatMulInteger "
                              "or numpy's float32 BLAS in exact blocks; same results (default: $DML_EP_ENGINE, else onnxruntime)")

    tolerance = _Parser(add_help=False)
    tolerance.add_argument("--steps", type=_non_negative, default=0, metavar="N",
                           help="largest difference allowed in quantized steps (LSB), for integer tensors and floats made "
                                "by DequantizeLinear (default: 0, bit-exact)")
    tolerance.add_argument("--atol", action=_Extend, nargs="+", type=_tolerance, default=[], metavar="[NAME:]VALUE",
                           help="Polygraphy's absolute tolerance, in the tensor's own units, for every tensor or the one "
                                f"named (an element passes within --atol or --rtol); default 0 where a tensor has a step, else {FLOAT_ATOL:g}")
    tolerance.add_argument("--rtol", action=_Extend, nargs="+", type=_tolerance, default=[], metavar="[NAME:]VALUE",
                           help=f"Polygraphy's relative tolerance, against |reference| (default 0 where a tensor has a step, else {FLOAT_RTOL:g})")

    parser = _Parser(prog="dml-ep", description="Emulate onnxruntime's DirectML EP on quantized ONNX models.",
                     epilog=EXIT_STATUS, formatter_class=_Formatter)
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    show = commands.add_parser("inspect", parents=[common, planning, *feeding], help="show which DirectML operator runs each node",
                              epilog=EXAMPLES["inspect"], formatter_class=_Formatter,
                               description="Plans for the declared input shapes (--shape to give others), or, with "
                                           "--input or --input-dir, from the tensors of a run on those inputs.")
    show.add_argument("model", metavar="MODEL")
    show.add_argument("--json", metavar="FILE", help="also write the plan, with every desc, as JSON (- for stdout)")
    show.add_argument("--html", metavar="FILE", help="also write the plan as an HTML page: the graph the real EP runs, each node "
                                                     "coloured by where it runs (works offline)")
    show.add_argument("--quiet", action="store_true", help="no progress on stderr")
    show.add_argument("--descs", action="store_true", help="also print each DirectML operator's desc, field by field")
    show.add_argument("--nodes", action="store_true", help="also print every node: where it runs or why it falls back, the nodes "
                                                           "onnxruntime's rewrites made, those planned only when run")
    show.add_argument("--save-rewritten", metavar="FILE", help=SAVE_REWRITTEN_HELP)
    show.add_argument("--model-explorer", metavar="DIR",
                      help="also write Model Explorer node data for the model's nodes, where each runs and its MACs, into DIR "
                           "(must not exist, or be empty), and print the command that opens the model with them (needs the model-explorer extra)")

    run = commands.add_parser("run", parents=[common, planning, *feeding, arithmetic, products, tolerance], help="run a model with dml_ep",
                              epilog=EXAMPLES["run"], formatter_class=_Formatter,
                              description="Runs the model with dml_ep on the inputs given (or seeded random ones) and lists "
                                          "its outputs; with --load-outputs, checks them against saved ones, as polygraphy "
                                          "run --load-outputs does (exit status 1 when one is out of tolerance).")
    run.add_argument("model", metavar="MODEL")
    run.add_argument("--output-dir", metavar="DIR", help="write each output to DIR/<name>.npy")
    run.add_argument("--save-outputs", metavar="FILE", help="write the outputs as Polygraphy's RunResults (runner 'dml_ep')")
    run.add_argument("--save-inputs", metavar="FILE", help="write the inputs as Polygraphy's input data")
    run.add_argument("--load-inputs", metavar="FILE", help="inputs from Polygraphy's input data: one run per feed dict")
    run.add_argument("--load-outputs", metavar="FILE[:RUNNER]",
                     help="check the outputs against RUNNER's in a RunResults file, iteration by iteration, within --steps "
                          "(integer outputs), --atol and --rtol (default runner: its one other than dml_ep)")

    compare = commands.add_parser(
        "compare", parents=[common, planning, *feeding, arithmetic, products, tolerance], epilog=EXAMPLES["compare"], formatter_class=_Formatter,
        help="compare dml_ep with onnxruntime's CPU EP, or with the real DML EP",
        description="Integer outputs, and float outputs made by DequantizeLinear, compare in quantized steps (LSB) within --steps; an "
                    f"element also passes within Polygraphy's --atol or --rtol, which are {FLOAT_ATOL:g} and {FLOAT_RTOL:g} for other "
                    "float outputs unless given. A directory laid out as the ONNX model zoo (model.onnx or one *.onnx, "
                    "test_data_set_*/input_<i>.pb and output_<i>.pb) is compared on each data set, whose shipped outputs are checked "
                    "against both sides: they fail the result only where onnxruntime matches them and dml_ep does not.")
    compare.add_argument("models", nargs="+", metavar="MODEL_OR_DIR_OR_GLOB")
    compare.add_argument("--reference", choices=REFERENCES, default="ort",
                         help="onnxruntime CPU as deployed, with exact u8s8 GEMMs, or without QDQ fusions; or dml, the real "
                              "DML EP (onnxruntime-directml and a DirectX 12 device) (default: %(default)s)")
    compare.add_argument("--candidate", choices=CANDIDATES, default="dml_ep",
                         help="what is compared with the reference: dml_ep, or another onnxruntime configuration, "
                              "e.g. --candidate ort --reference ort-unfused says why QDQ fusion changes outputs (default: %(default)s)")
    compare.add_argument("--per-node", action="store_true", help="compare every intermediate value and each DML node in isolation")
    compare.add_argument("--onnx-outputs", action=_Extend, nargs="+", type=_mark_all, metavar="mark all",
                         help="Polygraphy's spelling of --per-node (only 'mark all': every intermediate value)")
    compare.add_argument("--only-differing", action="store_true",
                         help="with --per-node, list only the nodes that differ (in isolation or propagated)")
    compare.add_argument("--iterations", type=_positive, default=1, metavar="N",
                         help="compare on N sets of random inputs, of seeds SEED, SEED+1, ... (Polygraphy's --iterations; default: %(default)s)")
    compare.add_argument("--json", metavar="FILE", help="also write the reports as JSON (- for stdout)")
    compare.add_argument("--html", metavar="FILE", help="also write the comparison as an HTML page (one model): the graph, each node "
                                                        "coloured by where it runs or by its largest difference; compares node by node")
    compare.add_argument("--model-explorer", metavar="DIR",
                         help="also write Model Explorer node data for the model's nodes into DIR (must not exist, or be empty): "
                              "where each runs, its MACs and its largest difference, in isolation and propagated (compares "
                              "node by node, as --per-node; the largest over all data sets or iterations); one model, "
                              "--candidate dml_ep; prints the command that opens the model with them (needs the model-explorer extra)")
    compare.add_argument("--quiet", action="store_true", help="no progress on stderr")
    compare.add_argument("--save-rewritten", metavar="FILE", help=SAVE_REWRITTEN_HELP + " (one model; the graph of the run compared)")
    polygraphy = compare.add_argument_group(
        "Polygraphy's JSON files", "as polygraphy run --save-outputs/--save-inputs writes them (a file, or a "
        "directory of per-iteration files), holding the runs of one model")
    polygraphy.add_argument("--load-outputs", metavar="FILE[:RUNNER]",
                            help="compare with RUNNER's outputs in a RunResults file instead of running the reference "
                                 "(default: its one runner other than dml_ep; RUNNER may be a prefix of the name); "
                                 "nodes, when compared, are against --reference")
    polygraphy.add_argument("--load-inputs", metavar="FILE",
                            help="inputs from Polygraphy's input data: one comparison per feed dict, paired with --load-outputs' iterations")
    polygraphy.add_argument("--save-outputs", metavar="FILE",
                            help="write the outputs of dml_ep (runner 'dml_ep') and of the reference "
                                 "('onnxruntime-REFERENCE') as a RunResults file, one iteration per comparison")
    polygraphy.add_argument("--save-inputs", metavar="FILE", help="write the inputs as Polygraphy's input data")

    export = commands.add_parser(
        "export", parents=[common, planning, *feeding, arithmetic, products], help="write the plan as a DxDispatch model, to run on real DirectML",
        epilog=EXAMPLES["export"], formatter_class=_Formatter,
        description="Runs the model with dml_ep on the inputs given (or seeded random ones) and writes its DirectML "
                    "operators as a DxDispatch model: DIR/model.json, its resources, dml_ep's expected outputs and a "
                    "README.txt with the DxDispatch command line. Values the CPU fallback makes are stored as resources.")
    export.add_argument("model", metavar="MODEL")
    export.add_argument("--dxdispatch", metavar="DIR", required=True, help="the directory to write (must not exist, or be empty)")

    sweep = commands.add_parser(
        "sweep", parents=[common, drawn, products, tolerance], help="compare many models under many settings, on a Dask cluster",
        epilog=EXAMPLES["sweep"], formatter_class=_Formatter,
        description="Compares every model under every --arithmetic, --ort-release and --feature-level given (inspect's plan "
                    "with --plan-only), each an independent task on Dask distributed: an embedded cluster of one worker "
                    "process per core, or a running one (--scheduler). Each result is a row of a SQLite database, written "
                    "as it comes: a rerun on the same database skips the tasks done. A task whose model cannot be compared, "
                    "whose worker dies or that runs past --timeout fails with the reason, and the sweep goes on. Exit "
                    "status 2 when a task failed, else 1 when one is out of tolerance.")
    sweep.add_argument("models", nargs="+", metavar="MODEL_OR_DIR_OR_GLOB")
    sweep.add_argument("--arithmetic", dest="arithmetics", action=_Extend, nargs="+", choices=ARITHMETICS, default=["directml"],
                       help="dml_ep's arithmetics to sweep (default: directml)")
    sweep.add_argument("--ort-release", dest="ort_releases", action=_Extend, nargs="+", choices=(*RELEASES, "none"), default=[DEFAULT_RELEASE],
                       metavar="RELEASE", help="the onnxruntime releases whose rewrites to sweep (none: no QDQ rewrites; "
                                               f"{', '.join(RELEASE_NAMES)}; default: {DEFAULT_RELEASE})")
    sweep.add_argument("--feature-level", dest="feature_levels", action=_Extend, nargs="+", default=[DEFAULT_FEATURE_LEVEL.label], metavar="L",
                       help=f"the DirectML feature levels to sweep (default: {DEFAULT_FEATURE_LEVEL.label})")
    sweep.add_argument("--plan-only", action="store_true", help="plan each model as inspect does, without comparing (one task "
                                                                "per model, release and feature level)")
    sweep.add_argument("--reference", choices=REFERENCES, default="ort", help="as compare's (default: %(default)s)")
    sweep.add_argument("--per-node", action="store_true", help="compare every node too, so that each row has its causes")
    sweep.add_argument("--db", metavar="FILE", help="the SQLite database of results, made if missing, resumed if not (default: "
                                                    f"beside --report, with .db for .html; else {DEFAULT_DB})")
    sweep.add_argument("--rerun-failed", action="store_true", help="run the tasks that failed before again")
    sweep.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://HOST:PORT), whose workers "
                                                              "can read the models at the same paths")
    sweep.add_argument("--workers", type=_positive, metavar="N", help="the embedded cluster's worker processes (default: one per core)")
    sweep.add_argument("--sequential", action="store_true", help="run the tasks one after another in this process, without Dask")
    sweep.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="fail a task running longer, and restart its worker")
    sweep.add_argument("--report", metavar="FILE", help="also write the summary page of every row of the database (HTML)")
    sweep.add_argument("--html-dir", metavar="DIR", help="also write each task's own HTML page into DIR (compare --html; "
                                                         "compares node by node), linked from --report's page")
    sweep.add_argument("--quiet", action="store_true", help="no progress on stderr")

    report = commands.add_parser("report", help="show a sweep's database: a table, or the summary page",
                                 epilog=EXAMPLES["report"], formatter_class=_Formatter,
                                 description="Lists every row of a sweep's database (dml-ep sweep --db), and writes the "
                                             "summary page: a sortable, filterable table of models x settings.")
    report.add_argument("db", metavar="DB")
    report.add_argument("--html", metavar="FILE", help="write the summary page (HTML, works offline)")
    report.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    for name, command in commands.choices.items():
        command.set_defaults(handler=handlers[name])
    return parser


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` from ``--shape`` (the last ``=``: an input name may hold one, sizes never)."""
    name, sep, sizes = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=D0,D1,...")
    if not re.fullmatch(r"(0|[1-9]\d*)(,(0|[1-9]\d*))*", sizes):  # 0 too: an empty KV cache (past length 0), as onnxruntime takes it
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are non-negative integers, as in NAME=1,3,224,224")
    return name, tuple(int(size) for size in sizes.split(","))


def _polygraphy_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """Polygraphy's ``NAME:[D0,D1,...]`` of ``--input-shapes`` (the last colon: a name may hold one)."""
    name, sep, sizes = text.rpartition(":")
    if not sep or not name or not re.fullmatch(r"\[\s*(\d+(\s*,\s*\d+)*)?\s*\]", sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME:[D0,D1,...], as in input:[1,3,224,224]")
    digits = re.sub(r"[\s\[\]]", "", sizes)
    return _shape(f"{name}={digits}") if digits else (name, ())


def _tolerance(text: str) -> tuple[str, float]:
    """Polygraphy's ``[NAME:]VALUE`` of ``--atol`` and ``--rtol``: "" names every tensor."""
    name, _, value = text.rpartition(":")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected [NAME:]VALUE, a number, as in 1e-3 or logits:0.01") from None
    if not number >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a tolerance is a number >= 0")
    return name, number


def _mark_all(text: str) -> str:
    """``--onnx-outputs mark all``: the one form dml_ep has (every intermediate value)."""
    if text not in ("mark", "all"):
        raise argparse.ArgumentTypeError(f"{text!r}: dml_ep compares either the graph outputs or, with --onnx-outputs "
                                         "mark all (--per-node), every intermediate value")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: give a number of seconds above 0")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value
