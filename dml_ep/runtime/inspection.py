"""``dml-ep inspect``'s plan of a model: for the input shapes given, or from the tensors of a run on
the inputs given, which also plans the nodes whose input shapes depend on data."""

from __future__ import annotations

import onnx

from ..core.graph import Loaded, load_model
from ..planning.plan import Plan
from ..planning.planner import Planner
from ..reports.text import Progress
from .inputs import input_shapes, make_feeds, naming_random_inputs
from .session import InferenceSession


def inspect_plan(path: str, shapes: dict[str, tuple[int, ...]], feature_level: str, qdq_rules: str | None, progress: Progress,
                 seed: int = 0, inputs=(), input_dir: str | None = None, val_range=()) -> tuple[onnx.ModelProto, Planner, Plan]:
    """The model at ``path`` (its ``shapes`` checked against it), its planner and its plan: for
    ``shapes``, or, given ``inputs`` (``NAME=FILE``) or ``input_dir``, of a run on them (the inputs
    not given seeded random ones, as ``run`` makes them). ``progress`` says where it is, cleared
    once planned."""
    progress("loading")
    model = load_model(path)
    input_shapes(model, shapes)  # checks them
    try:
        return model, *_planned(model, shapes, feature_level, qdq_rules, progress, seed, inputs, input_dir, val_range)
    finally:
        progress.clear()


def _planned(model: onnx.ModelProto, shapes: dict, feature_level: str, qdq_rules: str | None, progress: Progress, seed: int,
             inputs, input_dir: str | None, val_range) -> tuple[Planner, Plan]:
    progress("applying onnxruntime's rewrites")
    if not (inputs or input_dir):
        planner = Planner(model, feature_level, qdq_rules=qdq_rules)
        progress("planning")
        return planner, planner.plan_for_shapes(shapes)
    feeds, sources = make_feeds(model, seed, inputs, input_dir, shapes, val_range)
    session = InferenceSession(Loaded(model), feature_level=feature_level, qdq_rules=qdq_rules)
    progress("running")
    with naming_random_inputs(sources):
        session.run(None, feeds)
    return session.planner, session.plan
