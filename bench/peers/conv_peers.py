#!/usr/bin/env python3
"""Peers of `halfscope bench conv`, measured in the same run on the same inputs.

Reads the inputs that `halfscope bench conv --export-inputs DIR` wrote (image_<n>.npy float32,
kernel_<w>.npy float64), times cuDNN single-channel conv2d through PyTorch (FP32 with TF32 off,
and FP16) and CuPy's fftconvolve (FP32), computes each result's error against an FP64 reference
computed by PyTorch in float64 on the GPU (an implementation independent of halfscope), and
appends the cases to the halfscope JSON report in place (same schema).

    python3 bench/peers/conv_peers.py --inputs DIR --report RESULT.json [--repeats 20]
"""
import argparse
import json
import math
from pathlib import Path

import numpy as np
from peer_common import cuda_time, write_report

# Time budget of one case's timed calls (ms): at least 3 calls are always timed.
MAX_MS_PER_CASE = 1500.0


def errors(ref, x):
    ref = ref.astype(np.float64)
    x = x.astype(np.float64)
    nz = ref != 0
    rel = np.zeros_like(ref)
    rel[nz] = np.abs((x[nz] - ref[nz]) / ref[nz])
    return {"mre": float(rel.mean()), "max_abs": float(np.abs(x - ref).max()),
            "rel_frobenius": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--max-reference-size", type=int, default=4096,
                    help="compute the FP64 reference (and errors) only up to this image size")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import cupy
    from cupyx.scipy.signal import fftconvolve

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False       # a true FP32 baseline
    torch.backends.cuda.matmul.allow_tf32 = False
    report_path = Path(args.report)
    report = json.loads(report_path.read_text())
    pairs = sorted({(c["params"]["rows"], c["params"]["kernel"]) for c in report["cases"]
                    if c["implementation"] == "halfscope"})
    sizes = sorted({n for n, _ in pairs})
    inputs = Path(args.inputs)
    versions = {"torch": torch.__version__, "cudnn": str(torch.backends.cudnn.version()),
                "cupy": cupy.__version__}
    for n in sizes:
        image = np.load(inputs / f"image_{n}.npy")
        img64 = torch.from_numpy(image.astype(np.float64)).cuda()[None, None]
        for w in [w for m, w in pairs if m == n]:
            kernel = np.load(inputs / f"kernel_{w}.npy")
            # conv2d is a cross-correlation: flip the kernel for a true convolution ('same', odd w).
            k64 = torch.from_numpy(np.ascontiguousarray(kernel[::-1, ::-1])).cuda()[None, None]
            pad = w // 2
            with_ref = n <= args.max_reference_size
            ref = F.conv2d(img64, k64, padding=pad)[0, 0].cpu().numpy() if with_ref else None
            base = {"rows": n, "cols": n, "kernel": w, "mode": "same", "boundary": "zero", **versions}
            for prec, dtype in (("single", torch.float32), ("half", torch.float16)):
                x, k = img64.to(dtype), k64.to(dtype)
                out = F.conv2d(x, k, padding=pad)
                stats = cuda_time(lambda: F.conv2d(x, k, padding=pad), args.repeats, torch,
                                  MAX_MS_PER_CASE)
                case = {"implementation": "cudnn-via-pytorch", "method": "conv2d", "precision": prec,
                        "params": dict(base, tf32=False), **stats,
                        "error": errors(ref, out[0, 0].float().cpu().numpy()) if with_ref else {}}
                report["cases"].append(case)
            ci = cupy.asarray(image)
            ck = cupy.asarray(kernel.astype(np.float32))
            out = fftconvolve(ci, ck, mode="same")
            stats = cuda_time(lambda: fftconvolve(ci, ck, mode="same"), args.repeats, torch,
                              MAX_MS_PER_CASE)
            report["cases"].append({"implementation": "cupy", "method": "fftconvolve", "precision": "single",
                                    "params": dict(base), **stats,
                                    "error": errors(ref, cupy.asnumpy(out)) if with_ref else {}})
            print(f"peers {n}^2 width {w}: done", flush=True)
    for c in report["cases"]:
        if c["implementation"] != "halfscope" and "median_ms" in c:
            p = c["params"]
            c.setdefault("GBps", None)
            c["TFLOPs"] = 2.0 * p["rows"] * p["cols"] * p["kernel"] ** 2 / (c["median_ms"] * 1e-3) / 1e12
    write_report(report_path, report)


if __name__ == "__main__":
    main()
