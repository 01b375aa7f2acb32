#!/usr/bin/env python3
"""Study 002, tomography: the MOAO check system, its covariances, the tomographic reconstructor
R = Ctm Cmm^-1 by the mixed-precision tile Cholesky under several precision policies, and each
one's tomographic error and Strehl ratio against the FP64 reconstructor.

FP64 is the optimum: for any R, Cee(R) = Cee(R*) + (R - R*) Cmm (R - R*)^T with R* the FP64
reconstructor, so a policy can only lose error budget, never gain it; the printed `loss_nm2` is
that loss (error^2 - error_fp64^2, nm^2). The FP64 reconstructor itself is checked against SciPy's
Cholesky solve.

    python examples/study002_tomography.py [--quick] [--out DIR] [--gpu]
"""
import time

import numpy as np
import scipy.linalg

from example_common import Backend, emit, import_halfscope, parse_args, pyplot, write_json

POLICIES = ("uniform:SP", "band:SP=2,HP1=rest", "uniform:HP1", "adaptive:tol=1e-6")
# Tiles of 128 on check (n = 912): 8 block rows, so band and adaptive policies have tiles to
# choose between (the default 1024 would be one tile, all diagonal, all FP32).
TILE = 128


def plot(psfs, path):
    """PSFs in log scale (peak of the diffraction-limited PSF = 1), centre crop."""
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(psfs), figsize=(3.4 * len(psfs), 3.4))
    for ax, (title, psf) in zip(axes, psfs.items()):
        n = psf.shape[0]
        crop = psf[n // 4: 3 * n // 4, n // 4: 3 * n // 4]
        ax.imshow(np.log10(np.maximum(crop, 1e-6)), vmin=-6, vmax=0, cmap="magma", origin="lower")
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    fig.suptitle("log10 PSF at 1.65 um (diffraction peak = 1), centre half", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    """Covariances, the FP64 reconstructor checked against SciPy, then each policy's score."""
    args = parse_args(__doc__.split("\n\n")[0], "out/study002_tomography")
    hs = import_halfscope()
    be = Backend(args.gpu)
    device = "cuda" if be.name == "cupy" else "cpu"
    psf_size = 64 if args.quick else 256
    system = hs.ao.system("check")
    t0 = time.perf_counter()
    cmm = hs.ao.covariance(system, "cmm", device=device)
    ctm = hs.ao.covariance(system, "ctm", device=device)
    cov_ms = (time.perf_counter() - t0) * 1e3
    n, m = cmm.shape[0], ctm.shape[0]
    print(f"preset check: n = {n} slopes, m = {m} truth slopes, covariances in {cov_ms:.0f} ms "
          f"on {device}, tiles of {TILE}")
    r64 = be.host(hs.ao.reconstructor_fp64(cmm, ctm, device=device))
    cmm_h, ctm_h = be.host(cmm), be.host(ctm)
    factor = scipy.linalg.cho_factor(cmm_h, lower=True)
    r_scipy = scipy.linalg.cho_solve(factor, ctm_h.T).T
    # kappa_1(Cmm) by LAPACK's estimate from the factor (O(n^2)): what any FP64 solve's error
    # scales with (kappa_2 <= kappa_1 for a symmetric matrix).
    rcond, _ = scipy.linalg.lapack.dpocon(factor[0], np.abs(cmm_h).sum(axis=0).max(), uplo="L")
    emit("ACCURACY", what="fp64_vs_scipy", n=n, condition=float(1.0 / rcond),
         rel_frobenius=float(np.linalg.norm(r64 - r_scipy) / np.linalg.norm(r_scipy)))
    base = hs.ao.evaluate(system, r64, psf_size=psf_size, device=device)
    emit("ACCURACY", policy="fp64", error_nm=base["tomographic_error_nm"],
         strehl_marechal=base["strehl_marechal"], strehl_otf=base["strehl_otf"])
    rows = [{"policy": "fp64", "error_nm": base["tomographic_error_nm"],
             "strehl_marechal": base["strehl_marechal"], "strehl_otf": base["strehl_otf"]}]
    psfs = {"diffraction": base["psf_diffraction"], "FP64 R": base["psf"]}
    for policy in POLICIES:
        t0 = time.perf_counter()
        r, report = hs.ao.reconstructor(system, policy=policy, tile=TILE, device=device,
                                        full_output=True)
        ms = (time.perf_counter() - t0) * 1e3
        r = be.host(r)
        ev = hs.ao.evaluate(system, r, psf_size=psf_size, device=device)
        rel = float(np.linalg.norm(r.astype(np.float64) - r64) / np.linalg.norm(r64))
        loss = ev["tomographic_error_nm"] ** 2 - base["tomographic_error_nm"] ** 2
        row = {"policy": policy, "error_nm": ev["tomographic_error_nm"],
               "strehl_marechal": ev["strehl_marechal"], "strehl_otf": ev["strehl_otf"],
               "rel_frobenius": rel, "loss_nm2": loss, "ms": ms,
               "tiles": report.get("tiles") if isinstance(report, dict) else None}
        rows.append(row)
        emit("ACCURACY", policy=policy, rel_frobenius=rel, error_nm=ev["tomographic_error_nm"],
             loss_nm2=loss, strehl_marechal=ev["strehl_marechal"], strehl_otf=ev["strehl_otf"],
             strehl_diff=ev["strehl_otf"] - base["strehl_otf"])
        emit("TIME", policy=policy, reconstructor_ms=ms)
        if policy == "uniform:HP1":
            psfs["uniform:HP1 R"] = ev["psf"]
    print(f"\n{'policy':<22}{'rel. Frob.':>12}{'error nm':>11}{'Strehl OTF':>12}{'dS vs FP64':>12}{'ms':>9}")
    for row in rows:
        print(f"{row['policy']:<22}{row.get('rel_frobenius', 0.0):>12.2e}{row['error_nm']:>11.3f}"
              f"{row['strehl_otf']:>12.6f}{row['strehl_otf'] - base['strehl_otf']:>12.2e}"
              f"{row.get('ms', float('nan')):>9.1f}")
    write_json(args.out / "results.json", {"system": "check", "n": n, "m": m, "tile": TILE,
                                            "psf_size": psf_size, "device": device, "rows": rows})
    plot({k: be.host(v) for k, v in psfs.items()}, args.out / "psf.png")
    print(f"wrote results.json and psf.png under {args.out}")


if __name__ == "__main__":
    main()
