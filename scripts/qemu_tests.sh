#!/usr/bin/env bash
# The host-sensitive tests (pytest -m host_sensitive: integer products and rounding compared with
# the host's onnxruntime) on two emulated x86-64 CPUs, so that a result that only holds on the CPU
# at hand fails wherever it is run:
#   Haswell: AVX2 without VNNI, onnxruntime's uint8 x int8 GEMMs saturate, dml_ep's x86-64-v3 kernels run;
#   Nehalem: no AVX, onnxruntime's SSE kernels, dml_ep's baseline kernels run.
# Both run at once (one core each), with the Python on PATH (the project's venv). Needs qemu-user
# (apt-get install qemu-user); without it, or off x86-64, this says so and passes, unless
# DML_EP_REQUIRE_QEMU is set (CI), when it fails. Then, natively, the tests marked qemu_stage, which start
# qemu-x86_64 themselves (the default run leaves them out). Extra arguments go to pytest.
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
# only the modules holding marked tests (collecting the others, the ONNX backend's hundreds of node
# tests, would take minutes under emulation): the marks as pytest reads them, module-level pytestmark
# and parametrized marks too, from a native collection
files=$("$python" -m pytest --collect-only -q -p no:cacheprovider -m host_sensitive 2>/dev/null | sed -n 's/::.*//p' | sort -u)
if [ -z "$files" ]; then
    echo "qemu_tests: no test is marked host_sensitive (or the collection failed)" >&2
    exit 1
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The CPUs, each without the features QEMU's TCG lacks (it warns about each, on every process's stderr).
declare -A cpus=([Haswell]="Haswell,-pcid,-x2apic,-tsc-deadline,-hle,-invpcid,-rtm" [Nehalem]="Nehalem")
pids=()
for cpu in Haswell Nehalem; do
    # DML_EP_QEMU_CPU: tests/conftest.py runs a test's child Pythons (dml-ep, polygraphy, python -c) under
    # qemu-x86_64 on the same CPU, since qemu-user would run them on the real one; not native_children:
    # tests whose children cannot be emulated (qemu itself, a browser).
    # OPENBLAS_CORETYPE, where the host sets it, forces OpenBLAS's kernel for the host's processor (Haswell's AVX2 on an
    # AMD EPYC): the emulated CPU's is forced instead, else numpy's first AVX instruction stops the Nehalem run at import.
    env ${OPENBLAS_CORETYPE:+OPENBLAS_CORETYPE=$cpu} DML_EP_QEMU_CPU="${cpus[$cpu]}" qemu-x86_64 -cpu "${cpus[$cpu]}" \
        "$python" -m pytest -q -p no:cacheprovider -m "host_sensitive and not native_children" $files "$@" >"$logs/$cpu" 2>&1 &
    pids+=($!)
done
status=0
for i in 0 1; do
    wait "${pids[$i]}" || status=1
done
for cpu in Haswell Nehalem; do
    echo "== host-sensitive tests under qemu-x86_64 -cpu $cpu"
    cat "$logs/$cpu"
done
# then the tests that start qemu-x86_64 themselves (README's tour on an emulated AVX2 CPU), which the default run leaves out
echo "== tests that run tools under qemu-x86_64 themselves"
"$python" -m pytest -q -p no:cacheprovider -m qemu_stage "$@" || status=1
exit $status
