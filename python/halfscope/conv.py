"""Single-channel 2-D convolution (study 000) with the signatures of scipy.signal."""

from __future__ import annotations

from . import _arrays, _core

__all__ = ["ConvPlan", "convolve2d", "correlate2d", "fftconvolve"]

_BOUNDARIES = {"fill": "zero", "zero": "zero", "wrap": "circular", "circular": "circular"}


def _boundary(boundary: str, fillvalue) -> str:
    """SciPy's boundary name (and fillvalue) as the core's: 'zero' or 'circular'."""
    name = str(boundary).lower()
    if name == "symm":
        raise _core.Unsupported(
            "boundary 'symm': halfscope supports 'fill' (with fillvalue 0) and 'wrap'")
    if name not in _BOUNDARIES:
        raise _core.InvalidInput(
            f"boundary '{boundary}': expected 'fill', 'wrap' (or 'zero', 'circular')")
    if fillvalue != 0:
        raise _core.Unsupported(
            f"fillvalue {fillvalue!r}: halfscope's 'fill' boundary pads with zeros only")
    return _BOUNDARIES[name]


def _run(in1, in2, mode, boundary, fillvalue, correlate, method, precision, device, stream):
    """One core call for convolve2d / correlate2d / fftconvolve; the result goes back to in1's
    kind and device (a device input run with device='cpu' computes on the host)."""
    a = _arrays.prepare(in1, "in1")
    k = _arrays.prepare(in2, "in2", like_array=a)
    out = _core.convolve2d(
        a, k, str(mode).lower(), _boundary(boundary, fillvalue), correlate, str(method).lower(),
        str(precision).lower(), _arrays.device_name(device, a, k), _arrays.framework_of(a),
        _arrays.stream_handle(stream, a))
    return _arrays.like(out, a)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, *, method="auto",
               precision="single", device=None, stream=None):
    """Convolve two 2-D arrays, as ``scipy.signal.convolve2d``.

    Parameters
    ----------
    in1, in2 : array_like (NumPy, CuPy or torch), 2-D, real
        The image and the kernel. Taken without a copy; ``in2`` is moved to ``in1``'s
        framework and device when they differ.
    mode : {'full', 'same', 'valid'}
        SciPy's output sizes; 'same' is centred as SciPy centres it; in 'valid' one input must
        contain the other (SciPy swaps them when the kernel is the larger).
    boundary : {'fill', 'wrap'}
        'fill' pads with ``fillvalue`` (0 only); 'wrap' is circular. 'symm' raises
        ``halfscope.Unsupported``.
    method : str
        'auto' (measured on the first call of a shape on the GPU), or one of 'direct', 'fft'
        (CPU), 'naive', 'register', 'fft', 'gemm', 'cudnn', 'tensor', 'separable' (GPU).
    precision : str
        'double', 'single', 'tf32', 'half', 'mixed', 'bf16' or 'split'.
    device : {None, 'auto', 'cpu', 'cuda'}
        None: where the data are (host data -> the GPU when present).
    stream : CUDA stream, optional
        Ordered with halfscope's work (default: the framework's current stream).

    Returns
    -------
    array of the caller's kind, on the input's device, in the precision's storage dtype
    (float64 for double, float32 for single/tf32/split, float16 for half/mixed, bfloat16 for
    bf16 with torch and float32 with NumPy and CuPy, which have no bfloat16).
    """
    return _run(in1, in2, mode, boundary, fillvalue, False, method, precision, device, stream)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, *, method="auto",
                precision="single", device=None, stream=None):
    """Cross-correlate two 2-D arrays, as ``scipy.signal.correlate2d`` (arguments as
    :func:`convolve2d`)."""
    return _run(in1, in2, mode, boundary, fillvalue, True, method, precision, device, stream)


def fftconvolve(in1, in2, mode="full", axes=None, *, precision="single", device=None,
                stream=None):
    """Convolve two 2-D arrays by FFT, as ``scipy.signal.fftconvolve`` (2-D inputs only; ``axes``
    None or both axes). Half precision pads to powers of two and pre-scales by 1/sqrt(N) so
    that nothing overflows (study 000 section V)."""
    if axes is not None:
        chosen = sorted(int(a) % 2 for a in (axes if hasattr(axes, "__len__") else [axes]))
        if chosen != [0, 1]:
            raise _core.Unsupported(
                f"axes={axes!r}: halfscope's fftconvolve transforms both axes of 2-D inputs")
    return _run(in1, in2, mode, "fill", 0, False, "fft", precision, device, stream)


class ConvPlan:
    """A kernel prepared once for many convolutions with the same options (like an FFTW plan).

    The kernel is converted to the precision's storage type, flipped for ``correlate=True`` and,
    for the GPU's 'separable' method and 'auto', factored here, once: a call on device arrays
    then neither converts the kernel nor reads it back (a synchronisation per call otherwise),
    so calls on a stream of images queue up behind each other. The plan keeps its own copy of
    the kernel. Calling it gives what :func:`convolve2d` (or :func:`correlate2d`) gives with the
    same arguments.

    >>> blur = hs.ConvPlan(psf, mode="same", precision="mixed")
    >>> out = [blur(frame) for frame in frames]   # CuPy / torch frames stay on the GPU

    Arguments as :func:`convolve2d`, less the image; ``correlate=True`` plans
    :func:`correlate2d`.
    """

    def __init__(self, kernel, mode="full", boundary="fill", fillvalue=0, *, correlate=False,
                 method="auto", precision="single", device=None):
        k = _arrays.prepare(kernel, "kernel")
        # Checked here, not at the first call: a plan that cannot run should not be made.
        if k.ndim != 2 or 0 in tuple(k.shape):
            raise _core.InvalidInput(f"Python argument 'kernel': expected a non-empty 2-D array, "
                                     f"found shape {tuple(k.shape)}")
        self._plan = _core.ConvPlan(k, str(mode).lower(), _boundary(boundary, fillvalue),
                                    bool(correlate), str(method).lower(),
                                    str(precision).lower(), _arrays.device_name(device, k))

    def __call__(self, image, *, stream=None):
        """The convolution of ``image`` (2-D, NumPy, CuPy or torch) with the plan's kernel, as
        the caller's kind of array on the image's device."""
        a = _arrays.prepare(image, "image")
        out = self._plan(a, _arrays.framework_of(a), _arrays.stream_handle(stream, a))
        return _arrays.like(out, a)

    def resolve_method(self, image) -> str:
        """The method a call on ``image`` runs ('auto' resolved)."""
        return self._plan.resolve_method(_arrays.prepare(image, "image"))
