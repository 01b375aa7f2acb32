#!/usr/bin/env python3
"""Peers of `halfscope bench mfilter` case (a), measured in the same run on the same inputs.

Reads what `halfscope bench mfilter --export-inputs DIR` wrote for study 001's case
({templates,data,reference}_{real,uniform}.npy: templates (T, K) float32, data (L,) float32, and
halfscope's FP64 CPU reference of the first n_ref correlation times, (T, n_ref)), then times on
the GPU, on the uniform data, CUDA events, median of repeats:

- cuDNN through PyTorch `F.conv1d` (valid cross-correlation of the T templates over the data), in
  FP32 with TF32 off and in FP16 (templates and data divided by their maximum |x| first, as the
  study's FP16 cuBLAS variants do, so FP16 cannot overflow), plus the normalization in PyTorch
  (window energies by `avg_pool1d` in FP32, template energies in FP64, flat windows 0, clamp to
  [-1, 1]), so the timed quantity is the same normalized CC as halfscope's; `F.conv1d` alone, on
  inputs already in its dtype (FP16: already scaled by the maxima), is recorded as
  params.conv1d_ms;
- an explicit FP16 GEMM on the materialised Hankel matrix (n_corr x K, built before timing, as in
  shared/references/gpu-baselines-h200.md), FP16 output, when the device has the memory;

and records each one's error max |CC - CC_fp64| on the real and the uniform data against the
exported reference, appending the cases to the halfscope JSON report in place (same schema).

    python3 bench/peers/mfilter_peers.py --inputs DIR --report RESULT.json [--repeats 20]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from peer_common import cuda_time, write_report

# Time budget of one case's timed calls (ms): at least 3 calls are always timed.
MAX_MS_PER_CASE = 3000.0

DATASETS = ("real", "uniform")  # the timed one is the last, as in halfscope


def study_params(report):
    """The params of the report's case (a) (from its first halfscope case (a) row), or None."""
    for c in report.get("cases", []):
        p = c.get("params", {})
        if c.get("implementation") == "halfscope" and p.get("case") == "a":
            keep = ("case", "templates", "channels", "length", "samples", "step", "n_corr",
                    "normalize", "timed_data", "real_data", "reference", "reference_times")
            return {k: p[k] for k in keep if k in p}
    return None


def load_inputs(inputs, params):
    """{name: (templates, data, reference)} of the exported data sets, shapes checked."""
    sets = {}
    for name in DATASETS:
        paths = [inputs / f"{what}_{name}.npy" for what in ("templates", "data", "reference")]
        if not all(p.exists() for p in paths):
            continue
        t, d, r = (np.load(p) for p in paths)
        expect = {"templates": (params["templates"], params["length"]), "data": (params["samples"],),
                  "reference": (params["templates"], params["reference_times"])}
        for (what, shape), arr in zip(expect.items(), (t, d, r)):
            if arr.shape != tuple(shape):
                sys.exit(f"mfilter_peers: {what}_{name}.npy: expected shape {tuple(shape)}, found {arr.shape}")
        sets[name] = (t, d, r)
    if "uniform" not in sets:
        sys.exit(f"mfilter_peers: {inputs}: no templates/data/reference_uniform.npy "
                 "(run halfscope bench mfilter --export-inputs there first)")
    return sets


def max_abs_error(ref, x):
    """(max |x - ref| over finite x, or inf when any is not finite; count of non-finite x)."""
    x = np.asarray(x, dtype=np.float64)
    bad = ~np.isfinite(x)
    worst = float(np.abs(x[~bad] - ref[~bad].astype(np.float64)).max()) if (~bad).any() else 0.0
    return (math.inf if bad.any() else worst), int(bad.sum())


def json_number(x):
    return x if x is not None and math.isfinite(x) else None


def make_case(implementation, method, precision, base, stats, errors, extra):
    """A case in the report schema; GB/s and TFLOP/s on the same models as halfscope's rows."""
    T, K, L, n = base["templates"], base["length"], base["samples"], base["n_corr"]
    sec = stats["median_ms"] * 1e-3
    case = {"implementation": implementation, "method": method, "precision": precision,
            "params": dict(base, **extra), **stats,
            "GBps": 4.0 * (L + T * K + T * n) / sec / 1e9,
            "TFLOPs": 2.0 * T * K * n / sec / 1e12, "error": {}}
    for name, (worst, bad) in errors.items():
        case["error"][f"{name}_max_abs"] = json_number(worst)
        case["error"][f"{name}_nonfinite"] = bad
    return case


def append_and_write(report_path, report, cases):
    report["cases"] += cases
    write_report(report_path, report)


def measure(sets, base, repeats):
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False  # a true FP32 baseline
    torch.backends.cuda.matmul.allow_tf32 = False
    K = base["length"]
    n_ref = base["reference_times"]
    versions = {"torch": torch.__version__, "cudnn": str(torch.backends.cudnn.version())}
    dev = {name: (torch.from_numpy(t).cuda(), torch.from_numpy(d).cuda(), r)
           for name, (t, d, r) in sets.items()}

    def normalized(num, t, d):
        # Energies: template in FP64, windows in FP32 by a direct K-sum per window (avg_pool1d),
        # no cumulative sum whose rounding would grow with the trace length.
        et = (t.double() ** 2).sum(dim=1).float()
        es = F.avg_pool1d((d * d)[None, None], K, stride=1)[0, 0] * K
        den = torch.sqrt(et[:, None] * es[None, :])
        cc = torch.where(den > 0, num / den, torch.zeros((), device=num.device))
        return cc.clamp_(-1.0, 1.0)

    cases = []
    for precision, dtype in (("single", torch.float32), ("half", torch.float16)):
        def pipeline(t, d, dtype=dtype):
            if dtype == torch.float32:
                num = F.conv1d(d[None, None], t[:, None])[0]
            else:  # global normalization by the maxima, as the study's FP16 cuBLAS variants
                st, sd = t.abs().max(), d.abs().max()
                num = F.conv1d((d / sd).half()[None, None], (t / st).half()[:, None])[0]
                num = num.float() * (st * sd)
            return normalized(num.float(), t, d)

        errors = {}
        for name, (t, d, r) in dev.items():
            errors[name] = max_abs_error(r, pipeline(t, d)[:, :n_ref].cpu().numpy())
        t, d, _ = dev["uniform"]
        stats = cuda_time(lambda: pipeline(t, d), repeats, torch, MAX_MS_PER_CASE)
        # conv1d_ms: F.conv1d alone, on inputs already in its dtype (FP16: already scaled by the
        # maxima), so the reductions, divisions and casts of the pipeline are not in it.
        if dtype == torch.float32:
            x_in, w_in = d[None, None], t[:, None]
        else:
            x_in = (d / d.abs().max()).half()[None, None].contiguous()
            w_in = (t / t.abs().max()).half()[:, None].contiguous()
        conv = cuda_time(lambda: F.conv1d(x_in, w_in), repeats, torch, MAX_MS_PER_CASE)
        del x_in, w_in
        cases.append(make_case("cudnn-via-pytorch", "conv1d", precision, base, stats, errors,
                               dict(versions, timing="call", tf32=False, conv1d_ms=conv["median_ms"],
                                    normalization="in torch: template energy FP64, window energy "
                                                  "avg_pool1d FP32, flat windows 0")))
        print(f"peers: conv1d {precision} {stats['median_ms']:.3f} ms", flush=True)

    # Explicit FP16 GEMM on the materialised Hankel matrix: n_corr x K FP16.
    n = base["n_corr"]
    need = 2 * n * K + 2 * base["templates"] * n + (64 << 20)
    torch.cuda.empty_cache()  # the conv1d cases' cached blocks count as used otherwise
    free, _ = torch.cuda.mem_get_info()
    if need > free:
        print(f"peers: hankel GEMM skipped: needs {need >> 20} MiB, {free >> 20} MiB free", flush=True)
        return cases
    errors, gemm = {}, None
    for name, (t, d, r) in dev.items():
        st, sd = t.abs().max(), d.abs().max()
        h = (d / sd).half().as_strided((n, K), (1, 1)).contiguous()
        t16 = (t / st).half()
        out = torch.matmul(t16, h.T)
        errors[name] = max_abs_error(r, normalized(out.float() * (st * sd), t, d)[:, :n_ref].cpu().numpy())
        if name == "uniform":
            gemm = cuda_time(lambda: torch.matmul(t16, h.T), repeats, torch, MAX_MS_PER_CASE)
        del h, out
    cases.append(make_case(
        "cublas-via-pytorch", "hankel-gemm", "half", base, gemm, errors,
        dict(versions, timing="gemm", output="fp16",
             fp16_reduced_precision_reduction=torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
             note="matrix built before timing; normalization untimed")))
    print(f"peers: hankel FP16 GEMM {gemm['median_ms']:.3f} ms", flush=True)
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    report_path = Path(args.report)
    report = json.loads(report_path.read_text())
    if report.get("benchmark") != "mfilter":
        sys.exit(f"mfilter_peers: {report_path}: expected an mfilter report, found {report.get('benchmark')!r}")
    base = study_params(report)
    if base is None:
        print(f"mfilter_peers: {report_path} has no case (a): nothing to compare", flush=True)
        return 0
    sets = load_inputs(Path(args.inputs), base)
    try:
        import torch  # noqa: F401  (the GPU machine has it; this one may not)
    except ImportError:
        sys.exit("mfilter_peers: PyTorch is not installed: the peers run on the GPU machine")
    append_and_write(report_path, report, measure(sets, base, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
