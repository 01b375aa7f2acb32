"""halfscope: the core kernels of observational science in mixed precision on NVIDIA tensor
cores, and on the CPU where there is no GPU.

    import halfscope as hs
    out = hs.convolve2d(image, kernel, mode="same", precision="mixed")      # scipy.signal's API
    cc = hs.matched_filter(templates, moveouts, weights, data, step=1)     # Fast Matched Filter's
    result = hs.deconvolve(dirty, psf, solver="cg", precision="split")     # study 000
    R = hs.ao.reconstructor(Cmm, Ctm, policy="band:SP=2,HP1=rest")         # study 002

Arrays from NumPy, CuPy and PyTorch are taken without copies and results come back as the same
kind of array on the same device; the GIL is released while the library computes; the library's
errors are raised as the exception classes below, with the library's message. docs/python.md
has the whole guide.
"""

from __future__ import annotations

from . import _core
from ._core import (CudaError, Error, InvalidInput, IoError, NotPositiveDefinite,
                    NumericalError, Unsupported, cuda_available)
from . import ao, eqcorrscan, linalg, simulate
from .conv import ConvPlan, convolve2d, correlate2d, fftconvolve
from .deconv import DeconvResult, apply_psf, deconvolve, tikhonov_criterion, tikhonov_exact
from .mfilter import detect, matched_filter, matched_filter_detect

#: The library's version (CMakeLists.txt's project VERSION, which pyproject.toml reads too).
__version__ = _core.version()

__all__ = [
    "Error", "InvalidInput", "IoError", "Unsupported", "CudaError", "NumericalError",
    "NotPositiveDefinite", "info", "cuda_available", "ConvPlan", "convolve2d", "correlate2d",
    "fftconvolve",
    "deconvolve", "DeconvResult", "tikhonov_exact", "tikhonov_criterion", "apply_psf",
    "matched_filter", "matched_filter_detect", "detect", "simulate", "ao", "linalg",
    "eqcorrscan", "io", "plots",
]


def info() -> dict:
    """Devices, backends and versions: {'version', 'build_type', 'options' ({'HALFSCOPE_WITH_CUDA':
    bool, ...}), 'cuda_built', 'status', 'driver_version', 'runtime_version', 'devices': [{'index',
    'name', 'cc', 'multiprocessors', 'memory_bytes', 'l2_bytes'}]}."""
    return dict(_core.info())


def __getattr__(name):
    # hs.io (ObsPy, astropy) and hs.plots (matplotlib) import their optional packages lazily.
    if name in ("io", "plots"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'halfscope' has no attribute {name!r}")
