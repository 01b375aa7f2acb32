#!/usr/bin/env python3
"""The Python layer's cost and its zero-copy claim, measured against the Python peers on the same
inputs (issue 8), written in the halfscope report schema (DESIGN.md section 5, benchmark "python").

(a) hs.convolve2d on CuPy arrays and on torch tensors against cupyx.scipy.signal.convolve2d,
    torch.nn.functional.conv2d (cuDNN, TF32 off) and scipy.signal.convolve2d (CPU), 'same' mode,
    on a 64 x 64 image with a width-3 kernel (per-call overhead dominates) and a 4096 x 4096 image
    with a width-15 kernel (the kernels dominate);
(b) hs.matched_filter on CuPy data, network case T = 16 templates x C = 12 channels x K = 200
    samples x L = 1e6, with moveouts and weights, against an NCC built on torch conv1d (grouped
    per channel, normalised and stacked in torch);
(c) zero-copy evidence: device memory held after one call, from CuPy's pool, torch's allocator
    and cudaMemGetInfo, next to the size of one output buffer (a before / after difference: it
    would show a retained copy of the input, not a temporary one freed before the call returns).

GPU timings: CUDA events (peer_common.cuda_time; CuPy's events through a small adapter), two
warm-up calls, median of repeats. CPU timings: perf_counter, one warm-up, median. Every case's
error is against an FP64 reference computed by torch (GPU) or SciPy / NumPy (CPU), never by
halfscope.

    python3 bench/peers/python_api_bench.py --json OUT.json [--repeats 20] [--no-gpu]

--no-gpu runs the CPU parts only (SciPy and hs on NumPy arrays, the matched filter on L = 2e4).
"""
import argparse
import datetime
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from peer_common import cuda_time, time_stats, write_report

MAX_MS_PER_CASE = 3000.0   # time budget of one case's timed calls (>= 3 calls always)
CONV_CASES = ((64, 3), (4096, 15))
MF = {"templates": 16, "channels": 12, "length": 200, "max_moveout": 50}


class CupyEvents:
    """The slice of torch's API that peer_common.cuda_time uses (torch.cuda.Event(...).record(),
    .synchronize(), start.elapsed_time(stop)), on CuPy events: each framework's calls are timed on
    its own current stream."""

    class _Event:
        def __init__(self, cupy):
            self._cupy, self.event = cupy, cupy.cuda.Event()

        def record(self):
            self.event.record()

        def synchronize(self):
            self.event.synchronize()

        def elapsed_time(self, stop):
            return self._cupy.cuda.get_elapsed_time(self.event, stop.event)

    def __init__(self, cupy):
        self.cuda = self
        self._cupy = cupy

    def Event(self, enable_timing=True):  # noqa: N802 (torch's name)
        return self._Event(self._cupy)


def cpu_time(fn, repeats, max_ms=MAX_MS_PER_CASE):
    """Median / min / max wall time in ms after one warm-up call; at least 1 timed call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if sum(times) > max_ms:
            break
    return time_stats(times)


def conv_errors(ref, x):
    """MRE (study 000 eq. 5), max |x - ref| and relative Frobenius error, in FP64 on the host."""
    ref, x = np.asarray(ref, dtype=np.float64), np.asarray(x, dtype=np.float64)
    nz = ref != 0
    rel = np.zeros_like(ref)
    rel[nz] = np.abs(x[nz] - ref[nz]) / np.abs(ref[nz])
    return {"mre": float(rel.mean()), "max_abs": float(np.abs(x - ref).max()),
            "rel_frobenius": float(np.linalg.norm(x - ref) / np.linalg.norm(ref))}


def conv_case(impl, method, precision, params, stats, error, out_bytes, in_bytes=None):
    """A case in the report schema; GB/s counts the image read and the output written once."""
    n, w = params["rows"], params["kernel"]
    sec = stats["median_ms"] * 1e-3
    in_bytes = n * n * 4 if in_bytes is None else in_bytes
    return {"implementation": impl, "method": method, "precision": precision, "params": params,
            **stats, "GBps": (in_bytes + out_bytes) / sec / 1e9,
            "TFLOPs": 2.0 * n * n * w * w / sec / 1e12, "error": error}


def conv_inputs(n, w, seed):
    """Fresh positive data (never zeros): uniform image in [0.1, 1], normalised Gaussian kernel."""
    rng = np.random.default_rng(seed)
    image = rng.uniform(0.1, 1.0, (n, n)).astype(np.float32)
    r = np.arange(w) - (w - 1) / 2
    g = np.exp(-0.5 * (r / max(w / 6.0, 0.5)) ** 2)
    kernel = np.outer(g, g)
    return image, (kernel / kernel.sum()).astype(np.float32)


def bench_conv_cpu(hs, repeats, cases):
    """SciPy's convolve2d against hs.convolve2d on NumPy arrays (device='cpu'), FP32 inputs."""
    import scipy.signal
    for n, w in CONV_CASES:
        image, kernel = conv_inputs(n, w, seed=n + w)
        # FP64 reference: SciPy's direct sum where cheap, its FFT (rounding ~1e-16) beyond.
        image64, kernel64 = image.astype(np.float64), kernel.astype(np.float64)
        reference = scipy.signal.fftconvolve if n > 1024 else scipy.signal.convolve2d
        ref = reference(image64, kernel64, mode="same")
        base = {"rows": n, "cols": n, "kernel": w, "mode": "same", "boundary": "fill",
                "array": "numpy", "device": "cpu"}
        call = lambda: scipy.signal.convolve2d(image, kernel, mode="same")
        res = call()
        cases.append(conv_case("scipy", "convolve2d", "single", base, cpu_time(call, repeats),
                               conv_errors(ref, res), res.nbytes))
        for prec in ("single", "mixed"):
            call = lambda prec=prec: hs.convolve2d(image, kernel, mode="same", precision=prec, device="cpu")
            res = call()
            cases.append(conv_case("halfscope", "auto", prec, base, cpu_time(call, repeats),
                                   conv_errors(ref, res), res.nbytes))
        print(f"conv cpu {n}^2 width {w}: done", flush=True)


def bench_conv_gpu(hs, cupy, torch, repeats, cases):
    """hs.convolve2d on CuPy arrays and torch tensors against CuPy's and cuDNN's convolutions,
    CUDA events; errors against torch's FP64 convolution on the GPU."""
    import torch.nn.functional as F
    from cupyx.scipy.signal import convolve2d as cupy_convolve2d
    ev = CupyEvents(cupy)

    def add(impl, method, prec, params, call, timer, host, in_bytes):
        res = call()
        cases.append(conv_case(impl, method, prec, params, cuda_time(call, repeats, timer, MAX_MS_PER_CASE),
                               conv_errors(ref, host(res)), res.nbytes, in_bytes))

    for n, w in CONV_CASES:
        image, kernel = conv_inputs(n, w, seed=n + w)
        t_img, t_k = torch.from_numpy(image).cuda(), torch.from_numpy(kernel).cuda()
        t_kflip = torch.flip(t_k, (0, 1)).contiguous()   # conv2d correlates: flip for a convolution
        ref = F.conv2d(t_img.double()[None, None], t_kflip.double()[None, None], padding=w // 2)[0, 0].cpu().numpy()
        base = {"rows": n, "cols": n, "kernel": w, "mode": "same", "boundary": "fill", "device": "cuda"}
        c_img, c_k = cupy.asarray(image), cupy.asarray(kernel)
        to_host = {"cupy": cupy.asnumpy, "torch": lambda a: a.cpu().numpy()}
        frameworks = {"cupy": (c_img, c_k, ev, lambda a: a.astype(cupy.float16)),
                      "torch": (t_img, t_k, torch, lambda a: a.half())}
        for prec in ("single", "mixed", "split"):
            for array, (x, k, timer, to_half) in frameworks.items():
                # FP32 inputs; for mixed also inputs already in its FP16 storage (rounded before
                # timing), so that the conversion inside the call is, or is not, in the time.
                inputs = [("float32", x, k)]
                if prec == "mixed":
                    inputs.append(("float16", to_half(x), to_half(k)))
                for dtype, xi, ki in inputs:
                    add("halfscope", "auto", prec, dict(base, array=array, input_dtype=dtype),
                        lambda xi=xi, ki=ki, prec=prec: hs.convolve2d(xi, ki, mode="same", precision=prec),
                        timer, to_host[array], xi.nbytes)
        add("cupy", "cupyx.scipy.signal.convolve2d", "single", dict(base, array="cupy", input_dtype="float32"),
            lambda: cupy_convolve2d(c_img, c_k, mode="same"), ev, to_host["cupy"], c_img.nbytes)
        x4, k4 = t_img[None, None], t_kflip[None, None]
        add("cudnn-via-pytorch", "conv2d", "single",
            dict(base, array="torch", input_dtype="float32", tf32=False),
            lambda: F.conv2d(x4, k4, padding=w // 2)[0, 0], torch, to_host["torch"], t_img.nbytes)
        print(f"conv gpu {n}^2 width {w}: done", flush=True)


def mf_inputs(length, seed=7):
    """The network case: Gaussian data (C, L) and templates (T, C, K) in float32, moveouts in
    [0, max_moveout] with the earliest channel at 0, weights 1/C."""
    T, C, K = MF["templates"], MF["channels"], MF["length"]
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((C, length)).astype(np.float32)
    templates = rng.standard_normal((T, C, K)).astype(np.float32)
    moveouts = rng.integers(0, MF["max_moveout"] + 1, (T, C)).astype(np.int64)
    moveouts -= moveouts.min(axis=1, keepdims=True)        # earliest channel at 0, as FMF users do
    weights = np.full((T, C), 1.0 / C, dtype=np.float32)
    return templates, moveouts, weights, data


def torch_ncc(torch, F, templates, moveouts, weights, data):
    """FMF's short-normalised network stack in torch: one grouped conv1d (group c holds the T
    templates of channel c), window energies by avg_pool1d, template energies, then the moveout
    shift and the weighted sum, channel by channel. Works in the inputs' dtype."""
    T, C, K = templates.shape
    L = data.shape[1]
    n = L - K + 1
    w = templates.permute(1, 0, 2).reshape(C * T, 1, K)
    num = F.conv1d(data[None], w, groups=C)[0].reshape(C, T, n)
    es = F.avg_pool1d((data * data)[:, None], K, stride=1)[:, 0] * K          # (C, n)
    et = (templates * templates).sum(dim=2)                                   # (T, C)
    out = torch.zeros((T, n), dtype=data.dtype, device=data.device)
    for c in range(C):
        den = torch.sqrt(et[:, c, None] * es[c][None, :])
        cc = torch.where(den > 0, num[c] / den, torch.zeros((), dtype=data.dtype, device=data.device))
        for t in range(T):
            s = int(moveouts[t, c])
            out[t, : n - s] += float(weights[t, c]) * cc[t, s:]
    return out


def bench_mfilter(hs, cupy, torch, repeats, cases, length):
    """hs.matched_filter on CuPy data (split, mixed, single) against the torch conv1d NCC in FP32,
    CUDA events; errors against the same torch pipeline in FP64."""
    templates, moveouts, weights, data = mf_inputs(length)
    T, C, K = templates.shape
    base = {"templates": T, "channels": C, "length": K, "samples": length, "step": 1,
            "n_corr": length - K + 1, "normalize": "short", "moveouts": True, "device": "cuda"}
    import torch.nn.functional as F
    td, tt = torch.from_numpy(data).cuda(), torch.from_numpy(templates).cuda()
    ref = torch_ncc(torch, F, tt.double(), moveouts, weights.astype(np.float64), td.double())
    ev = CupyEvents(cupy)
    cd, ct, cm, cw = (cupy.asarray(a) for a in (data, templates, moveouts, weights))
    for prec in ("split", "mixed", "single"):
        call = lambda prec=prec: hs.matched_filter(ct, cm, cw, cd, 1, arch="gpu", precision=prec)
        res = torch.as_tensor(call(), device="cuda")
        err = float((res.double() - ref).abs().max())
        stats = cuda_time(call, repeats, ev, MAX_MS_PER_CASE)
        cases.append(mf_case("halfscope", "auto", prec, dict(base, array="cupy"), stats, err))
        print(f"mfilter halfscope {prec}: {stats['median_ms']:.2f} ms", flush=True)
    torch.backends.cudnn.allow_tf32 = False
    call = lambda: torch_ncc(torch, F, tt, moveouts, weights, td)
    err = float((call().double() - ref).abs().max())
    stats = cuda_time(call, repeats, torch, MAX_MS_PER_CASE)
    cases.append(mf_case("cudnn-via-pytorch", "conv1d-ncc", "single", dict(base, array="torch", tf32=False),
                         stats, err))
    print(f"mfilter torch conv1d: {stats['median_ms']:.2f} ms", flush=True)


def bench_mfilter_cpu(hs, repeats, cases, length):
    """--no-gpu: hs.matched_filter(arch='cpu') against an FP64 NumPy evaluation of the formula."""
    templates, moveouts, weights, data = mf_inputs(length)
    T, C, K = templates.shape
    n = length - K + 1
    ref = np.zeros((T, n))
    for c in range(C):
        win = np.lib.stride_tricks.sliding_window_view(data[c].astype(np.float64), K)
        es = np.einsum("ij,ij->i", win, win)
        for t in range(T):
            tm = templates[t, c].astype(np.float64)
            cc = win @ tm / np.sqrt(tm @ tm * es)
            s = int(moveouts[t, c])
            ref[t, : n - s] += float(weights[t, c]) * cc[s:]
    base = {"templates": T, "channels": C, "length": K, "samples": length, "step": 1, "n_corr": n,
            "normalize": "short", "moveouts": True, "array": "numpy", "device": "cpu"}
    for prec in ("single", "split", "mixed"):
        call = lambda prec=prec: hs.matched_filter(templates, moveouts, weights, data, 1, arch="cpu", precision=prec)
        err = float(np.abs(call().astype(np.float64) - ref).max())
        cases.append(mf_case("halfscope", "direct", prec, base, cpu_time(call, repeats), err))


def mf_case(impl, method, precision, params, stats, err):
    """A case in the report schema; GB/s and TFLOP/s on the models of mfilter_peers.py."""
    T, C, K, L, n = (params[k] for k in ("templates", "channels", "length", "samples", "n_corr"))
    sec = stats["median_ms"] * 1e-3
    return {"implementation": impl, "method": method, "precision": precision, "params": params,
            **stats, "GBps": 4.0 * (C * L + T * C * K + T * n) / sec / 1e9,
            "TFLOPs": 2.0 * T * C * K * n / sec / 1e12, "error": {"max_abs": err}}


def zero_copy(hs, cupy, torch, cases):
    """Device memory one warmed-up call adds: expected one output buffer (a copy of the 64 MiB
    input would double it). cudaMemGetInfo counts every allocation, whatever allocator made it."""
    n, w = 4096, 15
    image, kernel = conv_inputs(n, w, seed=1)
    rows = []
    c_img, c_k = cupy.asarray(image), cupy.asarray(kernel)
    t_img, t_k = torch.from_numpy(image).cuda(), torch.from_numpy(kernel).cuda()
    pool = cupy.get_default_memory_pool()
    for array, x, k in (("cupy", c_img, c_k), ("torch", t_img, t_k)):
        # Warm-up: plans and caches are allocated here. Its result stays alive, so the measured
        # call cannot reuse that buffer from a cache and must allocate its own output.
        warm = hs.convolve2d(x, k, mode="same")
        cupy.cuda.runtime.deviceSynchronize()
        # Cached blocks of the frameworks' pools would hide an allocation from cudaMemGetInfo.
        pool.free_all_blocks()
        torch.cuda.empty_cache()
        free0, pool0, torch0 = cupy.cuda.runtime.memGetInfo()[0], pool.used_bytes(), torch.cuda.memory_allocated()
        out = hs.convolve2d(x, k, mode="same")
        cupy.cuda.runtime.deviceSynchronize()
        free1, pool1, torch1 = cupy.cuda.runtime.memGetInfo()[0], pool.used_bytes(), torch.cuda.memory_allocated()
        same_kind = type(out).__module__.split(".")[0] == type(x).__module__.split(".")[0]
        rows.append({"array": array, "output_bytes": int(out.nbytes), "input_bytes": int(image.nbytes),
                     "device_delta_bytes": int(free0 - free1), "cupy_pool_delta_bytes": int(pool1 - pool0),
                     "torch_allocated_delta_bytes": int(torch1 - torch0), "same_kind_out": same_kind})
        del out, warm
        print(f"zero-copy {array}: {rows[-1]}", flush=True)
    cases.append({"implementation": "halfscope", "method": "memory", "precision": "single",
                  "params": {"rows": n, "cols": n, "kernel": w, "what": "zero-copy evidence"},
                  "memory": rows})


def commit():
    """HALFSCOPE_COMMIT, else git's short hash of this checkout, else ''."""
    if os.environ.get("HALFSCOPE_COMMIT"):
        return os.environ["HALFSCOPE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def cpu_name():
    """The CPU's model name from /proc/cpuinfo (the machine type where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return os.uname().machine


def device_info(cupy, gpu):
    """The report's device entry: the GPU's name, compute capability and driver, or the CPU."""
    if not gpu:
        return {"kind": "cpu", "name": f"{cpu_name()} ({os.cpu_count()} threads)", "driver": "", "cc": ""}
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    try:  # the driver's version as the other reports give it (580.xx), else the CUDA API level
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=True).stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        driver = f"CUDA {cupy.cuda.runtime.driverGetVersion()}"
    return {"kind": "cuda", "name": props["name"].decode(), "cc": f"{props['major']}.{props['minor']}",
            "driver": driver}


def copy_ceiling(cupy):
    """Device-to-device copy bandwidth (read + write) of 1 GiB, CUDA events, median of 5."""
    a = cupy.ones(1 << 28, dtype=cupy.float32)
    b = cupy.empty_like(a)
    stats = cuda_time(lambda: b.__setitem__(Ellipsis, a), 5, CupyEvents(cupy), 1e9)
    return 2.0 * a.nbytes / (stats["median_ms"] * 1e-3) / 1e9


def main(argv=None):
    """Runs the CPU cases, then (unless --no-gpu) the GPU, matched-filter and memory cases."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", required=True, help="report to write (halfscope report schema)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-gpu", action="store_true", help="CPU parts only (no CuPy / torch needed)")
    ap.add_argument("--mf-samples", type=int, default=None, help="matched filter L (1e6; 2e4 with --no-gpu)")
    args = ap.parse_args(argv)
    gpu = not args.no_gpu
    cupy = torch = None
    if gpu:
        # torch before halfscope: an extension linked against another cuDNN than torch's bundled
        # one, loaded first, makes torch refuse cuDNN ("version incompatibility"); loaded second,
        # it binds to the library torch already loaded (same soname).
        try:
            import torch
            import cupy
        except ImportError as e:
            sys.exit(f"python_api_bench: {e}: the GPU parts need CuPy and PyTorch (or pass --no-gpu)")
    import halfscope as hs
    if gpu:
        if not hs.cuda_available():
            sys.exit("python_api_bench: halfscope sees no CUDA device (pass --no-gpu for the CPU parts)")
    length = args.mf_samples or (1_000_000 if gpu else 20_000)
    report = {"benchmark": "python", "date": datetime.date.today().isoformat(), "commit": commit(),
              "device": device_info(cupy, gpu), "ceilings": {}, "cases": [],
              "versions": {"halfscope": hs.info().get("version"), "numpy": np.__version__}}
    cases = report["cases"]
    bench_conv_cpu(hs, max(3, args.repeats // 4), cases)
    if gpu:
        report["ceilings"]["copy_GBps"] = copy_ceiling(cupy)
        report["versions"].update(cupy=cupy.__version__, torch=torch.__version__,
                                  cudnn=str(torch.backends.cudnn.version()))
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False      # a true FP32 baseline
        torch.backends.cuda.matmul.allow_tf32 = False
        bench_conv_gpu(hs, cupy, torch, args.repeats, cases)
        bench_mfilter(hs, cupy, torch, args.repeats, cases, length)
        zero_copy(hs, cupy, torch, cases)
    else:
        bench_mfilter_cpu(hs, max(3, args.repeats // 4), cases, length)
    write_report(Path(args.json), report)
    print(f"wrote {args.json}: {len(cases)} cases", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
