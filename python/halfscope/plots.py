"""The studies' figures drawn from benchmark JSON (``bench/results/*.json``, bench/README.md schema).

Each function takes a path or an already loaded dict and returns a list of
``matplotlib.figure.Figure`` (the object API: no pyplot state, safe in threads and with the Agg
backend); every title names the device, date and commit of the run. `save_all` picks the function
from the file's ``"benchmark"`` field and writes one PNG per figure. matplotlib is imported lazily.

Only cases that were measured are drawn: a case with ``params.failed`` or ``params.skipped`` (a
method that threw, a peer that did not fit) or without ``median_ms`` is left out, as in
tools/perf_tables.py. When a file repeats a configuration, the fastest of its cases is drawn.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

from . import _plot_report as _r
from ._plot_report import TILE_VARIANTS  # noqa: F401  (public: the order the bars stack in)

__all__ = ["conv_figures", "deconv_figures", "mfilter_figures", "cholesky_figures",
           "tor_figures", "save_all"]

# Storage precisions whose speed-up over single Fig. 3 of study 000 shows (16-bit storage).
SIXTEEN_BIT = ("half", "mixed", "bf16")
# bench tor's within_0.001_of_fp64: the Strehl difference the study accepts.
STREHL_TOLERANCE = 1e-3


# ---------------------------------------------------------------------------------------------
# Study 000: convolution (Figs. 2-4) and deconvolution (Figs. 7-8)

def conv_figures(report):
    """Study 000 Figs. 2-4 from a ``halfscope bench conv`` report, one figure per image size.

    Each figure has three axes: (0) median time against kernel width, one line per
    implementation, method and precision; (1) speed-up ``t_single / t_p`` of each 16-bit storage
    precision p (half, mixed, bf16) over single for the same implementation and method, at the
    widths both were measured; (2) mean relative error (``error.mre``) against width, for the
    series that recorded it.

    Parameters
    ----------
    report : str, os.PathLike or dict
        The JSON file or its loaded content.

    Returns
    -------
    list of matplotlib.figure.Figure
        Sorted by image size (``params.rows``); labels ``conv-<rows>``.

    Raises
    ------
    ValueError
        Not a conv report, or a case without ``params.rows`` / ``params.kernel``.
    """
    report, _ = _r.load(report, "conv", param_keys=("rows", "kernel"))
    best = _r.fastest(report["cases"],
                      lambda c: (c["params"]["rows"], _r.label(c), c["params"]["kernel"]))
    figures = []
    for n in sorted({k[0] for k in best}):
        series = defaultdict(dict)  # label -> {width: case}
        for (rows, label, width), c in best.items():
            if rows == n:
                series[label][width] = c
        fig, (t_ax, s_ax, e_ax) = _r.figure(f"conv-{n}", _r.title(report, f"bench conv {n}x{n}"), 3)
        for label in sorted(series):
            widths = sorted(series[label])
            cs = [series[label][w] for w in widths]
            t_ax.plot(widths, [c["median_ms"] for c in cs], marker=".", label=label)
            mre = [_r.finite(c.get("error", {}).get("mre")) for c in cs]
            if any(math.isfinite(m) for m in mre):
                e_ax.plot(widths, mre, marker=".", label=label)
        for label in sorted(series):
            head, _, precision = label.rpartition(" ")
            single = series.get(f"{head} single")
            if precision not in SIXTEEN_BIT or not single:
                continue
            common = sorted(set(single) & set(series[label]))
            if common:
                ratio = [single[w]["median_ms"] / series[label][w]["median_ms"] for w in common]
                s_ax.plot(common, ratio, marker=".", label=label)
        t_ax.set(title="Fig. 2: time", xlabel="kernel width", ylabel="median ms", yscale="log")
        s_ax.set(title="Fig. 3: speed-up over single", xlabel="kernel width", ylabel="t_single / t")
        s_ax.axhline(1.0, color="0.6", lw=0.8, label="_no speed-up")
        e_ax.set(title="Fig. 4: MRE against FP64", xlabel="kernel width", ylabel="MRE", yscale="log")
        for ax in (t_ax, s_ax, e_ax):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=6, ncol=2)
        figures.append(fig)
    return figures


def _excess(criterion, exact):
    """Fig. 7's curve: (J - J*) / J* when the exact minimum J* (Wiener FP64) is in the report
    (the recorded criterion_excess), else J itself; the raw J of every solver sits within 1e-8 of
    J* after a few iterations, so only the excess separates them."""
    values = [_r.finite(v) for v in criterion]
    return values if exact is None else [(v - exact) / exact for v in values]


def deconv_figures(report):
    """Study 000 Figs. 7-8 from a ``halfscope bench deconv`` report.

    Returns, in this order: per SNR (``params.snr_db``, ascending) one Fig. 7 figure with two
    axes, (0) the FP64 criterion against the iteration, one line per solver and precision, with
    the exact (Wiener FP64) criterion as a horizontal line, and (1) the relative distance to the
    exact solution with the target as a horizontal line; then Fig. 8 when the report has the
    ``fig8-psf-convolution`` cases (bars of max relative difference and MSE of H f in each
    16-bit precision against single); then one figure of the solver time to the target, one axes
    per SNR, one bar per case that reached it (halfscope and peers).

    Parameters
    ----------
    report : str, os.PathLike or dict

    Returns
    -------
    list of matplotlib.figure.Figure
        Labels ``deconv-fig7-snr<dB>``, ``deconv-fig8``, ``deconv-time-to-target``.

    Raises
    ------
    ValueError
        Not a deconv report, or a traced case whose ``series`` lacks ``iteration``,
        ``criterion`` or ``distance``.
    """
    report, name = _r.load(report, "deconv")
    cases = [c for c in report["cases"] if _r.measured(c)]
    for i, c in enumerate(report["cases"]):
        for key in ("iteration", "criterion", "distance"):
            if "series" in c and key not in c["series"]:
                raise ValueError(f"{name}: missing key 'series.{key}' in cases[{i}]")
    snrs = sorted({c["params"]["snr_db"] for c in cases if "snr_db" in c["params"]})
    figures = []
    for snr in snrs:
        at = [c for c in cases if c["params"].get("snr_db") == snr]
        fig, (c_ax, d_ax) = _r.figure(f"deconv-fig7-snr{snr:g}",
                                       _r.title(report, f"bench deconv, Fig. 7, SNR {snr:g} dB"), 2)
        exact = next((c["error"]["final_criterion"] for c in at
                      if c["method"] == "wiener" and "final_criterion" in c.get("error", {})), None)
        for c in at:
            if "series" in c:
                s = c["series"]
                c_ax.plot(s["iteration"], _excess(s["criterion"], exact), label=_r.label(c))
                d_ax.plot(s["iteration"], [_r.finite(v) for v in s["distance"]], label=_r.label(c))
        target = next((c["params"]["target"] for c in at if "target" in c["params"]), None)
        if target is not None:
            d_ax.axhline(target, color="k", ls=":", lw=0.8, label=f"target {target:g}")
        c_ax.set(title="criterion" + (" above the exact minimum" if exact is not None else ""),
                 xlabel="iteration", yscale="log",
                 ylabel="(J - J*) / J*" if exact is not None else "criterion J (FP64)")
        d_ax.set(title="distance to the exact solution", xlabel="iteration",
                 ylabel="||f - f*|| / ||f*||", yscale="log")
        c_ax.legend(fontsize=6, ncol=2)
        figures.append(fig)
    fig8 = [c for c in cases if c["method"] == "fig8-psf-convolution"]
    if fig8:
        fig, axes = _r.figure("deconv-fig8",
                              _r.title(report, "bench deconv, Fig. 8: H f against single"), 2)
        names = [c["precision"] for c in fig8]
        for ax, key in zip(axes, ("max_relative_difference", "mse")):
            ax.bar(names, [_r.finite(c["error"].get(key)) for c in fig8])
            ax.set(title=key.replace("_", " "), ylabel=key, yscale="log")
        figures.append(fig)
    if snrs:
        fig, axes = _r.figure("deconv-time-to-target",
                               _r.title(report, "bench deconv: solver time to the target"), len(snrs))
        for ax, snr in zip(axes, snrs):
            hit = [c for c in cases if c["params"].get("snr_db") == snr
                   and c["params"].get("reached_target") and "solver_ms_to_target" in c["params"]]
            ax.barh([_r.label(c) for c in hit], [c["params"]["solver_ms_to_target"] for c in hit])
            ax.set(title=f"SNR {snr:g} dB (cases that reached it)", xlabel="ms", xscale="log")
            if not hit:
                ax.set_yticks([])
                ax.text(0.5, 0.5, "no case reached the target", transform=ax.transAxes, ha="center")
            ax.tick_params(axis="y", labelsize=6)
        figures.append(fig)
    return figures


# ---------------------------------------------------------------------------------------------
# Study 001: matched filtering

def _mf_variant(c) -> str:
    timing = c["params"].get("timing")
    extra = f" ({timing})" if timing and c["implementation"] == "halfscope" else ""
    return _r.label(c) + extra


def _mf_worst_error(c, prefixes):
    """Largest max |CC - CC_fp64| over the data sets; inf when one is null or non-finite
    (a method that wrote NaN must not look accurate); NaN when none was measured."""
    errs = []
    for p in prefixes:
        if f"{p}max_abs" in c["error"]:
            e, bad = c["error"][f"{p}max_abs"], c["error"].get(f"{p}nonfinite") or 0
            errs.append(math.inf if e is None or bad else float(e))
    return max(errs) if errs else math.nan


def mfilter_figures(report):
    """Study 001's time and accuracy per method and precision from a ``bench mfilter`` report.

    One figure per case present (``params.case`` 'a', then 'b'), two axes each: (0) median time,
    one horizontal bar per variant (implementation, method, precision and timing); (1) accuracy
    against time, one marker (a Line2D) per variant that recorded an error: x the median time,
    y the worst max |CC - CC_fp64| (case a: over real and uniform data; case b: leading times and
    planted origins). A non-finite error is drawn at the top of the axes' range as a red x.

    Parameters
    ----------
    report : str, os.PathLike or dict

    Returns
    -------
    list of matplotlib.figure.Figure
        Labels ``mfilter-case-a`` / ``mfilter-case-b``.

    Raises
    ------
    ValueError
        Not an mfilter report, or a case without ``params.case`` or ``error``.
    """
    report, _ = _r.load(report, "mfilter", case_keys=("error",), param_keys=("case",))
    figures = []
    for case, prefixes in (("a", ("real_", "uniform_")), ("b", ("", "origins_"))):
        cs = sorted(_r.fastest([c for c in report["cases"] if c["params"].get("case") == case],
                             _mf_variant).values(), key=_mf_variant)
        if not cs:
            continue
        fig, (t_ax, e_ax) = _r.figure(f"mfilter-case-{case}",
                                       _r.title(report, f"bench mfilter, case ({case})"), 2, height=5.5)
        t_ax.barh([_mf_variant(c) for c in cs], [c["median_ms"] for c in cs])
        t_ax.set(title="median time", xlabel="ms", xscale="log")
        t_ax.tick_params(axis="y", labelsize=6)
        errs = [(c, _mf_worst_error(c, prefixes)) for c in cs]
        finite = [e for _, e in errs if math.isfinite(e) and e > 0]
        top = max(finite) * 10 if finite else 1.0
        for c, e in errs:
            if math.isinf(e):
                e_ax.plot([c["median_ms"]], [top], "rx", label=_mf_variant(c) + " (non-finite)")
            elif math.isfinite(e):
                e_ax.plot([c["median_ms"]], [e], "o", label=_mf_variant(c))
        e_ax.set(title="accuracy against time", xlabel="median ms", ylabel="max |CC - CC_fp64|",
                 xscale="log", yscale="log")
        e_ax.legend(fontsize=6)
        figures.append(fig)
    return figures


# ---------------------------------------------------------------------------------------------
# Study 002: tile Cholesky and the tomographic reconstructor (Figs. 5-7)

def cholesky_figures(report):
    """Study 002 Figs. 5-7 for the factorization alone, from a ``bench cholesky`` report.

    Two figures. "precision mix vs accuracy": (0) stacked bars of the share of each tile variant
    (``tiles_DP`` ... ``tiles_BF16``) per halfscope case, labelled policy @ n; (1) the backward
    error ``||A - L L^T||_F / ||A||_F`` against n, one line per policy. "performance": (0) TFLOP/s
    against n and (1) median time against n, one line per policy or peer (cuSOLVER).

    Parameters
    ----------
    report : str, os.PathLike or dict

    Returns
    -------
    list of matplotlib.figure.Figure
        Labels ``cholesky-accuracy``, ``cholesky-performance``.

    Raises
    ------
    ValueError
        Not a cholesky report, or a measured case without ``params.n``.
    """
    report, _ = _r.load(report, "cholesky", param_keys=("n",))
    cases = list(_r.fastest(report["cases"], lambda c: (_r.label(c), c["params"]["n"])).values())
    cases.sort(key=lambda c: (c["params"]["n"], _r.label(c)))
    ours = [c for c in cases if c["implementation"] == "halfscope"]
    fig_a, (mix_ax, err_ax) = _r.figure("cholesky-accuracy",
                                         _r.title(report, "bench cholesky: precision mix vs accuracy"), 2)
    _r.tile_mix(mix_ax, ours, lambda c: f"{c['precision']} @ {c['params']['n']}")
    mix_ax.set(title="Fig. 5: tile variants")
    _r.per_policy_lines(err_ax, ours, lambda c: _r.finite(c.get("error", {}).get("backward")),
                        title="backward error", ylabel="||A - L L^T||_F / ||A||_F", yscale="log")
    fig_p, (f_ax, t_ax) = _r.figure("cholesky-performance",
                                     _r.title(report, "bench cholesky: performance per policy"), 2)
    _r.per_policy_lines(f_ax, cases, lambda c: _r.finite(c.get("TFLOPs")),
                        title="Figs. 6-7: TFLOP/s (n^3/3 / time)", ylabel="TFLOP/s")
    _r.per_policy_lines(t_ax, cases, lambda c: _r.finite(c["median_ms"]),
                        title="median time", ylabel="ms", yscale="log")
    return [fig_a, fig_p]


def tor_figures(report):
    """Study 002 Figs. 5-7 for the reconstructor, from a ``bench tor`` report.

    Two figures. "precision mix vs accuracy": (0) stacked bars of the tile-variant shares per
    halfscope policy and system, labelled policy @ system; (1) ``|strehl_otf_diff_vs_fp64|``, the
    Strehl ratio's (OTF) distance to the FP64 reconstructor's, against n, one line per policy and
    the peer, with the 1e-3 tolerance as a horizontal line (systems beyond ``--max-fp64-n`` are
    not scored and are absent; an exact zero is not drawn on the log axis). "performance":
    (0) TFLOP/s and (1) median time (factorization + solves) against n, one line per policy or
    peer.

    Parameters
    ----------
    report : str, os.PathLike or dict

    Returns
    -------
    list of matplotlib.figure.Figure
        Labels ``tor-accuracy``, ``tor-performance``.

    Raises
    ------
    ValueError
        Not a tor report, or a measured case without ``params.n`` / ``params.system``.
    """
    report, _ = _r.load(report, "tor", param_keys=("n", "system"))
    cases = list(_r.fastest(report["cases"], lambda c: (_r.label(c), c["params"]["n"])).values())
    cases.sort(key=lambda c: (c["params"]["n"], _r.label(c)))
    ours = [c for c in cases
            if c["implementation"] == "halfscope" and c["method"] != "reconstructor_fp64"]
    fig_a, (mix_ax, s_ax) = _r.figure("tor-accuracy",
                                       _r.title(report, "bench tor: precision mix vs accuracy"), 2)
    _r.tile_mix(mix_ax, ours, lambda c: f"{c['precision']} @ {c['params']['system']}")
    mix_ax.set(title="Fig. 5: tile variants")
    strehl_diff = lambda c: abs(_r.finite(c.get("error", {}).get("strehl_otf_diff_vs_fp64")))
    _r.per_policy_lines(s_ax, cases, strehl_diff,
                        title="Fig. 5: Strehl (OTF) against the FP64 reconstructor",
                        ylabel="|Strehl - Strehl_fp64|", yscale="log")
    if s_ax.lines:
        s_ax.axhline(STREHL_TOLERANCE, color="k", ls=":", lw=0.8, label=f"{STREHL_TOLERANCE:g}")
    fig_p, (f_ax, t_ax) = _r.figure("tor-performance",
                                     _r.title(report, "bench tor: performance per policy"), 2)
    _r.per_policy_lines(f_ax, cases, lambda c: _r.finite(c.get("TFLOPs")),
                        title="Figs. 6-7: TFLOP/s", ylabel="TFLOP/s")
    _r.per_policy_lines(t_ax, cases, lambda c: _r.finite(c["median_ms"]),
                        title="median time (factor + solves)", ylabel="ms", yscale="log")
    return [fig_a, fig_p]


_BY_BENCHMARK = {"conv": conv_figures, "deconv": deconv_figures, "mfilter": mfilter_figures,
                 "cholesky": cholesky_figures, "tor": tor_figures}


def save_all(json_path, out_dir, *, dpi: int = 100):
    """Draw every figure of a benchmark JSON and write them as PNG.

    Parameters
    ----------
    json_path : str or os.PathLike
        A ``bench/results`` file; its ``"benchmark"`` field picks the function.
    out_dir : str or os.PathLike
        Created if missing; each figure is written as ``<json stem>-<figure label>.png``.
    dpi : int

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        A benchmark without figures here (e.g. ceilings), or a malformed report.
    """
    path = Path(json_path)
    try:
        report = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from e
    kind = report.get("benchmark") if isinstance(report, dict) else None
    if kind not in _BY_BENCHMARK:
        raise ValueError(f"{path}: key 'benchmark' is {kind!r}, expected one of "
                         f"{', '.join(sorted(_BY_BENCHMARK))}")
    figures = _BY_BENCHMARK[kind](path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fig in figures:
        target = out / f"{path.stem}-{fig.get_label()}.png"
        fig.savefig(target, dpi=dpi)
        written.append(target)
    return written
