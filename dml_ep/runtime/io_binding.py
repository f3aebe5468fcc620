"""onnxruntime's IOBinding for dml_ep's sessions: inputs and outputs bound by name before a run.

dml_ep runs on the CPU, so every binding is in the CPU's memory, as with onnxruntime's CPU EP: a
bound array or raw buffer is read when the session runs, not when it is bound (a change between
the two is seen, as in onnxruntime), and an output bound to a buffer is written into it. Binding
an input on another device ('cuda', 'dml') fails, as in an onnxruntime without that device. An
output bound to another device without a buffer lands on the CPU, as there: ``copy_outputs_to_cpu``
then gives it, so a script written for the real DML EP runs. Errors are onnxruntime's where they
happen (a name the model lacks: an input when bound, an output at the run) and of its types.
"""

from __future__ import annotations

import ctypes

import numpy as np
import onnx
import onnxruntime

from ..core.errors import BindingError, FeedError

# What onnxruntime's OrtDevice.make takes: another is "Unsupported device type"
DEVICE_TYPES = ("cpu", "cuda", "cann", "dml", "webgpu", "gpu", "npu")


class IOBinding:
    """Like onnxruntime's IOBinding (``session.io_binding()``), for a dml_ep session."""

    def __init__(self, session) -> None:  # a dml_ep.InferenceSession (which imports this module)
        self.session = session
        self._inputs: dict[str, object] = {}  # name -> array, raw-buffer view or OrtValue, read at the run
        self._outputs: dict[str, np.ndarray | None] = {}  # name -> the buffer to write it in; None: allocated by the run
        self._results: list[np.ndarray] = []  # of the last run, in the order the outputs were bound

    def bind_cpu_input(self, name: str, arr_on_cpu) -> None:
        """Bind an input to an array in the CPU's memory."""
        if not isinstance(arr_on_cpu, np.ndarray):
            raise BindingError("Unable to create OrtValue from the given python object")
        if name not in self._input_names():
            raise BindingError(f"Failed to find NodeArg with name: {name} in the def list")
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name: str, device_type: str, device_id: int, element_type, shape, buffer_ptr: int) -> None:
        """Bind an input to a buffer at ``buffer_ptr`` of ``element_type`` (a numpy type or an ONNX
        element type number) and ``shape``."""
        _check_device(device_type, "input")
        self._check_input_name(name)
        self._inputs[name] = host_array(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name: str, ortvalue) -> None:
        self._check_input_name(name)
        _check_ortvalue(ortvalue)
        self._inputs[name] = ortvalue

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type=None, shape=None,
                    buffer_ptr: int | None = None) -> None:
        """Bind an output: with ``buffer_ptr`` (and ``element_type`` and ``shape``), the run writes it
        there; without, the run allocates it. A name the model lacks fails at the run, as in onnxruntime."""
        _check_known(device_type)
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise FeedError("`element_type` and `shape` are to be provided if pre-allocated memory is provided")
        if device_type != "cpu":  # onnxruntime's CPU build writes there as if it were the CPU's: dml_ep refuses
            raise BindingError(f"cannot write output {name!r} in a buffer on the {device_type} device: dml_ep runs on the CPU "
                               "and has no other device's memory (bind it on 'cpu', or without a buffer)")
        self._outputs[name] = host_array(buffer_ptr, element_type, shape)

    def bind_ortvalue_output(self, name: str, ortvalue) -> None:
        _check_ortvalue(ortvalue)
        self._outputs[name] = ortvalue.numpy()  # a CPU OrtValue's array shares its buffer: the run writes there

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: dml_ep's inputs are in the CPU's memory."""

    def synchronize_outputs(self) -> None:
        """Nothing to wait for: dml_ep's outputs are in the CPU's memory."""

    def get_outputs(self) -> list:
        """The outputs of the last run, as OrtValues sharing their arrays (a bound buffer's included)."""
        return [onnxruntime.OrtValue.ortvalue_from_numpy(array) for array in self._results]

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        return [array.copy() for array in self._results]

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = []

    def run(self, run_options=None) -> None:
        """The session's run on the bound inputs into the bound outputs (``run_with_iobinding``).
        An output it allocates is a new array at every run (onnxruntime writes the next run in the
        last one's where the shape stays)."""
        self._results = []
        if not self._outputs:
            raise BindingError("Error in execution: At least one output should be requested.")
        feeds = {name: value.numpy() if isinstance(value, onnxruntime.OrtValue) else value for name, value in self._inputs.items()}
        try:
            results = self.session.run(list(self._outputs), feeds, run_options)
        except FeedError as error:
            raise BindingError(f"Error in execution: {error}") from error
        written = [(name, buffer, result) for (name, buffer), result in zip(self._outputs.items(), results) if buffer is not None]
        for name, buffer, result in written:  # all checked before any is written
            if buffer.dtype != result.dtype or buffer.shape != result.shape:
                raise BindingError(f"Error in execution: output {name!r} is bound to a buffer of {buffer.dtype} {list(buffer.shape)}; "
                                   f"the run gives {result.dtype} {list(result.shape)}")
        for _, buffer, result in written:
            np.copyto(buffer, result)
        self._results = [result if buffer is None else buffer for buffer, result in zip(self._outputs.values(), results)]

    def _input_names(self) -> set[str]:
        return {arg.name for arg in self.session.get_inputs()}

    def _check_input_name(self, name: str) -> None:
        if name not in self._input_names():
            raise BindingError(f"Error when binding input: Failed to find input name in the mapping: {name}")


def host_array(buffer_ptr: int, element_type, shape) -> np.ndarray:
    """The array at ``buffer_ptr`` in the CPU's memory (not copied), as onnxruntime reads a bound
    buffer: ``element_type`` a numpy type or an ONNX element type number."""
    if isinstance(element_type, int):
        try:
            element_type = onnx.helper.tensor_dtype_to_np_dtype(element_type)
        except KeyError:
            raise BindingError(f"tensor type {element_type} is not supported") from None
    dtype = np.dtype(element_type)
    if dtype.kind in "OSU":
        raise BindingError("Only binding non-string Tensors is currently supported")
    shape = tuple(int(size) for size in shape)
    if not buffer_ptr or any(size < 0 for size in shape):
        raise BindingError(f"cannot bind a buffer at {buffer_ptr!r} of shape {list(shape)}")
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(buffer_ptr), dtype, count).reshape(shape)


def _check_known(device_type: str) -> None:
    if device_type not in DEVICE_TYPES:
        raise BindingError(f"Unsupported device type: {device_type}")


def _check_device(device_type: str, what: str) -> None:
    """Inputs are read in the CPU's memory: another device's fails as onnxruntime fails without it."""
    _check_known(device_type)
    if device_type != "cpu":
        raise BindingError(f"Error when binding {what}: there is no {device_type} device to copy it from: dml_ep runs on "
                           "the CPU (onnxruntime: there's no data transfer registered for copying tensors from that device)")


def _check_ortvalue(ortvalue) -> None:
    if not isinstance(ortvalue, onnxruntime.OrtValue):
        raise BindingError(f"an OrtValue is expected, not {type(ortvalue).__name__}")
    if ortvalue.device_name() != "cpu":
        _check_device(ortvalue.device_name(), "an OrtValue")
