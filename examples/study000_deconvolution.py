#!/usr/bin/env python3
"""Study 000, deconvolution: a simulated MeerKAT observation restored by every solver of
hs.deconvolve in single, mixed and split precision, each compared with the exact Tikhonov solution.

The PSF (hs.simulate.psf, MeerKAT's 64 dishes, 8 h of earth rotation) is scaled to unit operator
norm (max |h^| = 1), as `halfscope bench deconv` does by default: with the radio convention (peak
1) lambda = 0.01 gives kappa(Q) ~ 1e8, beyond what FP32 can solve (docs/deconv.md). The script
prints, per solver and precision, the iterations, why the run stopped and the distance to f*
computed here in NumPy (the Wiener filter in FP64, independent of halfscope's own), plots the
criterion against the iteration (study 000 Fig. 7) and shows the restored image in cube-root
scale; with astropy installed it also writes the restoration as FITS through hs.io.to_fits_hdu.

    python examples/study000_deconvolution.py [--quick] [--out DIR] [--gpu]
"""
import numpy as np

from example_common import Backend, emit, import_halfscope, parse_args, pyplot, write_json

SOLVERS = ("fixed", "optimal", "backtracking", "half-then-float", "cg", "wiener")
PRECISIONS = ("single", "mixed", "split")
LAMBDA = 0.01  # the study's value (relative to ||H||^2 = 1 here)


def spectrum(psf):
    """h^ of the circulant operator: the PSF's origin is pixel (rows/2, cols/2) (docs/deconv.md)."""
    return np.fft.fft2(np.fft.ifftshift(psf))


def wiener(dirty, psf, lam):
    """The exact minimiser of ||g - H f||^2 + lam ||f||^2 for circulant H, in NumPy FP64."""
    h = spectrum(psf)
    return np.real(np.fft.ifft2(np.conj(h) * np.fft.fft2(dirty) / (np.abs(h) ** 2 + lam)))


def criterion(f, dirty, psf, lam):
    """J(f) in FP64 (NumPy): the quantity the trace's `criterion` column records."""
    hf = np.real(np.fft.ifft2(spectrum(psf) * np.fft.fft2(f)))
    return float(np.sum((dirty - hf) ** 2) + lam * np.sum(f * f))


def plot_criterion(runs, j_star, path):
    """J(f_k) - J(f*) relative to J(f*) against the iteration, one panel per precision."""
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(PRECISIONS), figsize=(4.2 * len(PRECISIONS), 3.6), sharey=True)
    for ax, prec in zip(axes, PRECISIONS):
        for (solver, p), trace in runs.items():
            if p != prec or len(trace["iteration"]) < 2:
                continue
            gap = np.maximum((np.asarray(trace["criterion"]) - j_star) / j_star, 1e-16)
            ax.semilogy(trace["iteration"], gap, label=solver, color=f"C{SOLVERS.index(solver)}")
        ax.set_title(prec)
        ax.set_xlabel("iteration")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("(J(f_k) - J(f*)) / J(f*)")
    handles = [plt.Line2D([], [], color=f"C{i}", label=s) for i, s in enumerate(SOLVERS) if s != "wiener"]
    axes[0].legend(handles=handles, fontsize=8)          # wiener is exact: no iterations to draw
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_images(images, path):
    """Cube-root scale (sign kept): faint halo and bright sources on one picture, as radio maps are
    usually shown."""
    plt = pyplot()
    if plt is None:
        return
    fig, axes = plt.subplots(1, len(images), figsize=(3.6 * len(images), 3.6))
    for ax, (title, img) in zip(axes, images.items()):
        ax.imshow(np.cbrt(img), cmap="inferno", origin="lower")
        ax.set_title(title, fontsize=9)
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_fits(hs, image, path, history):
    """The restoration as FITS (hs.io.to_fits_hdu); returns max |read back - image| / max |image|
    (astropy reads the file back)."""
    try:
        from astropy.io import fits
    except ImportError:
        print("astropy is not installed: no FITS output")
        return None
    hs.io.to_fits_hdu(image, history=history).writeto(path, overwrite=True)
    back = fits.getdata(path)
    return float(np.abs(back.astype(np.float64) - image).max() / np.abs(image).max())


def main():
    """Simulate, restore with every solver x precision, compare with f*, write JSON and figures."""
    args = parse_args(__doc__.split("\n\n")[0], "out/study000_deconvolution")
    hs = import_halfscope()
    be = Backend(args.gpu)
    # 256^2 without --quick: half-then-float's FP16 phase is emulated on the CPU (~50 ms per
    # iteration at 256^2 on the development machine); pass --gpu for the study's sizes' speed.
    n = 128 if args.quick else 256
    iterations = 300 if args.quick else 600
    psf_peak = hs.simulate.psf(n, n, "meerkat")
    psf = psf_peak / np.abs(spectrum(psf_peak)).max()          # unit operator norm
    sky = hs.simulate.sky(n, n, sources=30 if args.quick else 100, seed=1)
    dirty = hs.simulate.observation(sky, psf, snr_db=37, seed=1)
    f_star = wiener(dirty, psf, LAMBDA)
    j_star = criterion(f_star, dirty, psf, LAMBDA)
    exact = be.host(hs.tikhonov_exact(be.asarray(dirty), be.asarray(psf), lam=LAMBDA))
    emit("ACCURACY", what="tikhonov_exact_vs_numpy",
         rel=float(np.linalg.norm(exact - f_star) / np.linalg.norm(f_star)))
    print(f"{n}x{n} MeerKAT observation, 37 dB, lambda {LAMBDA}, up to {iterations} iterations, "
          f"arrays: {be.name}")
    dirty_dev, psf_dev = be.asarray(dirty), be.asarray(psf)
    runs, summary, restored = {}, [], {}
    for solver in SOLVERS:
        for prec in PRECISIONS:
            try:
                res = hs.deconvolve(dirty_dev, psf_dev, solver=solver, precision=prec, lam=LAMBDA,
                                    iterations=iterations)
            except (hs.InvalidInput, hs.Unsupported) as e:   # e.g. half-then-float in mixed
                emit("SKIP", solver=solver, precision=prec, reason=str(e).splitlines()[0][:120])
                continue
            image = be.host(res.image)
            distance = float(np.linalg.norm(image - f_star) / np.linalg.norm(f_star))
            gap = (criterion(image, dirty, psf, LAMBDA) - j_star) / j_star
            runs[(solver, prec)] = {k: np.asarray(v).tolist() for k, v in res.trace.items()}
            restored[(solver, prec)] = image
            emit("ACCURACY", solver=solver, precision=prec, iterations=res.iterations,
                 stop=res.stop, distance=distance, criterion_gap=float(gap),
                 condition=float(res.condition), device=res.device)
            emit("TIME", solver=solver, precision=prec, solver_ms=float(res.solver_ms))
            summary.append({"solver": solver, "precision": prec, "iterations": int(res.iterations),
                            "stop": res.stop, "stop_detail": res.stop_detail, "distance": distance,
                            "criterion_gap": float(gap), "solver_ms": float(res.solver_ms),
                            "condition": float(res.condition)})
    write_json(args.out / "results.json",
               {"size": n, "lambda": LAMBDA, "snr_db": 37, "iterations": iterations,
                "backend": be.name, "runs": summary,
                "traces": {f"{s}/{p}": t for (s, p), t in runs.items()}})
    plot_criterion(runs, j_star, args.out / "criterion.png")
    best = restored.get(("cg", "split"), next(iter(restored.values())))
    plot_images({"sky (truth)": sky, "dirty": dirty, "CG split": best, "exact f*": f_star},
                args.out / "restored.png")
    fits_err = write_fits(hs, best, args.out / "restored.fits",
                          [f"hs.deconvolve solver=cg precision=split lambda={LAMBDA}"])
    if fits_err is not None:
        emit("FITS", path="restored.fits", roundtrip_rel=fits_err)
    print(f"wrote results.json, criterion.png, restored.png{', restored.fits' if fits_err is not None else ''}"
          f" under {args.out}")


if __name__ == "__main__":
    main()
