"""Mixed-precision tile Cholesky (study 002): factor and solve under a per-tile precision
policy that never fails silently."""

from __future__ import annotations

import numbers

import numpy as np

from . import _arrays, _core

__all__ = ["VARIANTS", "cholesky", "solve"]

#: The GEMM variants in the library's order (a policy table holds these indices).
VARIANTS = ("DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16")


def _square(a):
    """`a` itself when it is a square matrix; InvalidInput naming it otherwise."""
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise _core.InvalidInput(f"Python argument 'a': expected a square (n, n) matrix, found "
                                 f"shape {tuple(a.shape)}")
    return a


def _tile(tile) -> int:
    """The tile size for the core: an integer >= 1; InvalidInput naming ``tile`` otherwise (a
    policy function's tile grid would otherwise divide by it first)."""
    if isinstance(tile, bool) or not isinstance(tile, numbers.Integral) or tile < 1:
        raise _core.InvalidInput(f"tile: expected a tile size >= 1 (an integer), found {tile!r}")
    return int(tile)


def _device_list(devices, device: str) -> list:
    """The core's CUDA device list for ``devices`` ([] for None: where the data are), checked as
    the CLI's --devices: indices >= 0, each once, on a GPU run. ``device`` is the core's device
    string. InvalidInput naming the argument, what was expected and what was found; Unsupported
    when no CUDA device is usable (a list asks for the GPU: auto would otherwise fall back to the
    CPU and ignore it)."""
    if devices is None:
        return []
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise _core.InvalidInput(f"devices: expected a list of CUDA device indices (e.g. [0, 1]), "
                                 f"found {devices!r}")
    out = []
    for d in devices:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0:
            raise _core.InvalidInput(f"devices: expected CUDA device indices >= 0, found {d!r}")
        if int(d) in out:
            raise _core.InvalidInput(f"devices: expected distinct CUDA device indices, found {d} "
                                     f"twice")
        out.append(int(d))
    if out and device == "cpu":
        raise _core.InvalidInput(f"devices={out}: expected a GPU run (device None, 'auto' or "
                                 f"'cuda'), found device='cpu'")
    if out and not _core.cuda_available():
        raise _core.Unsupported(f"devices={out}: expected a CUDA device, found none (a build "
                                f"without CUDA or no usable device); leave devices out to run on "
                                f"the CPU")
    return out


def _device_memory(device_memory, devices: list, needs_devices: bool = True) -> int:
    """The budget in bytes for the core: an integer >= 0 (0: what each device has free, less 5 %),
    and, with ``needs_devices``, only with a device list, whose devices it bounds."""
    if isinstance(device_memory, bool) or not isinstance(device_memory, numbers.Integral) \
            or device_memory < 0:
        raise _core.InvalidInput(f"device_memory: expected a size in bytes >= 0 (an integer), "
                                 f"found {device_memory!r}")
    if needs_devices and device_memory > 0 and not devices:
        raise _core.InvalidInput(f"device_memory={device_memory}: expected a device list to bound "
                                 f"(e.g. devices=[0]), found devices=None")
    return int(device_memory)


def _policy_args(policy, matrix, tile):
    """(name, table) for the core: a string passes through; a Python function is evaluated once
    per tile (i > j) on the input's tile and matrix Frobenius norms, as the library's policies
    see them, so the factorization's worker threads never call into Python."""
    if not callable(policy):
        return str(policy), None
    a = np.asarray(_arrays.to_numpy(matrix), dtype=np.float64)
    n = a.shape[0]
    nt = -(-n // tile)
    lower = np.tril(a)
    # The whole symmetric matrix from its lower triangle: twice the strict part plus the diagonal.
    matrix_norm = float(np.sqrt(2.0 * np.sum(np.tril(a, -1) ** 2) + np.sum(np.diag(a) ** 2)))
    table = np.full((nt, nt), VARIANTS.index("SP"), dtype=np.int64)
    for i in range(nt):
        for j in range(i):
            block = lower[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile]
            name = str(policy(i, j, float(np.linalg.norm(block)), matrix_norm, nt)).upper()
            if name not in VARIANTS:
                raise _core.InvalidInput(
                    f"policy function returned {name!r} for tile ({i}, {j}); expected one of "
                    + ", ".join(VARIANTS))
            table[i, j] = VARIANTS.index(name)
    return getattr(policy, "__name__", "python-policy"), table


def cholesky(a, *, policy="uniform:SP", tile=256, recover=False, device=None, devices=None,
             device_memory=0, scale=True, full_output=False):
    """Lower Cholesky factor L (A = L L^T) of a symmetric positive definite matrix by the tile
    Cholesky: POTRF, TRSM, SYRK in FP32, each off-diagonal GEMM in the variant the policy picks.

    Parameters
    ----------
    a : (n, n) array (NumPy, CuPy or torch); only the lower triangle is read.
    policy : 'uniform:<variant>', 'band:SP=2,HP1=rest', 'adaptive:tol=1e-6', ... or a function
        f(i, j, tile_norm, matrix_norm, tile_rows) -> variant name (see :data:`VARIANTS`).
    tile : tile size nb (n need not be a multiple).
    recover : refactor with the failing region promoted one precision up instead of raising.
    device : None (where ``a`` is), 'auto', 'cpu' or 'cuda'.
    devices : CUDA device indices of this host to factor on (e.g. [0, 1]; tile columns dealt
        round-robin, docs/scaling.md); a host array stays in host memory and the library copies
        it. None: one device, or the CPU, as ``device`` says. Not with device='cpu'.
    device_memory : bytes each listed device may use (0: what it has free, less 5 %). On one
        device a host matrix that does not fit is factored out of core (docs/cholesky.md);
        needs ``devices``.
    scale : with FP16 variants (HP1, HP2, HP3) and the largest diagonal entry d of A outside
        [2^-6, 2^12], factor 4^-k A with d moved into [1, 4) and return 2^k times its factor
        (both exact), so that small or large units do not underflow or overflow FP16
        (report["scaling_exponent"] = k). False: the variants run on A as given, as study 002.

    Returns
    -------
    L, float32 with a zero upper triangle, the kind of array ``a`` is; with full_output,
    (L, report) where report has policy, tiles (per variant), attempts, recoveries,
    workspace_bytes, out_of_core_slabs (0: in core), host_to_device_bytes,
    device_to_host_bytes, device_to_device_bytes and scaling_exponent. Raises halfscope.NotPositiveDefinite
    naming the tile and the policy, InvalidInput for bad devices / device_memory, Unsupported
    for devices without a usable CUDA device.
    """
    m = _square(_arrays.prepare(a, "a"))
    tile = _tile(tile)
    where = _arrays.device_name(device, m)
    listed = _device_list(devices, where)
    budget = _device_memory(device_memory, listed)
    name, table = _policy_args(policy, m, tile)
    r = _core.cholesky(m, name, table, tile, bool(recover), where, listed, budget,
                       _arrays.stream_handle(None, m), _arrays.framework_of(m), bool(scale))
    out = _arrays.like(r["L"], m)
    return (out, r["report"]) if full_output else out


def solve(a, b, *, policy="uniform:SP", solve_policy="uniform:SP", tile=256, refine=False,
          max_iterations=10, device=None, full_output=False):
    """Solve A x = b for symmetric positive definite A by the tile Cholesky.

    b is (n,) or (n, r). With ``refine`` the factor (in ``policy``, e.g. 'uniform:HP1') is
    corrected by iterative refinement against A to FP32 accuracy; the report then has
    iterations, residuals, converged and stop_reason. Returns x (float32, b's kind); with
    full_output, (x, report).
    """
    m = _square(_arrays.prepare(a, "a"))
    rhs = _arrays.prepare(b, "b")
    if rhs.ndim not in (1, 2) or rhs.shape[0] != m.shape[0]:
        raise _core.InvalidInput(f"Python argument 'b': expected ({m.shape[0]},) or "
                                 f"({m.shape[0]}, r) for a of shape {tuple(m.shape)}, found "
                                 f"shape {tuple(rhs.shape)}")
    tile = _tile(tile)
    name, table = _policy_args(policy, m, tile)
    r = _core.spd_solve(m, _arrays.to_numpy(rhs), name, table, str(solve_policy), tile,
                        bool(refine), int(max_iterations), _arrays.device_name(device, m),
                        _arrays.stream_handle(None, m))
    out = _arrays.like(r["x"], rhs)
    return (out, r["report"]) if full_output else out
