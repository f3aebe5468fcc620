#!/usr/bin/env bash
# The host-sensitive tests (pytest -m host_sensitive: integer products and rounding compared with
# the host's onnxruntime) on two emulated x86-64 CPUs, so that a result that only holds on the CPU
# at hand fails wherever it is run:
#   Haswell: AVX2 without VNNI, onnxruntime's uint8 x int8 GEMMs saturate, dml_ep's x86-64-v3 kernels run;
#   Nehalem: no AVX, onnxruntime's SSE kernels, dml_ep's baseline kernels run.
# Both run at once (one core each), with the Python on PATH (the project's venv). Needs qemu-user
# (apt-get install qemu-user); without it, or off x86-64, this says so and passes, unless
# DML_EP_REQUIRE_QEMU is set (CI), when it fails. Extra arguments go to pytest.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v qemu-x86_64 >/dev/null || [ "$(uname -m)" != x86_64 ]; then
    if [ -n "${DML_EP_REQUIRE_QEMU:-}" ]; then
        echo "qemu_tests: qemu-x86_64 on an x86-64 machine is required here (apt-get install qemu-user)" >&2
        exit 1
    fi
    echo "qemu_tests: skipped (needs qemu-x86_64 on x86-64: apt-get install qemu-user)"
    exit 0
fi
python=$(command -v python)
# only the modules holding marked tests: collecting the others (the ONNX backend's hundreds of node
# tests) would take minutes under emulation
files=$(grep -l "mark.host_sensitive" tests/test_*.py | grep -v test_host_sensitive_marks.py)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
for cpu in Haswell Nehalem; do
    # not native_children: qemu-user would run a test's child processes on the real CPU.
    # OPENBLAS_CORETYPE, where the host sets it, forces OpenBLAS's kernel for the host's processor (Haswell's AVX2 on an
    # AMD EPYC): the emulated CPU's is forced instead, else numpy's first AVX instruction stops the Nehalem run at import.
    env ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$cpu} qemu-x86_64 -cpu "$cpu" \
        "$python" -m pytest -q -p no:cacheprovider -m "host_sensitive and not native_children" $files "$@" >"$logs/$cpu" 2>&1 &
    pids+=($!)
done
status=0
for i in 0 1; do
    wait "${pids[$i]}" || status=1
done
for cpu in Haswell Nehalem; do
    echo "== host-sensitive tests under qemu-x86_64 -cpu $cpu"
    grep -v "TCG doesn't support requested feature" "$logs/$cpu"
done
exit $status
