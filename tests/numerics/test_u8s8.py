"""onnxruntime's int16 pair saturation of uint8 x int8 products (VPMADDUBSW), against hand-computed values.

This machine's CPU may have VNNI (then onnxruntime is exact and cannot show the saturation), so the
emulation is pinned by arithmetic: a = 255 and b = 127 everywhere make every pair
255*127 + 255*127 = 64770, which saturates to 32767.
"""

import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dml_ep
from dml_ep.numerics import arithmetic
from dml_ep.numerics.arithmetic import Arithmetic, cpu_flags, host_saturates_u8s8
from dml_ep.ort.reference import cpu_session
from onnx_builders import qlinear_conv, qlinear_matmul

SCALE = np.float32(200 / 64770)  # the exact pair sum 64770 maps to 200, the saturated 32767 to 101.17


def run(model, feeds, **session_options):
    return dml_ep.InferenceSession(model, **session_options).run(None, feeds)[0]


@pytest.mark.parametrize("k", [2, 8, 7])
def test_matmul_pairs_saturate(k):
    a = np.full((1, k), 255, np.uint8)
    b = np.full((k, 1), 127, np.int8)
    model, feeds = qlinear_matmul(a, np.float32(1), np.uint8(0), b, np.float32(1), np.int8(0), np.float32(1 / SCALE) * k / 2, np.uint8(0))
    exact = run(model, feeds, arithmetic="directml")
    saturated = run(model, feeds, arithmetic="onnxruntime", u8s8_saturation=True)
    pairs, odd = divmod(k, 2)
    # Hand-computed: K/2 saturated pairs (and an odd last product, which cannot saturate), times the output scale.
    expected = round((pairs * 32767 + odd * 255 * 127) * (2 / k) * float(SCALE))
    assert exact.item() == 200
    assert saturated.item() == expected
    assert expected < 200


def test_zero_points_apply_after_saturation():
    """Saturation acts on raw codes; the zero-point terms are exact int32 corrections after it."""
    a = np.full((1, 2), 255, np.uint8)
    b = np.full((2, 1), 127, np.int8)
    model, feeds = qlinear_matmul(a, np.float32(1), np.uint8(5), b, np.float32(1), np.int8(0), np.float32(1000), np.uint8(0))
    saturated = run(model, feeds, arithmetic="onnxruntime", u8s8_saturation=True)
    # sat(255*127*2) - za * sum(b) = 32767 - 5 * 254 = 31497 -> 31.497 -> 31
    assert saturated.item() == 31


def test_conv_pairs_follow_tap_major_k_order():
    """A 1x2 kernel over 1 channel, 2 filters (not depthwise): K = tap * Cg + ic pairs the two taps."""
    x = np.full((1, 1, 1, 2), 255, np.uint8)
    w = np.full((2, 1, 1, 2), 127, np.int8)
    model, feeds = qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.int8(0), np.float32(1 / SCALE), np.uint8(0))
    assert np.all(run(model, feeds, arithmetic="directml") == 200)
    assert np.all(run(model, feeds, arithmetic="onnxruntime", u8s8_saturation=True) == round(32767 * float(SCALE)))


def test_depthwise_conv_does_not_saturate():
    """MLAS's depthwise kernels (one input and one output channel per group) widen to int16: exact."""
    x = np.full((1, 2, 1, 2), 255, np.uint8)
    w = np.full((2, 1, 1, 2), 127, np.int8)
    model, feeds = qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.int8(0), np.float32(1 / SCALE), np.uint8(0), group=2)
    assert np.all(run(model, feeds, arithmetic="onnxruntime", u8s8_saturation=True) == 200)


def saturating_cases():
    """The hand-computed QLinearMatMul and QLinearConv above: exact 200, saturated 101."""
    a, b = np.full((1, 2), 255, np.uint8), np.full((2, 1), 127, np.int8)
    x, w = np.full((1, 1, 1, 2), 255, np.uint8), np.full((2, 1, 1, 2), 127, np.int8)
    return [
        qlinear_matmul(a, np.float32(1), np.uint8(0), b, np.float32(1), np.int8(0), np.float32(1 / SCALE), np.uint8(0)),
        qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.int8(0), np.float32(1 / SCALE), np.uint8(0)),
    ]


@pytest.mark.host_sensitive
@pytest.mark.parametrize("model, feeds", saturating_cases(), ids=["QLinearMatMul", "QLinearConv"])
def test_host_probe_agrees_with_onnxruntime(model, feeds):
    """The probe's MatMulInteger predicts what this host's onnxruntime does in the QLinear operators."""
    expected = cpu_session(model).run(None, feeds)[0]
    assert np.all(expected == (101 if host_saturates_u8s8() else 200))
    assert np.array_equal(run(model, feeds, arithmetic="onnxruntime"), expected)


@pytest.mark.host_sensitive
def test_host_probe_runs_once(monkeypatch):
    """Every session with arithmetic="onnxruntime" asks; only the first may pay for an onnxruntime session."""
    sessions = []

    def counting_session(*args, **kwargs):
        sessions.append(args)
        return cpu_session(*args, **kwargs)

    monkeypatch.setattr(arithmetic, "cpu_session", counting_session)
    host_saturates_u8s8.cache_clear()
    answers = {host_saturates_u8s8(), Arithmetic("onnxruntime").u8s8_saturation, Arithmetic("onnxruntime").u8s8_saturation}
    assert len(answers) == 1 and len(sessions) == 1


def test_cpu_flags_without_proc_cpuinfo(monkeypatch):
    """Windows and macOS have no /proc/cpuinfo: the report falls back to the machine's names."""

    def no_file(*args, **kwargs):
        raise FileNotFoundError("/proc/cpuinfo")

    monkeypatch.setattr(arithmetic, "open", no_file, raising=False)
    cpu_flags.cache_clear()
    try:
        assert cpu_flags() == {name for name in (platform.machine(), platform.processor()) if name}
    finally:
        cpu_flags.cache_clear()


QEMU = shutil.which("qemu-x86_64")


@pytest.mark.native_children  # its child processes run on the real CPU under qemu-user
@pytest.mark.host_sensitive
@pytest.mark.skipif(QEMU is None or platform.machine() != "x86_64", reason="needs qemu-user (apt-get install qemu-user) on x86-64")
def test_emulation_matches_onnxruntime_on_an_emulated_avx2_cpu():
    """QEMU presents a Haswell (AVX2, no VNNI) to onnxruntime, whose MLAS then saturates; dml_ep's
    emulation must give the same codes, on a run where saturation did change outputs, and its probe
    of the host must say so."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "check_u8s8_saturation.py"
    result = subprocess.run([QEMU, "-cpu", "Haswell", sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    changed = [int(n) for n in re.findall(r"(\d+) changed by saturation", result.stdout)]
    assert sum(changed) > 0, result.stdout  # onnxruntime really saturated under the emulated CPU
    assert "host_saturates_u8s8(): True" in result.stdout, result.stdout
