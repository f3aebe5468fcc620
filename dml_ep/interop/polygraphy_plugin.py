"""A ``polygraphy run`` plugin: ``--dml-ep`` runs the model with dml_ep beside Polygraphy's runners.

Polygraphy loads it through its ``polygraphy.run.plugins`` entry point (pyproject.toml), so that
``polygraphy run MODEL --onnxrt --dml-ep`` compares dml_ep with onnxruntime under all of
Polygraphy's options: its data loader (``--seed``, ``--val-range``, ``--input-shapes``,
``--data-loader-script``, ``--load-inputs``), its ONNX loading (``--onnx-outputs``, shape
inference), ``--graph-optimization-level`` (applied to dml_ep's session as onnxruntime's DML EP
would take it), its comparison and ``--save-outputs``. ``--providers`` stays onnxruntime's: dml_ep
is the DML EP. Only Polygraphy imports this module; ``import dml_ep`` does not import Polygraphy.

Without onnxruntime Polygraphy skips the plugin
with dml_ep's one-line ``MissingRuntimeError`` (what to install) instead of failing later.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections import OrderedDict

from polygraphy import util
from polygraphy.backend.base import BaseRunner
from polygraphy.common import TensorMetadata
from polygraphy.datatype import DataType
from polygraphy.logger import G_LOGGER
from polygraphy.tools.args import ModelArgs, OnnxLoadArgs, OnnxrtSessionArgs
from polygraphy.tools.args import util as args_util
from polygraphy.tools.args.base import BaseRunnerArgs
from polygraphy.tools.script import make_invocable

from dml_ep.core.errors import DmlEpError, FeatureLevelError, missing_runtime

if missing_runtime() is not None:
    raise missing_runtime()  # type: ignore[misc]

from onnxruntime import GraphOptimizationLevel, SessionOptions  # noqa: E402 (after the check above)

from dml_ep.core.enums import DML_FEATURE_LEVEL  # noqa: E402
from dml_ep.numerics.arithmetic import ARITHMETICS  # noqa: E402
from dml_ep.runtime.session import InferenceSession  # noqa: E402
from dml_ep.planning.importer import DEFAULT_FEATURE_LEVEL
from dml_ep.passes import DEFAULT_RELEASE, RELEASE_NAMES, RELEASES


@contextlib.contextmanager
def _reported_as_polygraphy_errors(runner_name: str):
    """dml_ep's errors on bad input as Polygraphy's (logged, exit status 1, no traceback), as
    Polygraphy reports a user's error; anything else stays a traceback."""
    try:
        yield
    except DmlEpError as error:
        G_LOGGER.critical(f"{runner_name:35} | {type(error).__name__}: {error}")


class DmlEpRunner(BaseRunner):
    """Runs a model with ``dml_ep.InferenceSession``, as Polygraphy's OnnxrtRunner runs one with
    onnxruntime's.

    ``model`` is a path, serialized bytes or a ModelProto, or a callable returning one (a Polygraphy
    loader such as ``BytesFromOnnx``). ``graph_optimization_level`` is onnxruntime's
    GraphOptimizationLevel or its name (as ``--graph-optimization-level`` gives it); the other
    keywords go to ``dml_ep.InferenceSession`` (``feature_level``, ``arithmetic``, ``qdq_rules``, ...).
    """

    def __init__(self, model, *, graph_optimization_level=None, name: str | None = None, **session_options):
        super().__init__(name=name, prefix="dml-ep-runner")
        self._model = model
        self._graph_optimization_level = graph_optimization_level
        self._session_options = session_options

    def activate_impl(self):
        model, _ = util.invoke_if_callable(self._model)
        with _reported_as_polygraphy_errors(self.name):
            self.session = InferenceSession(model, self._sess_options(), **self._session_options)
        G_LOGGER.info(f"Created a dml_ep session: {_settings(self.session)}")
        self._output_names = [output.name for output in self.session.get_outputs()]

    def _sess_options(self) -> SessionOptions | None:
        level = self._graph_optimization_level
        if level is None:
            return None
        options = SessionOptions()
        options.graph_optimization_level = getattr(GraphOptimizationLevel, level) if isinstance(level, str) else level
        return options

    def get_input_metadata_impl(self):
        metadata = TensorMetadata()
        for value in self.session.get_inputs():
            metadata.add(value.name, dtype=DataType.from_dtype(value.type, "onnxruntime"), shape=value.shape)
        return metadata

    def infer_impl(self, feed_dict):
        feeds = {name: util.array.to_numpy(value) for name, value in feed_dict.items()}
        with _reported_as_polygraphy_errors(self.name):
            start = time.perf_counter()
            outputs = self.session.run(None, feeds)
            self.inference_time = time.perf_counter() - start
        return OrderedDict(zip(self._output_names, outputs))

    def deactivate_impl(self):
        del self.session


def _settings(session: InferenceSession) -> str:
    """What shapes a session's results, as it took it (Polygraphy logs an onnxruntime session's providers)."""
    arithmetic = f"{session.arithmetic.mode} arithmetic"
    if session.arithmetic.onnxruntime and session.arithmetic.u8s8_saturation:
        arithmetic += " with u8s8 saturation"
    rewrites = f"onnxruntime {session.qdq_rules} rewrites" if session.qdq_rules else "no QDQ rewrites"
    level = session.get_session_options().graph_optimization_level.name
    return f"{session.planner.feature_level}, {arithmetic}, {rewrites}, {level}"


def _feature_level(text: str) -> str:
    """A DirectML feature level's label (``4_0``) from any spelling dml_ep accepts, or argparse's error."""
    try:
        return DML_FEATURE_LEVEL.parse(text).label
    except FeatureLevelError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class DmlEpRunnerArgs(BaseRunnerArgs):
    """
    dml_ep Inference: running inference with dml_ep, the emulator of onnxruntime's DirectML execution provider

    Depends on:

        - ModelArgs
        - OnnxLoadArgs
        - OnnxrtSessionArgs: for --graph-optimization-level
    """

    def get_name_opt_impl(self):
        return "dml_ep", "dml-ep"

    def get_extra_help_text_impl(self):
        return "Emulates onnxruntime's DirectML EP (DmlExecutionProvider) on the CPU."

    def add_parser_args_impl(self):
        self.group.add_argument("--dml-ep-feature-level", type=_feature_level, default=None, metavar="LEVEL",
                                help=f"the DirectML feature level dml_ep targets, e.g. 4_0 (default: {DEFAULT_FEATURE_LEVEL.label})")
        self.group.add_argument("--dml-ep-arithmetic", choices=ARITHMETICS, default=None,
                                help="dml_ep's arithmetic: DirectML's documented math, or onnxruntime CPU's (default: directml)")
        self.group.add_argument("--dml-ep-ort-release", choices=RELEASES, default=None, metavar="RELEASE",
                                help="the onnxruntime release whose graph rewrites for DML nodes dml_ep applies "
                                     f"({', '.join(RELEASE_NAMES)}; default: {DEFAULT_RELEASE})")

    def parse_impl(self, args):
        """
        Attributes:
            feature_level (str): The DirectML feature level's label, or None for dml_ep's default.
            arithmetic (str): dml_ep's arithmetic, or None for dml_ep's default.
            ort_release (str): The onnxruntime release whose rewrites apply, or None for dml_ep's default.
        """
        self.feature_level = args_util.get(args, "dml_ep_feature_level")
        self.arithmetic = args_util.get(args, "dml_ep_arithmetic")
        self.ort_release = args_util.get(args, "dml_ep_ort_release")

    def add_to_script_impl(self, script):
        # The model as OnnxrtSessionArgs hands it to onnxruntime: through Polygraphy's ONNX loaders
        # when an option changes it (--onnx-outputs, shape inference, ...), else the path as given.
        if self.arg_groups[OnnxLoadArgs].must_use_onnx_loader():
            model = self.arg_groups[OnnxLoadArgs].add_to_script(script, serialize_model=True)
        else:
            model = self.arg_groups[ModelArgs].path
        script.add_import(imports=["DmlEpRunner"], frm="dml_ep.interop.polygraphy_plugin")
        script.add_runner(make_invocable(
            "DmlEpRunner", model,
            graph_optimization_level=self.arg_groups[OnnxrtSessionArgs].graph_optimization_level,
            feature_level=self.feature_level, arithmetic=self.arithmetic, qdq_rules=self.ort_release,
        ))


def export_argument_groups() -> list:
    """The entry point ``polygraphy run`` calls (group ``polygraphy.run.plugins``): its argument groups."""
    return [DmlEpRunnerArgs()]
