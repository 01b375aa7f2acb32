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

__all__ = ["framework_of", "prepare", "is_device", "stream_handle", "device_name", "like",
           "floating", "first_non_finite"]


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
    `like_array` (a copy, so that an operation never mixes host and device operands). None is a
    TypeError naming `name` (optional arrays are tested for None before they get here).
    """
    if x is None:
        raise TypeError(f"Python argument '{name}': expected an array (NumPy, CuPy, torch or a "
                        f"nested list of numbers), found None")
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
        text = "cuda"
    if text not in ("auto", "cpu", "cuda"):
        raise _core.InvalidInput(f"device '{device}': expected None, 'auto', 'cpu' or 'cuda'")
    if text == "cuda" and not _core.cuda_available():
        # Said here in the Python spelling: the library's own message names the CLI's --device.
        report = _core.info()
        driver = report["driver_version"] or "none"
        raise _core.Unsupported(f"device={device!r}: no CUDA device (driver: {driver}; "
                                f"{report['status']}); use device='cpu' or 'auto'")
    return text


def floating(x):
    """`x` when its dtype is floating (or complex, which the core rejects naming the argument),
    else a float64 copy of the same kind on the same device: for the operations whose library
    entry point reads floating arrays only, so that integer input is taken as everywhere else."""
    kind = framework_of(x)
    if kind == "torch":
        import torch

        return x if x.is_floating_point() or x.is_complex() else x.to(torch.float64)
    if x.dtype.kind in "fc":
        return x
    return x.astype(np.float64)


def first_non_finite(x):
    """(index tuple, value) of the first NaN or infinity of `x` in C order, or None when every
    value is finite. Read in blocks of leading-axis slices (a few million elements each), so the
    check needs no mask the size of `x`; device arrays are checked on their device and only the
    verdict (and the one value) come back."""
    kind = framework_of(x)
    if kind == "torch":
        import torch

        if not (x.is_floating_point() or x.is_complex()):
            return None
        finite = torch.isfinite
    else:
        if x.dtype.kind not in "fc":
            return None
        xp = np
        if kind == "cupy":
            import cupy as xp
        finite = xp.isfinite
    whole = x.reshape(1) if x.ndim == 0 else x
    rows = max(1, (1 << 22) // max(1, int(np.prod(whole.shape[1:], dtype=np.int64))))
    for start in range(0, whole.shape[0], rows):
        bad = ~finite(whole[start:start + rows])
        if not bool(bad.any()):
            continue
        flat = bad.reshape(-1)
        first = int((flat.to(torch.uint8) if kind == "torch" else flat).argmax())
        index = list(int(i) for i in np.unravel_index(first, tuple(bad.shape)))
        index[0] += start
        index = tuple(index[1:]) if x.ndim == 0 else tuple(index)
        return index, x[index].item()
    return None


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
