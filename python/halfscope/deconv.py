"""Tikhonov deconvolution of a dirty image (study 000): every solver in every precision."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import _arrays, _core

__all__ = ["DeconvResult", "deconvolve", "tikhonov_exact", "tikhonov_criterion", "apply_psf"]


@dataclass
class DeconvResult:
    """What :func:`deconvolve` returns. Unpacks as ``image, trace = result``.

    Attributes
    ----------
    image : float64 array of the dirty image's kind and device
    trace : dict of NumPy columns: iteration (int64), phase (list of str), criterion (J in FP64),
        criterion_solver (J as the solver computed it, NaN where it did not), step, elapsed_ms
        (solver time, tracing excluded), distance (to the exact solution, NaN without it)
    stop : 'iterations', 'target', 'stalled' or 'converged'; stop_detail says more
    iterations, solver_ms, exact_ms, device ('cpu' or 'cuda'), lipschitz (L = 2 (max|h^|^2 +
    lambda)), step (the fixed/initial step, NaN for optimal, CG and Wiener), condition (kappa(Q))
    """

    image: object
    trace: dict = field(default_factory=dict)
    stop: str = ""
    stop_detail: str = ""
    iterations: int = 0
    solver_ms: float = 0.0
    exact_ms: float = 0.0
    device: str = "cpu"
    lipschitz: float = 0.0
    step: float = float("nan")
    condition: float = 0.0

    def __iter__(self):
        return iter((self.image, self.trace))


def _trace_arrays(columns: dict) -> dict:
    """The core's trace columns as NumPy arrays (phase stays a list of names)."""
    out = {}
    for name, values in columns.items():
        if name == "phase":
            out[name] = list(values)
        elif name == "iteration":
            out[name] = np.asarray(values, dtype=np.int64)
        else:
            out[name] = np.asarray(values, dtype=np.float64)
    return out


def deconvolve(dirty, psf, solver="cg", precision="single", lam=0.01, iterations=200,
               boundary="circular", *, device=None, step=None, backtrack_retries=20,
               half_iterations=0, target_distance=0.0, trace_every=1, trace_distance=True,
               stream=None):
    """Minimise ``J(f) = ||g - H f||^2 + lam ||f||^2`` for the sky f.

    Parameters
    ----------
    dirty, psf : 2-D arrays of the same shape (NumPy, CuPy or torch); the PSF's origin is pixel
        (rows // 2, cols // 2), the centre of an fftshifted PSF.
    solver : {'fixed', 'optimal', 'backtracking', 'half-then-float', 'cg', 'wiener'}
    precision : {'double', 'single', 'half', 'mixed', 'split'}
    lam : float, the Tikhonov weight (study default 0.01); >= 0.
    iterations : int, operator iterations (half-then-float: both phases together).
    boundary : {'circular', 'zero'}
    step : float, the fixed step (None: 1 / L).
    backtrack_retries, half_iterations : see docs/deconv.md.
    target_distance : stop once ||f - f*|| / ||f*|| is below this (0: never).
    trace_every : record every k-th iteration (0: no trace); trace_distance: compute f* once
        and record the distance to it.

    Returns
    -------
    DeconvResult
    """
    g = _arrays.prepare(dirty, "dirty")
    h = _arrays.prepare(psf, "psf", like_array=g)
    r = _core.deconvolve(
        g, h, str(solver).lower(), str(precision).lower(), float(lam), int(iterations),
        str(boundary).lower(), _arrays.device_name(device, g, h),
        0.0 if step is None else float(step), int(backtrack_retries), int(half_iterations),
        float(target_distance), int(trace_every), bool(trace_distance),
        _arrays.stream_handle(stream, g))
    return DeconvResult(
        image=_arrays.like(r["image"], g), trace=_trace_arrays(r["trace"]), stop=r["stop"],
        stop_detail=r["stop_detail"], iterations=r["iterations"], solver_ms=r["solver_ms"],
        exact_ms=r["exact_ms"], device=r["device"], lipschitz=r["lipschitz"], step=r["step"],
        condition=r["condition"])


def tikhonov_exact(dirty, psf, lam=0.01, boundary="circular", device=None, stream=None):
    """The exact minimiser f* in float64 (circular: the Wiener filter; zero: FP64 CG to a
    relative residual of 1e-12), as the caller's kind of array."""
    g = _arrays.prepare(dirty, "dirty")
    h = _arrays.prepare(psf, "psf", like_array=g)
    f = _core.tikhonov_exact(g, h, float(lam), str(boundary).lower(),
                             _arrays.device_name(device, g, h), _arrays.stream_handle(stream, g))
    return _arrays.like(f, g)


def tikhonov_criterion(dirty, psf, image, lam=0.01, boundary="circular") -> float:
    """J(f) = ||g - H f||^2 + lam ||f||^2 in FP64 on the CPU."""
    g = _arrays.to_numpy(_arrays.prepare(dirty, "dirty"))
    return _core.tikhonov_criterion(g, _arrays.to_numpy(_arrays.prepare(psf, "psf")),
                                    _arrays.to_numpy(_arrays.prepare(image, "image")), float(lam),
                                    str(boundary).lower())


def apply_psf(image, psf, boundary="circular"):
    """The forward model H f in FP64 on the CPU (what hs.simulate.observation applies)."""
    f = _arrays.prepare(image, "image")
    out = _core.apply_psf(_arrays.to_numpy(f), _arrays.to_numpy(_arrays.prepare(psf, "psf")),
                          str(boundary).lower())
    return _arrays.like(out, f)
