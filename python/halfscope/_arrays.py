"""The array boundary of the Python layer: which framework an argument comes from, the CUDA
stream to order with, and how results go back as the caller's kind of array.

NumPy arrays, CuPy arrays and PyTorch tensors reach the compiled core without a copy (nanobind
imports them through DLPack or the buffer protocol). The few conversions that do copy are
named where they happen: Python lists and scalars (made NumPy arrays), NumPy arrays in a
non-native byte order, torch tensors that require grad (detached, not copied), and an argument
whose framework or device differs from the first array's (moved to it, as SciPy would not).
"""

from __future__ import annotations

import numpy as np

from . import _core

__all__ = ["framework_of", "prepare", "is_device", "stream_handle", "device_name", "like"]


def framework_of(x) -> str:
    """'numpy', 'cupy' or 'torch': the kind of array `x` is (anything else counts as NumPy)."""
    module = type(x).__module__
    if module.startswith("cupy"):
        return "cupy"
    if module.startswith("torch"):
        return "torch"
    return "numpy"


def is_device(x) -> bool:
    """Whether `x` lives in CUDA device memory."""
    kind = framework_of(x)
    if kind == "cupy":
        return True
    if kind == "torch":
        return bool(x.is_cuda)
    return False


def prepare(x, name: str, like_array=None):
    """`x` as an array the core takes without a copy where possible.

    With `like_array`, an argument of another framework or device is moved to that of
    `like_array` (a copy, so that an operation never mixes host and device operands).
    """
    if x is None:
        return None
    kind = framework_of(x)
    if kind == "torch":
        if x.requires_grad:
            x = x.detach()
    elif kind == "numpy":
        x = np.asarray(x)
        if x.dtype.byteorder not in ("=", "|"):
            x = x.astype(x.dtype.newbyteorder("="))
        if x.dtype == np.bool_:
            x = x.astype(np.uint8)
        if x.dtype.kind == "O":
            raise _core.InvalidInput(
                f"Python argument '{name}': expected a numeric array, found dtype object")
    if like_array is not None and (kind != framework_of(like_array)
                                   or is_device(x) != is_device(like_array)):
        x = like(to_numpy(x), like_array)
    return x


def to_numpy(x) -> np.ndarray:
    """A NumPy copy (device arrays) or view (host arrays) of `x`; torch bfloat16 becomes float32
    (NumPy has no bfloat16; float32 holds every value exactly)."""
    kind = framework_of(x)
    if kind == "cupy":
        return x.get()
    if kind == "torch":
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def stream_handle(stream, reference) -> int:
    """The CUDA stream handle to order with: `stream` itself (an int, or an object with `.ptr`
    like CuPy's or `.cuda_stream` like torch's), or for None the current stream of the
    framework of `reference` (0, the legacy default stream, for host data)."""
    if stream is not None:
        for attribute in ("ptr", "cuda_stream"):
            if hasattr(stream, attribute):
                return int(getattr(stream, attribute))
        return int(stream)
    if not is_device(reference):
        return 0
    kind = framework_of(reference)
    if kind == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    import torch

    return int(torch.cuda.current_stream(reference.device).cuda_stream)


def device_name(device, *arrays) -> str:
    """The core's device string: None means where the data are ('cuda' for device arrays,
    else 'auto': the GPU when present)."""
    if device is None:
        return "cuda" if any(is_device(a) for a in arrays if a is not None) else "auto"
    text = str(device).lower()
    if text == "gpu":
        return "cuda"
    if text not in ("auto", "cpu", "cuda"):
        raise _core.InvalidInput(f"device '{device}': expected None, 'auto', 'cpu' or 'cuda'")
    return text


def like(result, reference):
    """`result` (a NumPy array, or already the right kind) as the kind of array `reference`
    is, on its device. Host results for device references are copied to the device."""
    kind = framework_of(reference)
    if kind == framework_of(result) and is_device(result) == is_device(reference):
        return result
    if kind == "cupy":
        import cupy

        with cupy.cuda.Device(reference.device.id):
            return cupy.asarray(result)
    if kind == "torch":
        import torch

        tensor = torch.from_numpy(np.ascontiguousarray(to_numpy(result)))
        return tensor.to(reference.device)
    return to_numpy(result)
