"""The ``dml-ep`` command: ``inspect`` a model's plan, ``run`` it, ``compare`` it with onnxruntime,
``export`` it as a DxDispatch model to run on real DirectML.

Exit status (``EXIT_STATUS``): 0 on success, 1 when ``compare`` finds an output out of tolerance,
2 on a usage or input error (one line on stderr, ``dml-ep: error: ...``; for ``compare``, when any
model could not be compared), 3 on an internal error, so that a crash never reads as a conformance
verdict, 130 on Ctrl-C and 143 on SIGTERM (nothing partial left behind). ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import glob
import os
import re
import signal
import sys
import threading
import time

import numpy as np

from . import dxdispatch, files, html_report, model_explorer
from .arithmetic import ARITHMETICS
from .engines import ENGINES
from .compare import CANDIDATES, compare_model, compare_shipped
from .report import FLOAT_ATOL, FLOAT_RTOL, ModelReport, ShippedComparison, TensorComparison, node_label
from .errors import DmlEpError, FeedError, NodeError
from .graph import Loaded, graph_inputs, load_model, one_line
from .importer import DEFAULT_FEATURE_LEVEL
from .passes import DEFAULT_RELEASE, RELEASES
from .passes.dml_fusion import NAME as DML_FUSION
from .planner import Planner
from .node_table import counted, plan_rows
from .inputs import ASSUMED, INTEGERS, input_shapes, load_directory, load_tensor_protos, make_feeds, npy_file_names, zoo_layout
from .plan import DmlNode, node_macs
from .polygraphy_json import inputs_json, load_inputs, load_run_results, pick_runner, run_results_json
from .reference import DML_REFERENCE, REFERENCES, require_dml
from .rewritten_model import model_writer, rewritten_model
from .report_meta import report_meta, versions
from .session import InferenceSession

U8S8_SATURATION = {"auto": None, "on": True, "off": False}

EXIT_STATUS = """exit status:
  0    success
  1    compare: an output out of tolerance
  2    usage or input error (one line on stderr)
  3    internal error (--debug shows the traceback)
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM)"""


SAVE_REWRITTEN_HELP = ("also write the graph after onnxruntime's rewrites for the DML EP as an ONNX model that onnxruntime "
                       "loads and Netron shows, each node's placement and DirectML operator in its metadata (dml_ep.*)")


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as the one-line ``dml-ep: error: ...`` and exit status 2."""

    def error(self, message):
        print(f"dml-ep: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The subcommands, sharing --feature-level/--debug and (run, compare, export) the input options."""
    common = _Parser(add_help=False)
    common.add_argument("--feature-level", default=DEFAULT_FEATURE_LEVEL.label, metavar="L",
                        help="DirectML feature level to target, e.g. 4_0 (default: %(default)s)")
    # SUPPRESS: unless given after the command, the subcommand leaves the main parser's --debug as it is
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show a traceback on errors")
    common.add_argument("--ort-release", "--qdq-rules", dest="qdq_rules", choices=RELEASES, default=DEFAULT_RELEASE, metavar="RELEASE",
                        help="the onnxruntime release whose graph rewrites for DML nodes apply: its QDQ -> QLinear rules "
                             f"and the fusions that changed between releases ({', '.join(RELEASES)}; default: %(default)s)")
    common.add_argument("--no-qdq-fusion", dest="qdq_rules", action="store_const", const=None,
                        help="no QDQ rewrites, as onnxruntime's session.disable_quant_qdq=1")
    common.add_argument("--shape", action="append", type=_shape, default=[], metavar="NAME=D0,D1,...",
                        help="an input's shape for the plan and its random values, instead of the declared one "
                             "with symbolic dimensions as 1 (repeatable)")
    feeding = _Parser(add_help=False)
    feeding.add_argument("--input", action="append", default=[], metavar="NAME=FILE",
                         help="an input from a .npy or TensorProto .pb file (repeatable)")
    feeding.add_argument("--input-dir", metavar="DIR",
                         help="inputs from <name>.npy or input_<i>.pb files (ONNX test data)")
    feeding.add_argument("--seed", type=_non_negative, default=0,
                         help="seed of the random inputs given neither way (default: %(default)s)")
    feeding.add_argument("--val-range", action="append", default=[], metavar="NAME=LO,HI",
                         help="the inclusive range of an input's random values (also Polygraphy's NAME:[LO,HI], and "
                              "[LO,HI] for every input not named; repeatable); default: integers of 32 and 64 bits in "
                              "[0, 1], or within the data of a Gather they index; of 8 and 16 bits, their whole type; "
                              "floats standard normal")
    arithmetic = _Parser(add_help=False)
    arithmetic.add_argument("--arithmetic", choices=ARITHMETICS, default="directml",
                         help="dml_ep's arithmetic (default: %(default)s)")
    arithmetic.add_argument("--u8s8-saturation", choices=U8S8_SATURATION, default="auto",
                         help="with --arithmetic onnxruntime, saturate uint8 x int8 product pairs to int16 as "
                              "onnxruntime does on AVX2 CPUs without VNNI; auto: if this CPU is one (default: %(default)s)")
    arithmetic.add_argument("--engine", choices=ENGINES, default=None,
                         help="what computes the quantized products' exact integer sums: onnxruntime's MatMulInteger "
                              "or numpy's float32 BLAS in exact blocks; same results (default: $DML_EP_ENGINE, else onnxruntime)")

    parser = _Parser(prog="dml-ep", description="Emulate onnxruntime's DirectML EP on quantized ONNX models.",
                     epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version_line())
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    show = commands.add_parser("inspect", parents=[common, feeding], help="show which DirectML operator runs each node",
                               description="Plans for the declared input shapes (--shape to give others), or, with "
                                           "--input or --input-dir, from the tensors of a run on those inputs.")
    show.add_argument("model", metavar="MODEL")
    show.add_argument("--json", metavar="FILE", help="also write the plan, with every desc, as JSON (- for stdout)")
    show.add_argument("--html", metavar="FILE", help="also write the plan as an HTML page: the graph the real EP runs, each node "
                                                     "coloured by where it runs (works offline)")
    show.add_argument("--descs", action="store_true", help="also print each DirectML operator's desc, field by field")
    show.add_argument("--nodes", action="store_true", help="also print every node: where it runs or why it falls back, the nodes "
                                                           "onnxruntime's rewrites made, those planned only when run")
    show.add_argument("--save-rewritten", metavar="FILE", help=SAVE_REWRITTEN_HELP)
    show.add_argument("--model-explorer", metavar="DIR",
                      help="also write Model Explorer node data for the model's nodes, where each runs and its MACs, into DIR "
                           "(must not exist, or be empty), and print the command that opens the model with them "
                           "(needs the model-explorer extra)")
    show.set_defaults(handler=cmd_inspect)

    run = commands.add_parser("run", parents=[common, feeding, arithmetic], help="run a model with dml_ep")
    run.add_argument("model", metavar="MODEL")
    run.add_argument("--output-dir", metavar="DIR", help="write each output to DIR/<name>.npy")
    run.set_defaults(handler=cmd_run)

    compare = commands.add_parser(
        "compare",
        parents=[common, feeding, arithmetic],
        help="compare dml_ep with onnxruntime's CPU EP, or with the real DML EP",
        description=(
            "Integer outputs, and float outputs made by DequantizeLinear, compare in quantized steps "
            f"(LSB) within --atol; other float outputs within {FLOAT_ATOL:g} + {FLOAT_RTOL:g} * |reference|. "
            "A directory laid out as the ONNX model zoo (model.onnx or one *.onnx, test_data_set_*/input_<i>.pb "
            "and output_<i>.pb) is compared on each data set, whose shipped outputs are checked against both "
            "sides: they fail the result only where onnxruntime matches them and dml_ep does not."
        ),
    )
    compare.add_argument("models", nargs="+", metavar="MODEL_OR_DIR_OR_GLOB")
    compare.add_argument("--atol", type=_non_negative, default=0, metavar="STEPS",
                         help="largest difference allowed, in quantized steps (default: 0, bit-exact)")
    compare.add_argument("--reference", choices=REFERENCES, default="ort",
                         help="onnxruntime CPU as deployed, with exact u8s8 GEMMs, or without QDQ fusions; or dml, the real "
                              "DML EP (onnxruntime-directml and a DirectX 12 device) (default: %(default)s)")
    compare.add_argument("--candidate", choices=CANDIDATES, default="dml_ep",
                         help="what is compared with the reference: dml_ep, or another onnxruntime configuration, "
                              "e.g. --candidate ort --reference ort-unfused says why QDQ fusion changes outputs "
                              "(default: %(default)s)")
    compare.add_argument("--per-node", action="store_true", help="compare every intermediate value and each DML node in isolation")
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
                            help="inputs from Polygraphy's input data: one comparison per feed dict, paired with "
                                 "--load-outputs' iterations")
    polygraphy.add_argument("--save-outputs", metavar="FILE",
                            help="write the outputs of dml_ep (runner 'dml_ep') and of the reference "
                                 "('onnxruntime-REFERENCE') as a RunResults file, one iteration per comparison")
    polygraphy.add_argument("--save-inputs", metavar="FILE", help="write the inputs as Polygraphy's input data")
    compare.set_defaults(handler=cmd_compare)

    export = commands.add_parser(
        "export", parents=[common, feeding, arithmetic], help="write the plan as a DxDispatch model, to run on real DirectML",
        description="Runs the model with dml_ep on the inputs given (or seeded random ones) and writes its DirectML "
                    "operators as a DxDispatch model: DIR/model.json, its resources, dml_ep's expected outputs and a "
                    "README.txt with the DxDispatch command line. Values the CPU fallback makes are stored as resources.")
    export.add_argument("model", metavar="MODEL")
    export.add_argument("--dxdispatch", metavar="DIR", required=True, help="the directory to write (must not exist, or be empty)")
    export.set_defaults(handler=cmd_export)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _sigterm_raises():
            return args.handler(args)
    except (KeyboardInterrupt, Terminated) as stop:
        if args.debug:
            raise
        print(f"dml-ep: {'interrupted' if isinstance(stop, KeyboardInterrupt) else 'terminated'}", file=sys.stderr)
        return 130 if isinstance(stop, KeyboardInterrupt) else 143
    except BrokenPipeError:  # the reader went away (``| head``): not an error, and nothing more to print
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (DmlEpError, OSError) as exc:
        if args.debug:
            raise
        print(f"dml-ep: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        if args.debug:
            raise
        print(f"dml-ep: error: internal error: {type(exc).__name__}: {one_line(exc)} (--debug shows the traceback)", file=sys.stderr)
        return 3


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that what it was writing is cleaned up as on Ctrl-C."""


@contextlib.contextmanager
def _sigterm_raises():
    """While a command runs in the main thread, SIGTERM raises :class:`Terminated` (by default it
    would end the process at once, leaving a partial file or staging folder behind)."""
    if not hasattr(signal, "SIGTERM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    def terminate(signum, frame):
        raise Terminated
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# --- inspect -------------------------------------------------------------------------------


INSPECT_WIDTH = 160  # the longest line of inspect's summary (--nodes, --descs and the JSON keep whole names)
PENDING_SHOWN = 5  # pending nodes the summary names


def cmd_inspect(args) -> int:
    """A summary of the plan: node counts and estimated MACs by op type and by fallback reason, the
    totals on DirectML vs the fallback, the nodes planned only when run; with ``--nodes``, one row
    per plan entry, the nodes onnxruntime's rewrites made and what they stand for; with ``--descs``,
    each DirectML operator's desc; with ``--save-rewritten``, the rewritten model."""
    for path in _written(args):
        files.check_writable(path, inputs=_inputs_read(args))
    _check_model_explorer(args)
    out = _text_output(args)
    model = load_model(args.model)
    shapes = dict(args.shape)
    input_shapes(model, shapes)  # checks them
    if args.input or args.input_dir:  # planned from the tensors of a run on these inputs
        feeds, sources = make_feeds(model, args.seed, args.input, args.input_dir, shapes, args.val_range)
        session = InferenceSession(model, feature_level=args.feature_level, qdq_rules=args.qdq_rules)
        with _naming_random_inputs(sources):
            session.run(None, feeds)
        planner, plan = session.planner, session.plan
    else:
        planner = Planner(model, args.feature_level, qdq_rules=args.qdq_rules)
        plan = planner.plan_for_shapes(shapes)
    rows = plan_rows(plan)
    summary = plan.summary()
    by_op_type, by_reason = _by_op_type(rows), _by_reason(plan)
    print(_ascii_if_needed("\n".join(_inspect_summary(plan, rows, summary, by_op_type, by_reason)), out), file=out)
    if args.nodes:
        table = _table(["node", "op type", "runs on", "rule"], [[r["node"], r["op_type"], r["runs_on"], r["rule"] or ""] for r in rows])
        print("\n" + table, file=out)
        rewritten = [r for r in rows if r["rule"]]
        if rewritten:
            print(f"\nmade by onnxruntime's graph rewrites ({_rules_text(plan.qdq_rules)}), from the model's nodes:", file=out)
            print("\n".join(f"  {r['node']} ({r['op_type']}) <- {r['rule']}: {', '.join(r['from']) or '-'}" for r in rewritten), file=out)
        if plan.pending:
            print("\nplanned only when run, their input shapes depend on data:", file=out)
            print("\n".join(f"  {node_label(n)} ({n.op_type})" for n in plan.pending), file=out)
    if args.descs:
        for row, entry in zip(rows, plan.entries):
            if isinstance(entry, DmlNode):
                print(f"\n{row['node']}: {entry.operator}", file=out)
                print("\n".join("  " + line for line in entry.desc.describe()), file=out)
    writers, said = {}, ""
    if args.json:
        writers[args.json] = files.json_writer(report_meta(model=args.model, input_shapes=shapes, assumed=plan.assumed,
                                                           pending=[node_label(n) for n in plan.pending], nodes=rows, summary=summary,
                                                           by_op_type=by_op_type, by_reason=by_reason))
    if args.html:
        writers[args.html] = files.text_writer(html_report.plan_report(plan, args.model))
    if args.save_rewritten:
        writers[args.save_rewritten], said = _rewritten(args.save_rewritten, planner, plan)
    files.write_files(writers)
    if said:
        print(said, file=out)
    if args.model_explorer:
        _write_model_explorer(args.model_explorer, args.model, model, plan, [], out)
    return 0


def _rewritten(path: str, planner, plan) -> tuple[files.Writer, str]:
    """``--save-rewritten``'s writer, and the line that says what the file holds once written."""
    rewritten = rewritten_model(planner, plan)
    said = (f"\n{'stdout' if path == '-' else path}: the rewritten model, {len(rewritten.graph.node)} node(s), "
            "each with where it runs in its metadata (dml_ep.*)")
    return model_writer(rewritten), said


def _by_op_type(rows: list[dict]) -> list[dict]:
    """Plan entries counted by op type and where they run (a DirectML operator, or ``fallback``),
    most MACs first."""
    return counted(rows, lambda row: {"op_type": row["op_type"], "runs_on": row["runs_on"] if row["placement"] == "modelled" else "fallback"})


def _by_reason(plan) -> list[dict]:
    """Fallback entries counted by reason, most MACs first. Unless the plan fused a QDQ group, a
    reason goes without the note on why no QDQ rule fused its node, when no rule would on any
    provider (the note stays in ``--nodes`` and the JSON's rows)."""
    qdq = _qdq_rewritten(plan)
    groups: dict[str, dict] = {}
    for entry in plan.fallback_nodes:
        reason, note = entry.reason, entry.origin.note
        if note and not qdq and entry.origin.cpu_rule is None:
            reason = reason.removesuffix(f" ({note})")
        group = groups.setdefault(reason, {"reason": reason, "nodes": 0, "macs": 0})
        group["nodes"] += 1
        group["macs"] += node_macs(entry.node, plan.values)
    return sorted(groups.values(), key=lambda g: (-g["macs"], -g["nodes"]))


def _qdq_rewritten(plan) -> int:
    """How many plan entries onnxruntime's passes made (not counting the DML EP's activation fusion)."""
    return sum(1 for e in plan.entries if set(e.origin.rules) - {DML_FUSION})


def _rules_text(release: str | None) -> str:
    """Which of onnxruntime's rewrites a plan had: the release's, or none of the QDQ ones."""
    return f"onnxruntime {release} rewrites" if release else "QDQ rules off"


def _inspect_summary(plan, rows: list[dict], summary: dict, by_op_type: list[dict], by_reason: list[dict]) -> list[str]:
    """inspect's default report, no line over INSPECT_WIDTH: long names shortened with an ellipsis."""
    head = summary["feature_level"]
    if _qdq_rewritten(plan):
        head += f", {_rules_text(plan.qdq_rules)}"
    head += f": {len(rows)} node(s) planned"
    rewritten = sum(1 for r in rows if r["rule"])
    if rewritten:
        head += f", {rewritten} made by onnxruntime's graph rewrites (--nodes lists them)"
    lines = [head]
    total = sum(r["macs"] for r in rows)
    if by_op_type:
        lines += [""] + _fitted_table(
            ["op type", "nodes", "runs on", "MACs", "% of MACs"],
            [[g["op_type"], g["nodes"], f"DirectML ({g['runs_on']})" if g["runs_on"] != "fallback" else "CPU fallback",
              f"{g['macs']:,}", f"{g['macs_percent']:.1f}%" if total else "-"] for g in by_op_type],
            numeric={1, 3, 4}, shrink=[(0, _shorten_middle), (2, _shorten_end)])
    if by_reason:
        lines += [""] + _fitted_table(["fallback reason", "nodes", "MACs"],
                                      [[g["reason"], g["nodes"], f"{g['macs']:,}"] for g in by_reason],
                                      numeric={1, 2}, shrink=[(0, _shorten_end)])
    lines += ["", f"{summary['feature_level']}: {summary['dml']['nodes']} of the model's {summary['model_nodes']} node(s) on DirectML "
                  f"({summary['dml']['operators']} operator(s)), {summary['fallback']['nodes']} on the CPU fallback"]
    macs = (f"estimated MACs: {summary['dml']['macs']:,} on DirectML ({summary['dml']['macs_percent']:.1f}%), "
            f"{summary['fallback']['macs']:,} on the fallback")
    sizes = [f"{dim}={size}" for dim, size in plan.assumed.items()]
    if sizes:
        macs += ", with the symbolic dimensions taken as "
        lines.append(macs + _fit_list(sizes, INSPECT_WIDTH - len(macs)))
        advice = ": give the shapes you run with (--shape NAME=D0,D1,... or --input)"
        note = f"symbolic dimensions {', '.join(plan.assumed)} were taken as {', '.join(sizes)}{advice}"
        if len(note) > INSPECT_WIDTH:
            note = f"{len(sizes)} symbolic dimensions were taken as "
            note += _fit_list(sizes, INSPECT_WIDTH - len(note) - len(advice)) + advice
        lines.append(note)
    else:
        lines.append(macs)
    if plan.pending:
        lines.append(f"{len(plan.pending)} node(s) are planned only when run, their input shapes depend on data "
                     "(give --input to plan from a run; --nodes lists them):")
        lines.append("  " + _fit_list([node_label(n) for n in plan.pending], INSPECT_WIDTH - 2, most=PENDING_SHOWN))
    return lines


def _fitted_table(header: list[str], rows: list[list], numeric: set[int], shrink: list[tuple]) -> list[str]:
    """``rows`` under ``header``, columns two spaces apart, the ``numeric`` ones right-aligned; the
    columns of ``shrink`` (index, shortener), in that order, shortened as far as it takes for no
    line to pass INSPECT_WIDTH (none below its header or 16 characters)."""
    cells = [list(header)] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for column, shorten in shrink:
        over = sum(widths) + 2 * (len(widths) - 1) - INSPECT_WIDTH
        if over <= 0:
            break
        widths[column] = max(widths[column] - over, len(header[column]), 16)
        for row in cells[1:]:
            row[column] = shorten(row[column], widths[column])
    return ["  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
            for row in cells]


def _fit_list(items: list[str], width: int, most: int | None = None) -> str:
    """``items`` joined by ", ", as many as fit in ``width`` (at most ``most``, each then shortened
    in the middle to share the width), then "and N more" for the others."""
    count = min(len(items), most or len(items))
    room = width - (len(f" and {len(items)} more") if len(items) > 1 else 0)
    each = max(16, room // max(count, 1) - 2 if most else room)
    shown: list[str] = []
    for index, item in enumerate(items[:count]):
        more = len(items) - index - 1
        candidate = shown + [_shorten_middle(item, each)]
        if shown and len(", ".join(candidate) + (f" and {more} more" if more else "")) > width:
            break
        shown = candidate
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _shorten_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its middle replaced by an ellipsis if too long (names
    differ at both ends)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:keep - keep // 2] + "…" + text[len(text) - keep // 2:]


def _shorten_end(text: str, width: int) -> str:
    """``text`` in ``width`` characters, its end replaced by an ellipsis if too long."""
    return text if len(text) <= width else text[:width - 1] + "…"


def _ascii_if_needed(text: str, out) -> str:
    """``text`` with its ellipses as "~" (as wide) where ``out``'s encoding has none."""
    try:
        "…".encode(getattr(out, "encoding", None) or "utf-8")
        return text
    except (UnicodeEncodeError, LookupError):
        return text.replace("…", "~")


def _check_model_explorer(args) -> None:
    """Before any work: Model Explorer's packages are there, and ``--model-explorer DIR`` is new or empty."""
    if args.model_explorer:
        model_explorer.require()
        files.check_new_directory(args.model_explorer, "--model-explorer")


def _write_model_explorer(directory: str, model_path: str, model, plan, reports: list[ModelReport], out) -> None:
    """Write the node data, and say how to open the model with it."""
    names = model_explorer.write(directory, model, plan, reports)
    paths = [os.path.join(directory, name) for name in names]
    print(f"\nwrote {directory}: Model Explorer node data {', '.join(names)}; open the model with it:", file=out)
    print(f"  {model_explorer.open_command(model_path, paths)}", file=out)


# --- run -----------------------------------------------------------------------------------


def cmd_run(args) -> int:
    """Run with dml_ep; outputs are written only once the whole run has succeeded, all or none."""
    if args.output_dir:
        files.check_writable(args.output_dir, directory=True)
    model = load_model(args.model)
    feeds, sources = make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)
    session = InferenceSession(
        model, feature_level=args.feature_level, arithmetic=args.arithmetic,
        u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation], qdq_rules=args.qdq_rules, engine=args.engine,
    )
    names = [o.name for o in session.get_outputs()]
    with _naming_random_inputs(sources):
        results = dict(zip(names, session.run(None, feeds)))
    if not args.output_dir:
        print(_table(["output", "shape", "dtype"], [[n, list(r.shape), r.dtype] for n, r in results.items()]))
        return 0
    paths = {name: os.path.join(args.output_dir, file) for name, file in npy_file_names(names).items()}
    inputs = _inputs_read(args)
    for path in paths.values():
        files.check_not_input(path, inputs)
    print(_table(["output", "shape", "dtype", "file"], [[n, list(r.shape), r.dtype, os.path.basename(paths[n])] for n, r in results.items()]))
    os.makedirs(args.output_dir, exist_ok=True)
    files.write_files({paths[name]: functools.partial(np.save, arr=array) for name, array in results.items()})
    return 0


INDEX_OUT_OF_RANGE = re.compile(r"out of (data )?bounds|out of range|invalid indi", re.IGNORECASE)  # onnxruntime's Gather*, Scatter*


@contextlib.contextmanager
def _naming_random_inputs(sources: dict[str, str]):
    """A node error on random inputs says what of them may be wrong, not the model: an index out
    of range, the random integers (their range); else the symbolic dimensions taken as 1."""
    try:
        yield
    except NodeError as error:
        integers = [f"{name} ({source})" for name, source in sources.items() if INTEGERS in source]
        assumed = [f"{name} ({source})" for name, source in sources.items() if ASSUMED in source]
        if integers and INDEX_OUT_OF_RANGE.search(str(error)):
            error.args = (f"{error} (random inputs {'; '.join(integers)}: give their values with "
                          "--val-range NAME=LO,HI or --input NAME=FILE)",)
        elif assumed:
            error.args = (f"{error} (random inputs {'; '.join(assumed)}: give the shapes with --shape NAME=D0,D1,...)",)
        raise


# --- export --------------------------------------------------------------------------------


def cmd_export(args) -> int:
    """Write the DxDispatch model, then say what it holds and how to run it."""
    model = load_model(args.model)
    feeds, sources = make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)
    with _naming_random_inputs(sources):
        made = dxdispatch.export(
            model, args.dxdispatch, feeds, feature_level=args.feature_level, qdq_rules=args.qdq_rules,
            arithmetic=args.arithmetic, u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation], engine=args.engine,
            source=args.model,
        )
    operators = sum(len(sequence) for sequence in made.sequences)
    print(f"wrote {args.dxdispatch}: {operators} DirectML operator(s) in {len(made.sequences)} dispatch sequence(s), "
          f"{len(made.model['resources'])} resources ({len(made.captured)} captured from the CPU fallback), "
          f"{len(made.outputs)} output(s) written by DxDispatch, expected values in expected/")
    print(f"run on DirectML: cd {args.dxdispatch} && {dxdispatch.COMMAND_LINE}   (README.txt says how to diff)")
    return 0


# --- compare -------------------------------------------------------------------------------


def cmd_compare(args) -> int:
    """Compare each model (each data set, each Polygraphy iteration: :func:`comparison_cases`);
    with several, one that fails is reported and the others still run."""
    inputs = _inputs_read(args)
    for path in (*_written(args), args.save_outputs, args.save_inputs):
        if path:
            files.check_writable(path, inputs=inputs)
    if args.model_explorer and args.candidate != "dml_ep":
        raise DmlEpError(f"--model-explorer shows dml_ep's plan and differences: drop --candidate {args.candidate}")
    _check_model_explorer(args)
    if args.reference == DML_REFERENCE:  # once, not once per model
        require_dml()
    out = _text_output(args)
    cases = comparison_cases(args)
    if args.html and len(cases) != 1:
        raise DmlEpError(f"--html draws one comparison; these arguments make {len(cases)} (one per model, data set or "
                         "Polygraphy iteration)")
    reports, errors, fed, feed_sources = [], [], [], []
    explored = None  # the model --model-explorer shows (every comparison is of the one model)
    for index, case in enumerate(cases, 1):
        path = case.name
        started = time.monotonic()
        prefix = f"[{index}/{len(cases)}] {path}" if len(cases) > 1 else path
        progress = Progress(prefix, enabled=not args.quiet)
        if len(cases) > 1 and not args.quiet:
            print(f"{prefix} ...", file=sys.stderr, flush=True)
        try:
            progress("loading")
            model = load_model(case.model)
            feeds, sources = case_feeds(case, model, args)
            with _naming_random_inputs(sources):
                report = compare_model(
                    Loaded(model),
                    feeds,
                    reference=args.reference,
                    candidate=args.candidate,
                    arithmetic=args.arithmetic,
                    u8s8_saturation=U8S8_SATURATION[args.u8s8_saturation],
                    engine=args.engine,
                    feature_level=args.feature_level,
                    qdq_rules=args.qdq_rules,
                    atol=args.atol,
                    per_node=args.per_node or bool(args.html) or bool(args.model_explorer),
                    name=path,
                    progress=progress,
                    expected_outputs=case.saved,
                )
            if case.runner:
                report.reference = f"Polygraphy runner {case.runner!r}"
            if case.data_set:
                compare_shipped(report, load_tensor_protos(case.data_set, [o.name for o in model.graph.output], "output")[0])
        except DmlEpError as exc:
            progress.clear()
            if len(cases) == 1 or args.debug:
                raise
            message = one_line(exc)
            if not message.startswith(str(path)):  # model-file errors already name the file
                message = f"{path}: {message}"
            print(f"dml-ep: error: {message}", file=sys.stderr)
            errors.append({"model": path, "error": message})
            continue
        progress.clear()
        reports.append(report)
        if explored is None:
            explored = model
        fed.append(feeds)
        feed_sources.append(sources)
        print(format_report(report, args.per_node), file=out)
        if len(cases) > 1 and not args.quiet:
            print(f"{prefix}: done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    if len(cases) > 1:
        print(format_summary(reports, errors), file=out)
    if args.json:
        models = [{**r.to_dict(), "inputs": sources} for r, sources in zip(reports, feed_sources)]
        ok = not errors and all(r.ok for r in reports)
        files.write_files({args.json: files.json_writer(report_meta(seed=args.seed, ok=ok, models=models, errors=errors))})
    if args.save_rewritten and reports:  # one model (comparison_cases): the graph of its first comparison
        writer, said = _rewritten(args.save_rewritten, reports[0].dml_planner, reports[0].dml_plan)
        files.write_files({args.save_rewritten: writer})
        print(said, file=out)
    save_polygraphy(args, cases, reports, fed, errors)
    if args.html and reports:
        files.write_files({args.html: files.text_writer(html_report.compare_report(reports[0]))})
    if args.model_explorer:
        if errors:
            print(f"dml-ep: not writing {args.model_explorer}: {len(errors)} comparison(s) failed", file=sys.stderr)
        else:
            _write_model_explorer(args.model_explorer, cases[0].model, explored, reports[0].dml_plan, reports, out)
    if errors:
        return 2
    return 0 if all(r.ok for r in reports) else 1


class Progress:
    """Where a long comparison is, on stderr: one line rewritten in place on a terminal, else a
    line every few seconds, so that a short run (or its one-line error) stays quiet in a log."""

    INTERVAL = 5.0

    def __init__(self, prefix: str, enabled: bool = True):
        self.prefix = prefix
        self.enabled = enabled
        self.shown = False  # whether a terminal line is there to erase
        self.last = time.monotonic()  # of the start, then of the last line written

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        if not self.enabled:
            return
        text = f"{self.prefix}: {stage}" + (f" {done}/{total}" if total else "") + "..."
        now = time.monotonic()
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\033[K{text}")
            self.shown = True
        elif now - self.last >= self.INTERVAL:
            sys.stderr.write(text + "\n")
            self.last = now
        sys.stderr.flush()

    def clear(self) -> None:
        """Erase the terminal's progress line before the report or an error takes its place."""
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.shown = False


def expand_models(patterns: list[str]) -> list[str]:
    """Model paths from files, directories (their *.onnx, or the directory itself when laid out as
    the ONNX model zoo) and glob patterns (each match a file or such a directory)."""
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) and not os.path.exists(pattern) else [pattern]
        found = [model for match in matches for model in _models_in(match)]
        if not found:
            raise FeedError(f"{pattern}: no ONNX models found")
        paths.extend(found)
    return paths


def _models_in(path: str) -> list[str]:
    """``path`` itself (a model, or a model zoo directory), or a directory's *.onnx."""
    if not os.path.isdir(path) or zoo_layout(path):
        return [path]
    return sorted(glob.glob(os.path.join(glob.escape(path), "*.onnx")))


# --- compare: model zoo directories and Polygraphy's files --------------------------------


@dataclasses.dataclass
class Case:
    """One comparison of ``compare``: a model on one set of inputs."""

    name: str  # in the report: the model, DIR/test_data_set_<i>, or MODEL [iteration <i>]
    model: str
    data_set: str | None = None  # a model zoo data set: its input_<i>.pb, and output_<i>.pb to check
    feeds: dict | None = None  # from --load-inputs
    saved: dict | None = None  # outputs to compare with, from --load-outputs
    runner: str | None = None  # the Polygraphy runner that made ``saved``


def comparison_cases(args) -> list[Case]:
    """One comparison per model, per data set of a model zoo directory, or per iteration of the
    Polygraphy files given (which hold one model's runs)."""
    paths = expand_models(args.models)
    if (args.load_outputs or args.load_inputs or args.save_outputs or args.save_inputs) and len(paths) > 1:
        raise FeedError(f"Polygraphy's files (--load-*, --save-*) hold the runs of one model: give one, not {len(paths)}")
    if args.save_rewritten and len(paths) > 1:
        raise FeedError(f"--save-rewritten writes one model's graph: give one model, not {len(paths)}")
    if args.model_explorer and len(paths) > 1:
        raise FeedError(f"--model-explorer shows one model: give one, not {len(paths)}")
    cases = []
    for path in paths:
        if not os.path.isdir(path):
            cases += polygraphy_cases(path, args)
            continue
        if args.input or args.input_dir or args.load_inputs or args.load_outputs:
            raise FeedError(f"{path}: a model zoo directory brings its inputs and outputs "
                            "(drop --input, --input-dir, --load-inputs and --load-outputs)")
        layout = zoo_layout(path)
        assert layout is not None, "expand_models gives only model zoo directories"
        model, data_sets = layout
        cases += [Case(data_set, model, data_set=data_set) for data_set in data_sets]
    return cases


def polygraphy_cases(path: str, args) -> list[Case]:
    """The comparisons of the model ``path``: one per iteration of ``--load-inputs``/``--load-outputs``, else one."""
    if not (args.load_inputs or args.load_outputs):
        return [Case(path, path)]
    if args.load_inputs and (args.input or args.input_dir):
        raise FeedError("--load-inputs gives every input: drop --input and --input-dir")
    feeds = load_inputs(args.load_inputs) if args.load_inputs else None
    saved = runner = None
    if args.load_outputs:
        file, wanted = split_runner(args.load_outputs)
        runners = load_run_results(file)
        runner = pick_runner(runners, wanted, file)
        saved = runners[runner]
        if feeds is None and not (args.input or args.input_dir):
            raise FeedError("--load-outputs: give the inputs its outputs were made from (--load-inputs, --input or --input-dir)")
        if len(saved) != (1 if feeds is None else len(feeds)):
            given = f"{args.load_inputs} holds {len(feeds)} feed dict(s)" if feeds is not None else "--input and --input-dir give one"
            raise FeedError(f"{file}: runner {runner!r} has {len(saved)} iteration(s), {given}")
    iterations = saved if saved is not None else feeds
    assert iterations is not None, "--load-inputs or --load-outputs gives them"
    count = len(iterations)
    if not count:
        raise FeedError(f"{args.load_inputs or args.load_outputs}: no iterations")
    return [Case(path if count == 1 else f"{path} [iteration {i}]", path,
                 feeds=None if feeds is None else feeds[i], saved=None if saved is None else saved[i], runner=runner)
            for i in range(count)]


def split_runner(text: str) -> tuple[str, str | None]:
    """``FILE[:RUNNER]``, split at the first colon after a drive letter (``C:\\out.json:onnxrt``)
    unless ``text`` is a file (Polygraphy's runner names hold colons: ``onnxrt-runner-N0-05/06/24-10:11:12``)."""
    colon = text.find(":", 2 if re.match(r"[A-Za-z]:[\\/]", text) else 0)
    if os.path.exists(text) or colon < 0:
        return text, None
    return text[:colon], text[colon + 1:]


def case_feeds(case: Case, model, args) -> tuple[dict, dict]:
    """A comparison's feeds, and where each came from."""
    if case.feeds is not None:
        return case.feeds, dict.fromkeys(case.feeds, args.load_inputs)
    if case.data_set:  # every input from the data set: a missing one is an error, not random
        return load_directory(case.data_set, [v.name for v in graph_inputs(model.graph)])
    return make_feeds(model, args.seed, args.input, args.input_dir, dict(args.shape), args.val_range)


def save_polygraphy(args, cases: list[Case], reports: list[ModelReport], feeds: list[dict], errors: list) -> None:
    """Write ``--save-outputs`` and ``--save-inputs``, one iteration per comparison, when all of them ran."""
    paths = [f for f in (args.save_outputs, args.save_inputs) if f]
    if not paths:
        return
    if errors:
        print(f"dml-ep: not writing {', '.join(paths)}: {len(errors)} comparison(s) failed", file=sys.stderr)
        return
    writers = {}
    if args.save_outputs:
        candidate = "dml_ep" if args.candidate == "dml_ep" else f"onnxruntime-{args.candidate}"
        reference = cases[0].runner or f"onnxruntime-{args.reference}"
        if reference == candidate:
            reference += "-reference"
        runs = {candidate: [r.candidate_outputs for r in reports], reference: [r.reference_outputs for r in reports]}
        writers[args.save_outputs] = files.text_writer(run_results_json(runs))
    if args.save_inputs:
        writers[args.save_inputs] = files.text_writer(inputs_json(feeds))
    files.write_files(writers)


def format_report(report: ModelReport, per_node: bool) -> str:
    real_ep = report.reference == DML_REFERENCE
    reference = f"{report.reference} (the real DML EP)" if real_ep else report.reference
    if report.candidate == "dml_ep":
        lines = [f"{report.model}: reference {reference}, arithmetic {report.arithmetic}, "
                 f"{report.feature_level}, atol {report.atol} step(s)"]
    else:
        lines = [f"{report.model}: onnxruntime {report.candidate} against reference {reference}, atol {report.atol} step(s)"]
    lines += _indent(_table(
        ["output", "dtype", "shape", "elements", "exact %", "max diff"],
        [[o.name, o.dtype, o.shape, o.elements, _percent(o), _max_diff(o)] for o in report.outputs],
    ))
    if per_node and report.nodes:
        lines += ["", "  node by node (isolated: fed onnxruntime's inputs):"]
        lines += _indent(_table(
            ["node", "op type", "runs on", "exact %", "isolated exact %", "isolated max diff", "cause"],
            [[n.node, n.op_type, "fallback" if n.runs_on.startswith("fallback") else "DML",
              ", ".join(_percent(c) for c in n.propagated) or "-",
              _percent(n.isolated) if n.isolated else "-",
              _max_diff(n.isolated) if n.isolated else "-",
              n.cause_text] for n in report.nodes],
        ), "    ")
    plan = report.plan
    if report.candidate == "dml_ep":
        lines.append(f"  on DirectML: {plan['dml']['nodes']} of the model's {plan['model_nodes']} node(s) as "
                     f"{plan['dml']['operators']} operator(s), {plan['dml']['macs_percent']:.1f}% of the MACs "
                     f"({_rules_text(plan['qdq_rules'])})")
    if report.shipped is not None:
        lines += _format_shipped(report, report.shipped)
    bad = [o for o in report.outputs if not o.within_tolerance]
    faulted = [s for s in report.shipped or () if s.faults_candidate]
    if not report.ok:
        reasons = [f"{len(bad)} of {len(report.outputs)} output(s) out of tolerance"] if bad else []
        if faulted:
            reasons.append(f"{len(faulted)} shipped output(s) missed where onnxruntime matches")
        lines.append(f"  result: MISMATCH ({'; '.join(reasons)})")
    elif report.on_dml or report.candidate != "dml_ep":
        lines.append("  result: OK")
    elif real_ep:
        lines.append("  result: OK, but dml_ep ran nothing on DirectML: its CPU fallback matches the real DML EP")
    else:
        lines.append("  result: OK, but nothing ran on DirectML: both sides ran onnxruntime's CPU EP")
    for o in bad:
        if o.problem:
            lines.append(f"  {o.name}: {o.problem}")
    if report.nodes is not None and (per_node or not report.ok):
        counts = ", ".join(f"{cause} {count}" for cause, count in report.cause_counts.items())
        lines.append(f"  causes (nodes differing in isolation): {counts or 'none'}")
        if real_ep and "other" in report.cause_counts:
            lines.append("  other: not judged (reference is the real DML EP: no arithmetic of dml_ep's reproduces these values)")
        within = ", ".join(f"{cause} {count}" for cause, count in report.within_tolerance_cause_counts.items())
        if within and not report.ok:
            lines.append(f"  within tolerance in isolation but not bit-exact, differences later nodes grow: {within}")
        first = report.first_divergent
        if first is not None:
            lines += _describe_divergent(first)
    return "\n".join(lines)


def _format_shipped(report: ModelReport, shipped: list[ShippedComparison]) -> list[str]:
    """The data set's shipped outputs against both sides; they judge the candidate only where the
    reference matches them (:class:`dml_ep.compare.ShippedComparison`)."""
    candidate = "dml_ep" if report.candidate == "dml_ep" else f"onnxruntime {report.candidate}"
    rows = []
    for s in shipped:
        if s.faults_candidate:
            verdict = f"MISMATCH: {report.reference} matches it, {candidate} does not"
        elif s.reference.within_tolerance:
            verdict = "ok"
        else:
            verdict = f"not judged: {report.reference} differs from it"
        rows.append([s.name, _percent(s.reference), _max_diff(s.reference), _percent(s.candidate), _max_diff(s.candidate), verdict])
    header = ["output", f"{report.reference} exact %", "max diff", f"{candidate} exact %", "max diff", "verdict"]
    return ["", "  shipped outputs (output_<i>.pb), against each side:"] + _indent(_table(header, rows), "    ")


def _describe_divergent(node) -> list[str]:
    c = node.isolated
    histogram = "  ".join(f"{k}: {v}" for k, v in (c.histogram or {}).items())
    if node.desc:
        what = f"    {node.desc['Type']}: " + ", ".join(f"{k} {v}" for k, v in node.desc.items() if k != "Type")
    else:
        what = f"    {node.runs_on}"
    out = node.causes_out_of_tolerance
    beyond = f"; out of tolerance: {_counts(out)}" if out and out != node.causes else ""
    return [
        f"  first node differing in isolation: {node.node} ({node.op_type})",
        what,
        f"    exact {_percent(c)}, {c.differing} of {c.elements} elements differ, "
        f"max {c.max_diff:g} {c.unit}, mean {c.mean_diff:.2f} {c.unit}",
        f"    histogram: {histogram}" if histogram else "    histogram: -",
        f"    cause: {node.cause_text} ({_counts(node.causes)} element(s){beyond})",
    ]


def _counts(causes: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in causes.items())


def format_summary(reports: list[ModelReport], errors: list[dict]) -> str:
    rows = []
    for r in reports:
        elements = sum(o.elements for o in r.outputs)
        equal = sum(o.equal for o in r.outputs)
        worst = max(r.outputs, key=lambda o: o.max_diff)
        causes = ", ".join(f"{k} {v}" for k, v in r.cause_counts.items())
        result = ("ok" if r.on_dml else "ok, nothing on DirectML") if r.ok else "MISMATCH" + (f" ({causes})" if causes else "")
        on_dml = f"{r.plan['dml']['macs_percent']:.1f}%" if r.candidate == "dml_ep" else "-"
        rows.append([r.model, len(r.outputs), elements, _percent_of(equal, elements), _max_diff(worst), on_dml, result])
    rows += [[e["model"], "-", "-", "-", "-", "-", f"error: {e['error']}"] for e in errors]
    header = ["model", "outputs", "elements", "exact %", "max diff", "MACs on DML", "result"]
    return "\nsummary:\n" + "\n".join(_indent(_table(header, rows)))


# --- formatting helpers --------------------------------------------------------------------


def _table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _indent(text: str, prefix: str = "  ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


def _percent(c: TensorComparison) -> str:
    return _percent_of(c.equal, c.elements)


def _percent_of(equal: int, elements: int) -> str:
    """100% only when every element is equal: a near miss never rounds up to it."""
    if equal == elements:
        return "100%"
    return f"{min(100.0 * equal / elements, 99.999):.3f}%"


def _max_diff(c: TensorComparison) -> str:
    return f"{c.max_diff:g} {c.unit}" if c.unit == "LSB" else f"{c.max_diff:.3g}"


def _inputs_read(args) -> list[str]:
    """The paths a command reads (models, zoo directories, --input files, --input-dir, Polygraphy
    files), which nothing it writes may replace."""
    models = [found for pattern in getattr(args, "models", None) or [args.model] for found in glob.glob(pattern) or [pattern]]
    given = [text.partition("=")[2] for text in args.input]
    polygraphy = [getattr(args, "load_inputs", None), split_runner(args.load_outputs)[0] if getattr(args, "load_outputs", None) else None]
    return [path for path in (*models, *given, args.input_dir, *polygraphy) if path]


def _written(args) -> list[str]:
    """The files a command writes besides its outputs: its JSON report, its rewritten model, its
    HTML page. One of them at most on stdout."""
    paths = [path for path in (args.json, getattr(args, "save_rewritten", None), getattr(args, "html", None)) if path]
    if paths.count("-") > 1:
        raise DmlEpError("only one of --json, --save-rewritten and --html can be - (stdout): give the others a file")
    return paths


def _text_output(args):
    """Where the report's text goes: stderr when its JSON or model takes stdout (``-``)."""
    return sys.stderr if "-" in _written(args) else sys.stdout


def _version_line() -> str:
    v = versions()
    return f"dml-ep {v['dml_ep']} (onnxruntime {v['onnxruntime']}, onnx {v['onnx']}, numpy {v['numpy']}; {v['kernels']})"


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` from ``--shape`` (the last ``=``: an input name may hold one, sizes never)."""
    name, sep, sizes = text.rpartition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=D0,D1,...")
    if not re.fullmatch(r"[1-9]\d*(,[1-9]\d*)*", sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are positive integers, as in NAME=1,3,224,224")
    return name, tuple(int(size) for size in sizes.split(","))


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


if __name__ == "__main__":
    sys.exit(main())
