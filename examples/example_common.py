"""Shared by the study scripts of examples/: command line, array backend (NumPy or CuPy), timing,
the accuracy metrics of DESIGN.md section 5 and the one-line result format.

Every script prints its measurements as lines `TAG key=value key=value ...` (tags ACCURACY, TIME,
DETECTION, ...), so that a reader sees them and tests/python_api/test_examples.py can parse them;
everything else a script prints is free text.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def import_halfscope():
    """`import halfscope`, or exit with the two ways to make it importable."""
    try:
        import halfscope
    except ImportError as e:
        sys.exit(f"cannot import halfscope ({e}): run `pip install .` from the repository root, or "
                 "set PYTHONPATH=build/<preset>/python after a build (docs/python.md)")
    return halfscope


def parse_args(description, default_out, extra=None):
    """--quick (small sizes, seconds on 2 CPU cores), --out DIR, --gpu (CuPy arrays); `extra`,
    when given, adds a script's own options to the parser."""
    ap = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(ap)
    ap.add_argument("--quick", action="store_true", help="small sizes: seconds on 2 CPU cores")
    ap.add_argument("--out", default=default_out, help="folder for figures and data (created)")
    ap.add_argument("--gpu", action="store_true",
                    help="pass CuPy arrays (results stay on the GPU); NumPy when CuPy or a GPU is missing")
    args = ap.parse_args()
    args.out = Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


class Backend:
    """The array module the example feeds halfscope: NumPy, or CuPy with --gpu when it works.

    halfscope returns the kind of array it is given (CuPy in, CuPy out), so the examples convert
    results with `host()` before comparing them with SciPy, and `sync()` before reading a clock:
    a CuPy call returns before the GPU has finished."""

    def __init__(self, want_gpu):
        import numpy
        self.xp, self.name, self._cupy = numpy, "numpy", None
        if not want_gpu:
            return
        try:
            import cupy
            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError("no CUDA device")
        except Exception as e:  # ImportError, CUDARuntimeError (no driver), RuntimeError
            print(f"--gpu: CuPy or a GPU is missing ({type(e).__name__}: {e}); using NumPy")
            return
        self.xp, self.name, self._cupy = cupy, "cupy", cupy

    def asarray(self, a):
        """`a` on the backend's device (a CuPy copy with --gpu; NumPy arrays pass through)."""
        return self._cupy.asarray(a) if self._cupy else a

    def host(self, a):
        """NumPy copy of a result (CuPy -> host); NumPy arrays pass through."""
        return self._cupy.asnumpy(a) if self._cupy else a

    def sync(self):
        """Waits for the GPU work queued on CuPy's current stream (nothing to wait for with NumPy)."""
        if self._cupy:
            self._cupy.cuda.get_current_stream().synchronize()


def median_ms(fn, sync=lambda: None, repeats=5, budget_s=0.5):
    """Median wall time of `fn` in ms after one warm-up call (plans, planner measurements, caches);
    stops early, after at least one timed call, once the timed calls took `budget_s`."""
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if sum(times) > budget_s * 1e3:
            break
    return statistics.median(times)


def errors(ref, x):
    """Study 000's MRE (eq. 5: mean of |x - ref| / |ref|, a pixel counts 0 where ref is 0), the
    max |x - ref| and the relative Frobenius error, all in FP64."""
    import numpy as np
    ref = np.asarray(ref, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    nz = ref != 0
    rel = np.zeros_like(ref)
    rel[nz] = np.abs(x[nz] - ref[nz]) / np.abs(ref[nz])
    return {"mre": float(rel.mean()), "max_abs": float(np.abs(x - ref).max()),
            "rel_frobenius": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))}


def emit(tag, **fields):
    """Prints one result line `TAG key=value ...` (floats in %.3e; no spaces inside a value)."""
    parts = [tag]
    for k, v in fields.items():
        if isinstance(v, float):
            v = f"{v:.3e}"
        parts.append(f"{k}={str(v).replace(' ', '_')}")
    print(" ".join(parts), flush=True)


def write_json(path, obj):
    """Writes through a temporary name and a rename: never a half-written file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed), or None when not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figures")
        return None
    return plt
