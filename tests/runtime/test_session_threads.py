"""One session from many threads, and over many runs: what an application serving a model does.

Each thread runs the session on inputs of its own; every result must equal, bit for bit, the one
the same session gave for that input on one thread (the kernels' caches and scratch buffers are
shared by the session's runs). And the process's memory stays flat over thousands of runs.
"""

from __future__ import annotations

import concurrent.futures
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import dml_ep
from dml_ep.core.graph import load_model
from dml_ep.runtime.inputs import random_inputs

MODELS = Path(__file__).resolve().parents[2] / "models"
THREADS = 8


def hammer(session, cases: list[dict], expected: list[list[np.ndarray]], seconds: float) -> int:
    """Run ``cases`` from THREADS threads for ``seconds``; each result checked; the runs made."""
    deadline = time.monotonic() + seconds

    def worker(start: int) -> int:
        runs = 0
        while time.monotonic() < deadline:
            index = (start + runs) % len(cases)
            for actual, wanted in zip(session.run(None, cases[index]), expected[index], strict=True):
                np.testing.assert_array_equal(actual, wanted, strict=True)
            runs += 1
        return runs

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        return sum(pool.map(worker, range(THREADS)))


@pytest.mark.parametrize("seconds", [3, pytest.param(60, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["small_cnn.qdq", "transformer_block.dynamic"])
def test_runs_from_eight_threads_equal_the_single_threaded_ones(name, seconds):
    session = dml_ep.InferenceSession(str(MODELS / f"{name}.onnx"))
    model = load_model(str(MODELS / f"{name}.onnx"))
    cases = [random_inputs(model, seed=seed) for seed in range(THREADS * 2)]
    expected = [session.run(None, case) for case in cases]
    assert hammer(session, cases, expected, seconds) > THREADS


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_memory_stays_flat_over_two_thousand_runs():
    """After the first 200 runs (caches warm), 1,800 more add no more than a few megabytes."""
    session = dml_ep.InferenceSession(str(MODELS / "small_cnn.qdq.onnx"))
    model = load_model(str(MODELS / "small_cnn.qdq.onnx"))
    cases = [random_inputs(model, seed=seed) for seed in range(10)]
    for run in range(200):
        session.run(None, cases[run % len(cases)])
    warm = rss_mb()
    for run in range(1800):
        session.run(None, cases[run % len(cases)])
    assert rss_mb() - warm < 8, (warm, rss_mb())
