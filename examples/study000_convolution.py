#!/usr/bin/env python3
"""Study 000, convolution: hs.convolve2d in every precision against SciPy in FP64.

A deterministic scikit-image-like test picture (8-bit grey levels, flat regions, edges, texture,
sensor noise; generated with NumPy, nothing downloaded) is convolved in 'same' mode with Gaussian
kernels of growing width. For each precision and width the script prints the MRE (study 000,
eq. 5) against SciPy in FP64 and the time per call of halfscope and of SciPy in FP32, writes
results.json and plots the MRE against the kernel width (the study's Fig. 3 shape).

    python examples/study000_convolution.py [--quick] [--out DIR] [--gpu] [--method M]

Precisions a device does not offer (tf32 and split are GPU methods) are reported as SKIP lines.
With the default --method auto the CPU sums directly up to width 31 and uses the FFT beyond
(docs/conv.md), so `half`'s error, which grows with the number of taps in a direct sum (the
study's Fig. 3), flattens past width 31; --method direct keeps the direct sum (slow past 31 in
emulated FP16).
"""
import numpy as np
import scipy.signal

from example_common import (Backend, emit, errors, import_halfscope, median_ms, parse_args,
                            pyplot, write_json)

PRECISIONS = ("double", "single", "tf32", "half", "mixed", "bf16", "split")
# tf32 is offered by the GPU's cuBLAS method only (docs/conv.md); with --method auto the script
# asks for it by name (the planner does not pick it: measured on an H200, auto -> fft -> refused).
AUTO_OVERRIDE = {"tf32": "gemm"}
# SciPy's direct convolve2d costs rows * cols * w^2 multiply-adds: beyond this width the FP32
# peer timed is fftconvolve (what a SciPy user would call there).
SCIPY_DIRECT_MAX_WIDTH = 31


def make_picture(n, seed=0):
    """An n x n 8-bit grey picture like scikit-image's samples, as float64 in [16/255, 1].

    Smooth illumination, disks and bars of constant grey (edges), a sinusoidal texture patch and
    Gaussian sensor noise, quantized to 8 bits. The darkest level is 16, not 0, so every output
    pixel of a positive kernel is well away from zero and the MRE (a relative error per pixel)
    measures the arithmetic, not divisions by almost nothing."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n] / n
    img = 0.35 + 0.3 * x - 0.15 * y                       # illumination gradient
    for _ in range(12):                                    # disks of constant grey
        cy, cx, r = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), rng.uniform(0.03, 0.15)
        img[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.uniform(0.1, 0.95)
    for _ in range(6):                                     # bars
        r0, c0 = rng.integers(0, n * 3 // 4, 2)
        img[r0:r0 + n // 10, c0:c0 + n // 4] = rng.uniform(0.1, 0.95)
    patch = slice(n // 2, n // 2 + n // 4)                 # texture
    img[patch, patch] += 0.1 * np.sin(2 * np.pi * 12 * x[patch, patch]) * np.cos(2 * np.pi * 9 * y[patch, patch])
    img += rng.normal(0.0, 0.02, img.shape)                # sensor noise
    return np.clip(np.round(img * 255), 16, 255) / 255.0


def gaussian_kernel(width):
    """A width x width Gaussian (sigma = width / 6, so the kernel holds +-3 sigma), sum 1, FP64."""
    r = np.arange(width) - (width - 1) / 2
    g = np.exp(-0.5 * (r / (width / 6.0)) ** 2)
    k = np.outer(g, g)
    return k / k.sum()


def scipy_peer(image32, kernel32, width):
    """(name, callable) of the FP32 SciPy call a user would time against halfscope."""
    if width <= SCIPY_DIRECT_MAX_WIDTH:
        return "scipy.signal.convolve2d", lambda: scipy.signal.convolve2d(image32, kernel32, mode="same")
    return "scipy.signal.fftconvolve", lambda: scipy.signal.fftconvolve(image32, kernel32, mode="same")


def plot(results, widths, path):
    """MRE against kernel width, one line per precision, log-log (zero MREs left out)."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for prec, rows in results["mre"].items():
        pts = [(w, rows[str(w)]) for w in widths if str(w) in rows and rows[str(w)] > 0]
        if pts:
            ax.loglog(*zip(*pts), marker="o", label=prec)
    ax.set_xlabel("kernel width (pixels)")
    ax.set_ylabel("MRE against SciPy FP64")
    ax.set_title(f"hs.convolve2d method {results['method']}, {results['size']}^2 picture, 'same' "
                 f"({results['backend']})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    """Every precision x width against SciPy FP64: ACCURACY / TIME / SKIP lines, JSON, figure."""
    args = parse_args(__doc__.split("\n\n")[0], "out/study000_convolution",
                      lambda ap: ap.add_argument("--method", default="auto",
                                                 help="hs.convolve2d method (docs/conv.md)"))
    hs = import_halfscope()
    be = Backend(args.gpu)
    n = 128 if args.quick else 512
    widths = (3, 7, 15) if args.quick else (3, 7, 15, 31, 63, 115)
    image = make_picture(n)
    image_dev = be.asarray(image)
    results = {"size": n, "widths": list(widths), "backend": be.name, "mode": "same", "method": args.method,
               "mre": {}, "max_abs": {}, "halfscope_ms": {}, "scipy_ms": {}, "scipy_method": {}}
    print(f"picture {n}x{n}, Gaussian kernels of widths {list(widths)}, arrays: {be.name}")
    for w in widths:
        kernel = gaussian_kernel(w)
        # The FP64 reference: SciPy's direct sum where it is cheap, its FFT beyond (FP64 FFT
        # rounding, ~1e-16 relative to max|x| ||k||_1, is far below every precision measured).
        if w <= SCIPY_DIRECT_MAX_WIDTH:
            ref = scipy.signal.convolve2d(image, kernel, mode="same")
        else:
            ref = scipy.signal.fftconvolve(image, kernel, mode="same")
        peer, call = scipy_peer(image.astype(np.float32), kernel.astype(np.float32), w)
        results["scipy_method"][str(w)] = peer
        results["scipy_ms"][str(w)] = median_ms(call, repeats=3)
        kernel_dev = be.asarray(kernel)
        for prec in PRECISIONS:
            def run(prec=prec):
                method = AUTO_OVERRIDE.get(prec, "auto") if args.method == "auto" else args.method
                return hs.convolve2d(image_dev, kernel_dev, mode="same", precision=prec, method=method)
            try:
                out = run()
            except (hs.Unsupported, hs.InvalidInput) as e:
                emit("SKIP", precision=prec, width=w, reason=str(e).splitlines()[0][:120])
                continue
            err = errors(ref, be.host(out))
            ms = median_ms(run, be.sync, repeats=3)
            results["mre"].setdefault(prec, {})[str(w)] = err["mre"]
            results["max_abs"].setdefault(prec, {})[str(w)] = err["max_abs"]
            results["halfscope_ms"].setdefault(prec, {})[str(w)] = ms
            emit("ACCURACY", precision=prec, width=w, dtype=str(out.dtype), mre=err["mre"],
                 max_abs=err["max_abs"])
            emit("TIME", precision=prec, width=w, halfscope_ms=ms, peer=peer,
                 peer_ms=results["scipy_ms"][str(w)])
    write_json(args.out / "results.json", results)
    plot(results, widths, args.out / "mre_vs_width.png")
    print(f"wrote {args.out / 'results.json'} and {args.out / 'mre_vs_width.png'}")


if __name__ == "__main__":
    main()
