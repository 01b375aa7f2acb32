#!/usr/bin/env python3
"""Peers of `halfscope bench deconv`, measured on the same inputs in the same session.

Reads what `halfscope bench deconv --dump DIR` wrote (psf.npy, dirty_<snr>db.npy,
exact_<snr>db.npy, meta.json: size, lambda, boundary, target, iterations) and runs the same
Tikhonov conjugate gradient as halfscope's `cg` (on the normal equations
(H^T H + lambda I) f = H^T g, f_0 = 0) in FP32:

- `cupy`: cupy.fft.rfft2 / irfft2 on the GPU (each iteration timed between CUDA events);
- `scipy`: scipy.fft.rfft2 / irfft2 on the CPU with every core (steady clock per iteration);

The operator is built as halfscope builds it (src/deconv/backend.hpp): the PSF's origin (rows/2,
cols/2) moved to (0, 0) of the FFT grid; circular: the image grid, zero: a grid of 2n per axis
(linear convolution of the zero-extended image, cropped; 2n >= the 2n - 1 - n/2 halfscope needs).
After each iteration (outside the timing) the relative distance to the exported exact solution is
computed; the run stops early as halfscope's CG does, once the recursive residual is below
4 u32 ||b||; each peer's case records the median time per iteration (median_ms), the first iteration
and the accumulated iteration time at which the distance fell to `target`, and the final distance,
appended to the halfscope report in its schema (bench/README.md).

    python3 bench/peers/deconv_peers.py --inputs DIR --report RESULT.json [--iterations N]
"""
import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from peer_common import time_stats, write_report

U32 = 2.0 ** -24  # FP32 unit roundoff


def psf_on_grid(psf, grid):
    """The PSF with its origin (rows//2, cols//2) at (0, 0) of a grid x grid array, wrapped."""
    r, c = psf.shape
    out = np.zeros(grid, dtype=np.float64)
    ii = (np.arange(r) - r // 2) % grid[0]
    jj = (np.arange(c) - c // 2) % grid[1]
    out[np.ix_(ii, jj)] = psf
    return out


class Operator:
    """Q f = H^T H f + lambda f and b = H^T g in FP32 with an FFT module `fft` on arrays of `xp`."""

    def __init__(self, xp, fft, psf, dirty, lam, boundary):
        self.xp, self.fft, self.lam = xp, fft, np.float32(lam)
        self.shape = psf.shape
        self.grid = psf.shape if boundary == "circular" else tuple(2 * n for n in psf.shape)
        h = np.fft.rfft2(psf_on_grid(psf, self.grid))
        self.h = xp.asarray(h.astype(np.complex64))
        self.h2 = xp.asarray((np.abs(h) ** 2).astype(np.float32))
        self.circular = boundary == "circular"
        self.b = self.adjoint(xp.asarray(dirty.astype(np.float32)))

    def pad(self, x):
        if self.circular:
            return x
        out = self.xp.zeros(self.grid, dtype=np.float32)
        out[: self.shape[0], : self.shape[1]] = x
        return out

    def crop(self, x):
        return x if self.circular else x[: self.shape[0], : self.shape[1]]

    def spectral(self, x, mult):
        return self.crop(self.fft.irfft2(self.fft.rfft2(self.pad(x)) * mult, s=self.grid))

    def adjoint(self, y):
        return self.spectral(y, self.xp.conj(self.h)).astype(np.float32)

    def normal(self, x):
        if self.circular:
            return self.spectral(x, self.h2 + self.lam).astype(np.float32)
        return (self.adjoint(self.spectral(x, self.h)) + self.lam * x).astype(np.float32)


def cg(op, exact, iterations, target, timer):
    """CG from 0; returns (per-iteration ms, distances after each iteration)."""
    xp = op.xp
    x = xp.zeros(op.shape, dtype=np.float32)
    r = op.b.copy()
    p = r.copy()
    rr = float(xp.vdot(r, r))
    exact_d = xp.asarray(exact)
    norm = float(xp.linalg.norm(exact_d))
    bnorm = float(xp.linalg.norm(op.b))
    times, distances = [], []
    for _ in range(iterations):
        def step():
            nonlocal x, r, p, rr
            q = op.normal(p)
            alpha = np.float32(rr / float(xp.vdot(p, q)))
            x = x + alpha * p
            r = r - alpha * q
            rr_new = float(xp.vdot(r, r))
            p = r + np.float32(rr_new / rr) * p
            rr = rr_new
        times.append(timer(step))
        distances.append(float(xp.linalg.norm(x.astype(np.float64) - exact_d)) / norm)
        # halfscope's stopping rule for CG: the recursive residual at FP32's rounding level of b
        # (past it FP32 CG only drifts, and a zero residual would divide by zero).
        if math.sqrt(rr) <= 4 * U32 * bnorm:
            break
    return times, distances


def case(impl, fft_name, snr, meta, times, distances, target, device):
    hit = next((k for k, d in enumerate(distances) if d <= target), None)
    params = {"size": meta["size"], "snr_db": snr, "lambda": meta["lambda"],
              "boundary": meta["boundary"], "device": device, "fft": fft_name,
              "iterations": len(times), "target": target, "reached_target": hit is not None}
    if hit is not None:
        params["iterations_to_target"] = hit + 1
        params["solver_ms_to_target"] = float(sum(times[: hit + 1]))
    return {"implementation": impl, "method": "cg", "precision": "single", "params": params,
            **time_stats(times), "GBps": None, "TFLOPs": None,
            "error": {"final_distance": distances[-1]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", required=True, help="folder written by bench deconv --dump")
    ap.add_argument("--report", required=True, help="the bench deconv JSON to append to")
    ap.add_argument("--iterations", type=int, default=0, help="default: the bench's")
    ap.add_argument("--no-gpu", action="store_true", help="only the SciPy peer")
    ap.add_argument("--no-cpu", action="store_true",
                    help="only the CuPy peer (SciPy needs ~65 ms per 2048^2 iteration)")
    args = ap.parse_args()
    inputs, report_path = Path(args.inputs), Path(args.report)
    meta = json.loads((inputs / "meta.json").read_text())
    report = json.loads(report_path.read_text())
    iterations = args.iterations or meta["iterations"]
    target = meta["target"]
    psf = np.load(inputs / "psf.npy").astype(np.float64)

    peers = []
    import scipy
    import scipy.fft

    class ScipyFft:
        rfft2 = staticmethod(lambda a: scipy.fft.rfft2(a, workers=os.cpu_count()))
        irfft2 = staticmethod(lambda a, s: scipy.fft.irfft2(a, s=s, workers=os.cpu_count()))

    def host_timer(fn):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    if not args.no_cpu:
        peers.append(("scipy", f"scipy.fft {scipy.__version__}", np, ScipyFft, host_timer, "cpu"))
    if not args.no_gpu:
        try:
            import cupy
            import cupy.fft

            def gpu_timer(fn):
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                return cupy.cuda.get_elapsed_time(start, stop)

            peers.append(("cupy", f"cupy.fft {cupy.__version__}", cupy, cupy.fft, gpu_timer, "cuda"))
        except ImportError as e:
            print(f"deconv_peers: no CuPy ({e}): GPU peer skipped", file=sys.stderr)

    for obs in meta["observations"]:
        dirty = np.load(inputs / obs["dirty"])
        exact = np.load(inputs / obs["exact"])
        for impl, fft_name, xp, fft, timer, device in peers:
            op = Operator(xp, fft, psf, dirty, meta["lambda"], meta["boundary"])
            cg(op, exact, 2, target, timer)  # warm-up: FFT plans, memory pools
            times, distances = cg(op, exact, iterations, target, timer)
            c = case(impl, fft_name, obs["snr_db"], meta, times, distances, target, device)
            report["cases"].append(c)
            print(f"deconv_peers: {impl} {obs['snr_db']} dB: {c['median_ms']:.3f} ms/iteration, "
                  f"target at {c['params'].get('iterations_to_target', '-')}", flush=True)
    write_report(report_path, report)


if __name__ == "__main__":
    main()
