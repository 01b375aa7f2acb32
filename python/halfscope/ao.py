"""Adaptive-optics tomography (study 002): systems, slope covariances, the mixed-precision
reconstructor R = Ctm Cmm^-1 and its evaluation by tomographic error and Strehl ratio."""

from __future__ import annotations

import json
import os

import numpy as np

from . import _arrays, _core
from .linalg import _device_list, _device_memory, _policy_args, _tile

__all__ = ["system", "presets", "covariance", "reconstructor", "reconstructor_fp64", "evaluate"]


def presets() -> list:
    """The built-in system names."""
    return list(_core.ao_presets())


def _is_system(spec) -> bool:
    """Whether `spec` is a system (a dict, a preset name or a path) rather than a matrix."""
    return isinstance(spec, (dict, str, bytes, os.PathLike))


def _system_json(spec, atmosphere=None, layers=10, name="system") -> str:
    """A system given as a dict, a preset name or a file, validated, as the core's JSON text;
    `name` is the Python argument that gave it, for the message."""
    if not _is_system(spec):
        raise TypeError(f"Python argument '{name}': expected a system (a dict, a preset name or "
                        f"a path), found {type(spec).__name__}")
    if isinstance(spec, dict):
        return _core.ao_system("json", json.dumps(spec), "", int(layers))
    text = os.fsdecode(spec)
    if text.lower() in presets() and not os.path.exists(text):
        return _core.ao_system("preset", text, "", int(layers))
    return _core.ao_system("file", text, "" if atmosphere is None else os.fspath(atmosphere),
                           int(layers))


def system(spec, *, atmosphere=None, layers=10) -> dict:
    """A validated system as a dict (the JSON form of docs/ao.md).

    spec: a preset name ('check', 'mid', 'eelt'; ``layers`` 10 or 60), a path (halfscope's .json
    or a MOAO sys-params file, with ``atmosphere`` a MOAO atmosphere file when it needs one), or a
    dict, checked field by field (errors name the field by its JSON path).
    """
    return json.loads(_system_json(spec, atmosphere, layers, name="spec"))


def _dtype_name(dtype) -> str:
    """The name of ``dtype`` given as a string ('float32', 'f4'), a NumPy dtype or type
    (np.float32) or a torch dtype; strings NumPy does not know pass through for the core to
    reject with its list."""
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    try:
        return np.dtype(dtype).name
    except TypeError:
        if isinstance(dtype, str):
            return dtype
        raise _core.InvalidInput(f"dtype {dtype!r}: expected 'float64' or 'float32' (a name or a "
                                 f"NumPy dtype)") from None


def covariance(system, kind="cmm", *, dtype="float64", device=None, noise=True) -> np.ndarray:
    """Cmm (n x n), Ctm (m x n) or Ctt (m x m) of a system, dense, in arcsec^2, computed in FP64
    and rounded once to ``dtype`` (float64 or float32: a name or a NumPy dtype such as
    np.float32). Host NumPy array."""
    return _core.ao_covariance(_system_json(system), str(kind).lower(), _dtype_name(dtype),
                               _arrays.device_name(device), bool(noise))


def reconstructor(cmm_or_system, ctm=None, *, policy="uniform:SP", solve_policy="uniform:SP",
                  tile=1024, recover=False, device=None, devices=None, tiptilt="woodbury",
                  device_memory=0, full_output=False):
    """The tomographic reconstructor R = Ctm Cmm^-1 (float32, m x n) by the tile Cholesky.

    From matrices ``reconstructor(Cmm, Ctm, ...)`` (NumPy, CuPy or torch; only Cmm's lower
    triangle is read), or from a system ``reconstructor(system, ...)`` (a dict, preset name or
    path), which generates the covariances and applies the LGS tip-tilt constants by Woodbury's
    identity (``tiptilt='woodbury'``, docs/ao.md) or factors Cmm with them (``'direct'``).

    policy : precision policy of the factorization's GEMMs: 'uniform:HP1', 'band:SP=2,HP1=rest',
        'adaptive:tol=1e-6', ... (docs/cholesky.md), or a Python function
        f(i, j, tile_norm, matrix_norm, tile_rows) -> variant name, called once per tile.
    solve_policy : the policy string of the two triangular solves' GEMMs.
    recover : on a non-positive pivot or FP16 overflow, refactor with the failing region promoted.
    devices : CUDA device indices of this host (e.g. [0, 1]): the factorization deals its tile
        columns over them and the solves split R's rows over them (covariances of a system are
        generated on the current device). None: one device or the CPU, as ``device`` says. Not
        with device='cpu' (InvalidInput); Unsupported without a usable CUDA device.
    device_memory : bytes the GPU run may use on its one device (0: none given). Cmm's tiles (and
        a system's Ctm, unless it fits on the device beside the streamed solve) then stay in host
        memory and the factorization and the solves stream them through the device, out of core
        where they do not fit (docs/scaling.md). From a system: the current device or the one
        listed; from matrices it needs ``devices=[d]``.

    Returns R as the kind of array Cmm is (NumPy for a system); with full_output, (R, report)
    (the factorization's out_of_core_slabs and bytes copied, the solves' solve_slabs,
    solve_row_blocks and solve_host_to_device_bytes among its fields; from a system, rhs_memory:
    where Ctm was solved, "device", "pinned" or "host").
    Raises halfscope.NotPositiveDefinite naming the tile and the policy.
    """
    if ctm is None and not _is_system(cmm_or_system):
        raise TypeError(f"Python argument 'ctm': expected the (m, n) Ctm matrix with the Cmm "
                        f"matrix, found None (a system, given as a dict, preset name or path, "
                        f"comes alone) and cmm_or_system of type {type(cmm_or_system).__name__}")
    tile = _tile(tile)
    if ctm is None:
        if callable(policy):
            raise _core.InvalidInput("policy: a Python function needs the matrices; pass a "
                                     "policy string with a system")
        where = _arrays.device_name(device)
        listed = _device_list(devices, where)
        # A system's run needs no device list: the budget bounds the current device.
        budget = _device_memory(device_memory, listed, needs_devices=False)
        r = _core.ao_reconstructor_system(_system_json(cmm_or_system), str(policy), None,
                                          str(solve_policy), tile, bool(recover), where,
                                          listed, str(tiptilt), budget)
        return (r["R"], r["report"]) if full_output else r["R"]
    a = _arrays.prepare(cmm_or_system, "cmm")
    b = _arrays.prepare(ctm, "ctm", like_array=a)
    where = _arrays.device_name(device, a)
    listed = _device_list(devices, where)
    budget = _device_memory(device_memory, listed)
    if budget > 0 and len(listed) != 1:
        raise _core.InvalidInput(f"device_memory={budget}: expected one device to stream Cmm "
                                 f"through, found devices={listed}")
    name, table = _policy_args(policy, a, tile)
    r = _core.ao_reconstructor_matrices(a, b, name, table, str(solve_policy), tile,
                                        bool(recover), where, listed, budget,
                                        _arrays.stream_handle(None, a))
    out = _arrays.like(r["R"], a)
    return (out, r["report"]) if full_output else out


def reconstructor_fp64(cmm, ctm, device=None):
    """R = Ctm Cmm^-1 in FP64 by a plain Cholesky solve (LAPACK / cuSOLVER): the reference.
    Any real dtype (integers are converted to float64, as hs.ao.reconstructor takes them)."""
    a = _arrays.floating(_arrays.prepare(cmm, "cmm"))
    b = _arrays.floating(_arrays.prepare(ctm, "ctm", like_array=a))
    return _arrays.like(_core.ao_reconstructor_fp64(a, b, _arrays.device_name(device, a),
                                                    _arrays.stream_handle(None, a)), a)


def evaluate(system, reconstructor, *, wavelength_m=1.65e-6, psf_size=256,
             projection="matched", device=None) -> dict:
    """Tomographic error (nm rms) and Strehl ratios (Marechal and OTF) of a reconstructor on a
    system, with the PSF images and the error covariance Cee (docs/ao.md, "Evaluation")."""
    r = _arrays.floating(_arrays.prepare(reconstructor, "reconstructor"))
    return _core.ao_evaluate(_system_json(system), r, float(wavelength_m), int(psf_size),
                             str(projection).lower(), _arrays.device_name(device, r),
                             _arrays.stream_handle(None, r))
