#!/usr/bin/env python3
"""Tables and plots for docs/performance.md from benchmark JSON (bench/README.md schema).

    python3 tools/perf_tables.py conv REPORT.json [--out TABLES.md] [--plots DIR]
    python3 tools/perf_tables.py mfilter REPORT.json [--out TABLES.md]

For `conv`: per image size, the fastest halfscope configuration at FP32-grade accuracy
(MRE <= 1e-6) against the faster of cuDNN FP32 and CuPy fftconvolve measured in the same run,
the issue's targets (ratio >= 3 on 4096^2; widths <= 7 in FP16 storage at >= 70 % of the copy
ceiling; tensor split within 2x of FP32 direct's MRE and >= 2x faster than FP32 register from
width 15), then every case. With --plots, study 000's Figures 2-4 as PNG (needs matplotlib).

For `mfilter`: study 001's Table I on this GPU (case a: every halfscope method and every peer,
time, GB/s, TFLOP/s, max |CC - CC_fp64| on real and on uniform data, speed-up over the most
accurate cuBLAS variant's GemmEx time), the issue's case (a) targets, and the network case (b):
time, TFLOP/s against the FP16 ceiling, peak device memory, error, planted detections found.
"""
import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

FP32_GRADE = 1e-6


def ok(c):
    return "median_ms" in c and "failed" not in c.get("params", {})


def fmt(x, spec=".3g"):
    return "–" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def conv_tables(report):
    cases = [c for c in report["cases"] if ok(c)]
    copy = report.get("ceilings", {}).get("copy_GBps")
    by = defaultdict(list)
    for c in cases:
        by[(c["params"]["rows"], c["params"]["kernel"])].append(c)
    sizes = sorted({k[0] for k in by})
    out = [f"Device: {report['device']['name']} (driver {report['device'].get('driver', '?')}), "
           f"date {report['date']}, commit {report['commit']}; copy ceiling {fmt(copy, '.0f')} GB/s.\n"]
    for n in sizes:
        out.append(f"\n#### {n}x{n}: fastest FP32-grade halfscope against the fastest FP32 peer\n")
        out.append("| width | halfscope (method, precision) | ms | MRE | cuDNN FP32 ms | CuPy FFT ms | peer/halfscope |")
        out.append("| --- | --- | --- | --- | --- | --- | --- |")
        for w in sorted({k[1] for k in by if k[0] == n}):
            cs = by[(n, w)]
            hs = [c for c in cs if c["implementation"] == "halfscope" and c["error"].get("mre", 1) <= FP32_GRADE]
            best = min(hs, key=lambda c: c["median_ms"], default=None)
            cudnn = next((c for c in cs if c["implementation"] == "cudnn-via-pytorch" and c["precision"] == "single"), None)
            cupy = next((c for c in cs if c["implementation"] == "cupy"), None)
            peer = min([c["median_ms"] for c in (cudnn, cupy) if c], default=None)
            label = f"{best['method']} {best['precision']}" + (f" ({best['params']['chosen']})" if best and "chosen" in best["params"] else "") if best else "–"
            out.append(f"| {w} | {label} | {fmt(best and best['median_ms'])} | {fmt(best and best['error'].get('mre'), '.1e')} | "
                       f"{fmt(cudnn and cudnn['median_ms'])} | {fmt(cupy and cupy['median_ms'])} | "
                       f"{fmt(peer / best['median_ms'] if best and peer else None, '.2f')} |")
    # Targets 2 and 3.
    out.append("\n#### Small kernels in FP16 storage: fraction of the copy ceiling\n")
    out.append("| size | width | method | precision | GB/s | of copy |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for c in sorted(cases, key=lambda c: (c["params"]["rows"], c["params"]["kernel"], c["method"])):
        if c["implementation"] == "halfscope" and c["precision"] in ("half", "mixed") and c["params"]["kernel"] <= 7 \
                and c["method"] in ("register", "naive", "separable", "auto") and c["params"]["rows"] >= 4096:
            out.append(f"| {c['params']['rows']} | {c['params']['kernel']} | {c['method']} | {c['precision']} | "
                       f"{fmt(c.get('GBps'), '.0f')} | {fmt(c['GBps'] / copy * 100 if copy and c.get('GBps') else None, '.0f')} % |")
    out.append("\n#### Tensor split against FP32 register (error ratio, speed-up)\n")
    out.append("| size | width | split MRE | register FP32 MRE | MRE ratio | split ms | register ms | speed-up |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (n, w), cs in sorted(by.items()):
        s = next((c for c in cs if c["implementation"] == "halfscope" and c["method"] == "tensor" and c["precision"] == "split"), None)
        r = next((c for c in cs if c["implementation"] == "halfscope" and c["method"] == "register" and c["precision"] == "single"), None)
        if s and r:
            out.append(f"| {n} | {w} | {fmt(s['error']['mre'], '.2e')} | {fmt(r['error']['mre'], '.2e')} | "
                       f"{fmt(s['error']['mre'] / r['error']['mre'] if r['error']['mre'] else None, '.2f')} | "
                       f"{fmt(s['median_ms'])} | {fmt(r['median_ms'])} | {fmt(r['median_ms'] / s['median_ms'], '.2f')} |")
    out.append("\n#### Every case\n")
    out.append("| size | width | implementation | method | precision | median ms | GB/s | TFLOP/s | MRE | max abs |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for c in sorted(cases, key=lambda c: (c["params"]["rows"], c["params"]["kernel"], c["implementation"], c["method"], c["precision"])):
        out.append(f"| {c['params']['rows']} | {c['params']['kernel']} | {c['implementation']} | {c['method']} | {c['precision']} | "
                   f"{fmt(c['median_ms'])} | {fmt(c.get('GBps'), '.0f')} | {fmt(c.get('TFLOPs'), '.2f')} | "
                   f"{fmt(c['error'].get('mre'), '.1e')} | {fmt(c['error'].get('max_abs'), '.1e')} |")
    failed = [c for c in report["cases"] if "failed" in c.get("params", {})]
    for c in failed:
        out.append(f"\nFailed: {c['method']} {c['precision']} {c['params']['rows']}^2 width {c['params']['kernel']}: {c['params']['failed']}")
    return "\n".join(out) + "\n"


def conv_plots(report, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cases = [c for c in report["cases"] if ok(c)]
    outdir.mkdir(parents=True, exist_ok=True)
    for n in sorted({c["params"]["rows"] for c in cases}):
        series = defaultdict(list)
        for c in cases:
            if c["params"]["rows"] == n:
                impl = "" if c["implementation"] == "halfscope" else c["implementation"] + " "
                series[f"{impl}{c['method']} {c['precision']}"].append((c["params"]["kernel"], c["median_ms"], c["error"].get("mre")))
        fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
        for label, pts in sorted(series.items()):
            pts.sort()
            w = [p[0] for p in pts]
            axes[0].semilogy(w, [p[1] for p in pts], marker=".", label=label)
            axes[2].semilogy(w, [p[2] if p[2] else float("nan") for p in pts], marker=".", label=label)
        for method in ("naive", "register", "fft", "gemm"):
            s, h = dict((p[0], p[1]) for p in series.get(f"{method} single", [])), dict((p[0], p[1]) for p in series.get(f"{method} half", []))
            common = sorted(set(s) & set(h))
            if common:
                axes[1].plot(common, [s[w] / h[w] for w in common], marker=".", label=method)
        axes[0].set(title=f"Fig. 2: time, {n}x{n}", xlabel="kernel width", ylabel="ms")
        axes[1].set(title="Fig. 3: speed-up half over single", xlabel="kernel width", ylabel="t_single / t_half")
        axes[2].set(title="Fig. 4: MRE against FP64", xlabel="kernel width", ylabel="MRE")
        axes[0].legend(fontsize=6, ncol=2)
        axes[1].legend(fontsize=8)
        fig.suptitle(f"halfscope bench conv on {report['device']['name']} ({report['date']}, {report['commit']})")
        fig.tight_layout()
        fig.savefig(outdir / f"conv-{n}.png", dpi=90)
        plt.close(fig)


MF_SPLIT_MS, MF_SPLIT_ERROR, MF_SPEEDUP, MF_COPY_FRACTION, MF_FP16_FRACTION = 0.12, 1e-5, 10.0, 0.55, 0.40


def pct(x):
    return "–" if x is None else f"{x * 100:.0f} %"


def mf_label(c):
    impl = "" if c["implementation"] == "halfscope" else c["implementation"] + " "
    timing = {"gemm": " (GemmEx only)", "public": " (public call)"}.get(c["params"].get("timing"), "") \
        if c["implementation"] == "halfscope" else ""
    return f"{impl}{c['method']}{timing}"


def mf_error(c, prefix):
    """(error, non-finite count) of one data set: an error recorded as null (JSON has no inf) or
    any non-finite output counts as inf, never as "not measured"."""
    err, bad = c["error"].get(f"{prefix}max_abs"), c["error"].get(f"{prefix}nonfinite") or 0
    present = f"{prefix}max_abs" in c["error"]
    if present and (err is None or bad > 0):
        return math.inf, int(bad)
    return err, int(bad)


def fmt_error(c, prefix):
    err, bad = mf_error(c, prefix)
    if err is not None and math.isinf(err):
        return f"inf / {bad} non-finite" if bad else "inf"
    return fmt(err, ".1e")


def mf_worst_error(c):
    errs = [mf_error(c, k)[0] for k in ("real_", "uniform_")]
    errs = [e for e in errs if e is not None]
    return max(errs) if errs else None


def fmt_worst_error(c):
    bad = sum(mf_error(c, k)[1] for k in ("real_", "uniform_"))
    err = mf_worst_error(c)
    if err is not None and math.isinf(err):
        return f"inf / {bad} non-finite" if bad else "inf"
    return fmt(err, ".1e")


def mfilter_tables(report):
    ceil = report.get("ceilings", {})
    copy, fp16 = ceil.get("copy_GBps"), ceil.get("fp16_TFLOPs")
    cases = [c for c in report["cases"] if ok(c)]
    a = [c for c in cases if c["params"].get("case") == "a"]
    b = [c for c in cases if c["params"].get("case") == "b"]
    out = [f"Device: {report['device']['name']} (driver {report['device'].get('driver', '?')}), "
           f"date {report['date']}, commit {report['commit']}; copy ceiling {fmt(copy, '.0f')} GB/s, "
           f"FP16 tensor ceiling {fmt(fp16, '.0f')} TFLOP/s.\n"]
    if a:
        p = a[0]["params"]
        cublas = [c for c in a if c["implementation"] == "halfscope" and c["method"].startswith("cublas")
                  and c["params"].get("timing") == "gemm"]
        acc = mf_worst_error
        ref = min((c for c in cublas if acc(c) is not None), key=acc, default=None)
        out.append(f"\n#### Case (a), study 001 Table I: {p['templates']} templates x {p['length']} samples x "
                   f"{p['samples']} time steps, one channel\n")
        out.append(f"Timed on uniform [-50, 50] data; errors max |CC - CC_fp64| against the FP64 CPU reference on the "
                   f"first {p.get('reference_times')} correlation times; real data: {p.get('real_data', '?')}. "
                   f"Speed-up: time of {ref['method'] + ' GemmEx' if ref else 'the most accurate cuBLAS variant'} "
                   f"(the most accurate cuBLAS variant) over the row's time.\n")
        out.append("| variant | precision | ms | GB/s | TFLOP/s | error real | error uniform | speed-up vs most accurate cuBLAS |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        timing_rank = {"gemm": 0, "call": 1, "public": 2}
        order = lambda c: (c["implementation"] != "halfscope", c["method"], c["precision"],
                           timing_rank.get(c["params"].get("timing"), 3))
        for c in sorted(a, key=order):
            out.append(f"| {mf_label(c)} | {c['precision']} | {fmt(c['median_ms'], '.4g')} | {fmt(c.get('GBps'), '.0f')} | "
                       f"{fmt(c.get('TFLOPs'), '.2f')} | {fmt_error(c, 'real_')} | {fmt_error(c, 'uniform_')} | "
                       f"{fmt(ref['median_ms'] / c['median_ms'] if ref else None, '.2f')} |")
        split = next((c for c in a if c["implementation"] == "halfscope" and c["method"] == "tensor"
                      and c["precision"] == "split" and c["params"].get("timing") == "call"), None)
        out.append("\n#### Case (a) targets\n")
        out.append("| target | measured | met |")
        out.append("| --- | --- | --- |")
        if split:
            err, ms = mf_worst_error(split), split["median_ms"]
            speed = ref["median_ms"] / ms if ref else None
            frac = split.get("GBps") / copy if copy and split.get("GBps") else None
            yes = lambda v: "–" if v is None else ("yes" if v else "**no**")
            out.append(f"| tensor split <= {MF_SPLIT_MS} ms | {fmt(ms, '.4g')} ms | {yes(ms <= MF_SPLIT_MS)} |")
            out.append(f"| tensor split error <= {MF_SPLIT_ERROR:g} | {fmt_worst_error(split)} | {yes(err <= MF_SPLIT_ERROR if err is not None else None)} |")
            out.append(f"| >= {MF_SPEEDUP:g}x faster than the most accurate cuBLAS ({ref['method'] if ref else '–'}) | "
                       f"{fmt(speed, '.1f')}x | {yes(speed >= MF_SPEEDUP if speed else None)} |")
            out.append(f"| FP32 output at >= {MF_COPY_FRACTION:.0%} of copy bandwidth | {pct(frac)} | "
                       f"{yes(frac >= MF_COPY_FRACTION if frac else None)} |")
        else:
            out.append("| tensor split | not measured | – |")
    if b:
        p = b[0]["params"]
        out.append(f"\n#### Case (b), network: {p['templates']} templates x {p['channels']} channels x {p['length']} "
                   f"samples x {p['samples']} time steps, moveouts {p.get('moveouts', '?')}, weights {p.get('weights', '?')}\n")
        out.append(f"Error: max |stack - stack_fp64| on the first {p.get('reference_times')} correlation times (noise "
                   f"only) and around planted origins (the peaks, stack ~ sum of weights). GB/s use each row's "
                   f"traffic floor (the detect rows never write the stack). Share of the FP16 ceiling: split "
                   f"counts its 3 FP16 products per multiply-add, the others the direct-equivalent flops. "
                   f"Target: the mixed tensor stack row at >= {MF_FP16_FRACTION:.0%} of the FP16 tensor ceiling.\n")
        out.append("| path | precision | ms | GB/s | TFLOP/s | of FP16 ceiling | peak device GiB | error (leading) | "
                   "error (origins) | detections | planted found |")
        out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for c in sorted(b, key=lambda c: (c["method"], c["precision"])):
            q = c["params"]
            peak = q.get("peak_device_bytes")
            found = c["error"].get("planted_found_fraction")
            executed = 3.0 if c["precision"] == "split" else 1.0
            share = executed * c["TFLOPs"] / fp16 if fp16 and c.get("TFLOPs") else None
            target = ""
            if q.get("target"):
                target = " (target: " + ("met" if share is not None and share >= MF_FP16_FRACTION else "**not met**") + ")"
            out.append(f"| {c['method']}{' **target**' if q.get('target') else ''} | {c['precision']} | "
                       f"{fmt(c['median_ms'], '.4g')} | {fmt(c.get('GBps'), '.0f')} | {fmt(c.get('TFLOPs'), '.1f')} | "
                       f"{pct(share)}{target} | "
                       f"{fmt(peak / 2**30 if peak else None, '.2f')} | {fmt_error(c, '')} | {fmt_error(c, 'origins_')} | "
                       f"{q.get('detections', '–')} | {pct(found)} |")
    for c in report["cases"]:
        if "failed" in c.get("params", {}):
            out.append(f"\nFailed: case {c['params'].get('case', '?')} {c['method']} {c['precision']} "
                       f"({c['params'].get('timing', 'call')}): {c['params']['failed']}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["conv", "mfilter"])
    ap.add_argument("report")
    ap.add_argument("--out")
    ap.add_argument("--plots")
    args = ap.parse_args()
    report = json.loads(Path(args.report).read_text())
    text = conv_tables(report) if args.what == "conv" else mfilter_tables(report)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    if args.plots and args.what == "conv":
        conv_plots(report, Path(args.plots))


if __name__ == "__main__":
    main()
