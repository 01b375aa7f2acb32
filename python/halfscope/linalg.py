"""Mixed-precision tile Cholesky (study 002): factor and solve under a per-tile precision
policy that never fails silently."""

from __future__ import annotations

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


def cholesky(a, *, policy="uniform:SP", tile=256, recover=False, device=None,
             full_output=False):
    """Lower Cholesky factor L (A = L L^T) of a symmetric positive definite matrix by the tile
    Cholesky: POTRF, TRSM, SYRK in FP32, each off-diagonal GEMM in the variant the policy picks.

    Parameters
    ----------
    a : (n, n) array (NumPy, CuPy or torch); only the lower triangle is read.
    policy : 'uniform:<variant>', 'band:SP=2,HP1=rest', 'adaptive:tol=1e-6', ... or a function
        f(i, j, tile_norm, matrix_norm, tile_rows) -> variant name (see :data:`VARIANTS`).
    tile : tile size nb (n need not be a multiple).
    recover : refactor with the failing region promoted one precision up instead of raising.

    Returns
    -------
    L, float32 with a zero upper triangle, the kind of array ``a`` is; with full_output,
    (L, report) where report has policy, tiles (per variant), attempts, recoveries,
    workspace_bytes. Raises halfscope.NotPositiveDefinite naming the tile and the policy.
    """
    m = _square(_arrays.prepare(a, "a"))
    name, table = _policy_args(policy, m, int(tile))
    r = _core.cholesky(m, name, table, int(tile), bool(recover), _arrays.device_name(device, m),
                       _arrays.stream_handle(None, m))
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
    name, table = _policy_args(policy, m, int(tile))
    r = _core.spd_solve(m, _arrays.to_numpy(rhs), name, table, str(solve_policy), int(tile),
                        bool(refine), int(max_iterations), _arrays.device_name(device, m),
                        _arrays.stream_handle(None, m))
    out = _arrays.like(r["x"], rhs)
    return (out, r["report"]) if full_output else out
