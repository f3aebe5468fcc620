"""What a kernel keeps between runs: the state the executor owns for the kernel of one signature's
entries (the same desc on the same constants), handed to the kernel at every run."""

from __future__ import annotations

import dataclasses
from typing import Any, Hashable

import numpy as np

from .nodes import Imported

# shared[field][PRODUCER]: (the value, the desc and the tensors of the operator that made it from constants), noted by the
# executor, so that a kernel may read the value as its maker's inputs (a GEMM a MatMulNBits' weight as its 4-bit codes)
PRODUCER = "made by"


@dataclasses.dataclass(eq=False, slots=True)
class KernelState:
    """One signature's kernel state: made by the executor when the first of its entries runs (or
    by whoever runs a lone desc, empty), so that the entries share one prepared kernel and one
    engine product of their weight, each binding its own inputs."""

    imported: Imported = dataclasses.field(default_factory=Imported)  # what the importer noted (nothing for a desc run without a node)
    constants: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # the buffers bound at initialization
    prepared: dict[tuple, Any] = dataclasses.field(default_factory=dict)  # a quantized product's, per engine and arithmetic
    products: dict[tuple, Any] = dataclasses.field(default_factory=dict)  # the engine's, which the arithmetics' prepared products share
    outputs: dict[tuple, Any] = dataclasses.field(default_factory=dict)  # of a node reading constants alone, per arithmetic and engine
    derived: dict[Hashable, Any] = dataclasses.field(default_factory=dict)  # what a kernel works out once (a filter matrix), by its own key
    # by field bound to a value made from constants alone (a MatMulNBits' weight): what a kernel works out from that value once per
    # session, shared by every state reading it (the entries of other shapes), keyed by all else it depends on (the field's desc)
    shared: dict[str, dict[Hashable, Any]] = dataclasses.field(default_factory=dict)
