"""halfscope.plots on the recorded benchmark reports in bench/results (real measurements).

Each figure's drawn data are read back from its Line2D and Rectangle artists and compared with
values taken from the JSON here, independently of the module (the selection rules are those its
docstrings state: measured cases only, the fastest when a configuration repeats). Values pass
through matplotlib unchanged as float64, so the comparisons are exact, except stacked bar heights
(stored as (bottom + h) - bottom: one rounding).
"""
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

plots = pytest.importorskip("halfscope.plots")

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def reports(kind):
    files = sorted(p for p in RESULTS.glob("*.json") if json.loads(p.read_text()).get("benchmark") == kind)
    assert files, f"no {kind} report in {RESULTS}"
    return files


def measured(c):
    p = c["params"]
    return "median_ms" in c and "failed" not in p and "skipped" not in p


def label(c):
    impl = "" if c["implementation"] == "halfscope" else c["implementation"] + " "
    return f"{impl}{c['method']} {c['precision']}"


def fastest(cases, key):
    best = {}
    for c in filter(measured, cases):
        if key(c) not in best or c["median_ms"] < best[key(c)]["median_ms"]:
            best[key(c)] = c
    return best


def lines(ax):
    """{label: (x, y)} of the data lines; reference lines (axhline: axes coordinates in x) are
    left out."""
    return {ln.get_label(): (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
            for ln in ax.get_lines() if ln.get_transform() is ax.transData}


def categories(ax, axis):
    FigureCanvasAgg(ax.figure).draw()
    ticks = ax.get_yticklabels() if axis == "y" else ax.get_xticklabels()
    return [t.get_text() for t in ticks]


def check_title(fig, report):
    assert report["device"]["name"] in fig.get_suptitle()


@pytest.mark.parametrize("path", reports("conv"), ids=lambda p: p.name)
def test_conv_figures(path):
    report = json.loads(path.read_text())
    best = fastest(report["cases"], lambda c: (c["params"]["rows"], label(c), c["params"]["kernel"]))
    sizes = sorted({k[0] for k in best})
    figs = plots.conv_figures(path)
    assert [f.get_label() for f in figs] == [f"conv-{n}" for n in sizes]
    for n, fig in zip(sizes, figs):
        check_title(fig, report)
        t_ax, s_ax, e_ax = fig.axes
        want = defaultdict(dict)
        for (rows, lab, w), c in best.items():
            if rows == n:
                want[lab][w] = c
        got = lines(t_ax)
        assert sorted(got) == sorted(want)
        for lab, (x, y) in got.items():
            widths = sorted(want[lab])
            np.testing.assert_array_equal(x, widths)
            np.testing.assert_array_equal(y, [want[lab][w]["median_ms"] for w in widths])
        # Fig. 3: every 16-bit storage series with a single-precision twin at common widths.
        expect = {}
        for lab in want:
            head, prec = lab.rsplit(" ", 1)
            common = sorted(set(want.get(f"{head} single", {})) & set(want[lab]))
            if prec in ("half", "mixed", "bf16") and common:
                expect[lab] = (common, [want[f"{head} single"][w]["median_ms"] / want[lab][w]["median_ms"]
                                        for w in common])
        speedups = lines(s_ax)
        # A partial sweep (tensor methods beside FP32 register, say) has no 16-bit / single pair.
        assert sorted(speedups) == sorted(expect)
        for lab, (x, y) in speedups.items():
            np.testing.assert_array_equal(x, expect[lab][0])
            np.testing.assert_array_equal(y, expect[lab][1])
        mre = lambda c: c["error"].get("mre")
        errors = lines(e_ax)
        assert sorted(errors) == sorted(lab for lab, cs in want.items() if any(mre(c) is not None for c in cs.values()))
        for lab, (x, y) in errors.items():
            np.testing.assert_array_equal(x, sorted(want[lab]))
            np.testing.assert_array_equal(y, [math.nan if mre(want[lab][w]) is None else mre(want[lab][w]) for w in x])


def test_conv_speedup_figure_is_drawn_from_the_full_sweeps():
    # Partial sweeps may leave Fig. 3 empty (test_conv_figures checks it matches); the recorded
    # full sweeps must draw it.
    drawn = [p.name for p in reports("conv") if any(lines(f.axes[1]) for f in plots.conv_figures(p))]
    assert drawn


@pytest.mark.parametrize("path", reports("deconv"), ids=lambda p: p.name)
def test_deconv_figures(path):
    report = json.loads(path.read_text())
    cases = [c for c in report["cases"] if measured(c)]
    snrs = sorted({c["params"]["snr_db"] for c in cases if "snr_db" in c["params"]})
    fig8 = [c for c in cases if c["method"] == "fig8-psf-convolution"]
    figs = plots.deconv_figures(path)
    assert len(figs) == len(snrs) + bool(fig8) + 1
    for snr, fig in zip(snrs, figs):
        check_title(fig, report)
        c_ax, d_ax = fig.axes
        traced = [c for c in cases if c["params"].get("snr_db") == snr and "series" in c]
        exact = next(c["error"]["final_criterion"] for c in cases
                     if c["params"].get("snr_db") == snr and c["method"] == "wiener")
        got_c, got_d = lines(c_ax), lines(d_ax)
        assert sorted(got_c) == sorted(label(c) for c in traced) == sorted(got_d)
        for c in traced:
            s = c["series"]
            np.testing.assert_array_equal(got_c[label(c)][0], s["iteration"])
            crit = np.array([math.nan if v is None else v for v in s["criterion"]], float)
            np.testing.assert_array_equal(got_c[label(c)][1], (crit - exact) / exact)
            np.testing.assert_array_equal(got_d[label(c)][1], np.array(s["distance"], float))
            # The last point of the curve is the recorded final criterion excess when the solver
            # ran to the end (the recorded image may be an earlier iterate when CG stalled).
            if c["params"].get("stop") == "iterations":
                assert got_c[label(c)][1][-1] == pytest.approx(c["error"]["criterion_excess"], rel=1e-6)
        target = [ln.get_ydata()[0] for ln in d_ax.get_lines() if ln.get_label().startswith("target")]
        assert target == [next(c["params"]["target"] for c in traced)]
    if fig8:
        ax_rel, ax_mse = figs[len(snrs)].axes
        assert [r.get_height() for r in ax_rel.patches] == [c["error"]["max_relative_difference"] for c in fig8]
        assert [r.get_height() for r in ax_mse.patches] == [c["error"]["mse"] for c in fig8]
        assert categories(ax_rel, "x") == [c["precision"] for c in fig8]
    bars = figs[-1]
    assert len(bars.axes) == len(snrs)
    for snr, ax in zip(snrs, bars.axes):
        hit = [c for c in cases if c["params"].get("snr_db") == snr and c["params"].get("reached_target")]
        assert [r.get_width() for r in ax.patches] == [c["params"]["solver_ms_to_target"] for c in hit]
        assert categories(ax, "y") == [label(c) for c in hit]
        if not hit:
            assert [t.get_text() for t in ax.texts] == ["no case reached the target"]


def mf_variant(c):
    t = c["params"].get("timing")
    return label(c) + (f" ({t})" if t and c["implementation"] == "halfscope" else "")


@pytest.mark.parametrize("path", reports("mfilter"), ids=lambda p: p.name)
def test_mfilter_figures(path):
    report = json.loads(path.read_text())
    figs = plots.mfilter_figures(path)
    present = [k for k in ("a", "b") if any(c["params"].get("case") == k and measured(c) for c in report["cases"])]
    assert [f.get_label() for f in figs] == [f"mfilter-case-{k}" for k in present]
    for k, fig in zip(present, figs):
        check_title(fig, report)
        t_ax, e_ax = fig.axes
        cs = sorted(fastest([c for c in report["cases"] if c["params"].get("case") == k], mf_variant).values(),
                    key=mf_variant)
        assert [r.get_width() for r in t_ax.patches] == [c["median_ms"] for c in cs]
        assert categories(t_ax, "y") == [mf_variant(c) for c in cs]
        keys = ("real_max_abs", "uniform_max_abs") if k == "a" else ("max_abs", "origins_max_abs")
        got = lines(e_ax)
        for c in cs:
            errs = [c["error"][key] for key in keys if key in c["error"]]
            if not errs:
                assert mf_variant(c) not in got
                continue
            assert all(e is not None and math.isfinite(e) for e in errs), "recorded runs are finite"
            x, y = got[mf_variant(c)]
            assert (list(x), list(y)) == ([c["median_ms"]], [max(errs)])


def tile_shares(c):
    counts = {k[6:]: v for k, v in c["params"].items() if k.startswith("tiles_")}
    total = sum(counts.values())
    return {k: (v / total if total else 0.0) for k, v in counts.items()}


def check_tile_bars(ax, cases):
    """Stacked bars: per variant drawn, one bar per case, heights = that variant's share."""
    handles, names = ax.get_legend_handles_labels()
    shares = [tile_shares(c) for c in cases]
    used = [v for v in plots.TILE_VARIANTS if any(s.get(v) for s in shares)]
    assert names == used
    for container, v in zip(ax.containers, used):
        # bar() stores bottom + share - bottom: one rounding of a sum of shares <= 1
        np.testing.assert_allclose([r.get_height() for r in container], [s.get(v, 0.0) for s in shares],
                                   rtol=0, atol=4 * 2.0**-53)
    tops = np.zeros(len(cases))
    for container in ax.containers:
        tops += [r.get_height() for r in container]
    np.testing.assert_allclose(tops, [1.0 if sum(s.values()) else 0.0 for s in shares], rtol=1e-12)


def check_policy_lines(ax, cases, value):
    want = defaultdict(list)
    for c in cases:
        v = value(c)
        if v is not None and math.isfinite(v):
            want[label(c)].append((c["params"]["n"], v))
    got = lines(ax)
    assert sorted(got) == sorted(want)
    for lab, pts in want.items():
        pts.sort()
        np.testing.assert_array_equal(got[lab][0], [p[0] for p in pts])
        np.testing.assert_array_equal(got[lab][1], [p[1] for p in pts])


@pytest.mark.parametrize("path", reports("cholesky"), ids=lambda p: p.name)
def test_cholesky_figures(path):
    report = json.loads(path.read_text())
    cases = sorted(fastest(report["cases"], lambda c: (label(c), c["params"]["n"])).values(),
                   key=lambda c: (c["params"]["n"], label(c)))
    ours = [c for c in cases if c["implementation"] == "halfscope"]
    acc, perf = plots.cholesky_figures(path)
    check_title(acc, report)
    check_tile_bars(acc.axes[0], ours)
    check_policy_lines(acc.axes[1], ours, lambda c: c["error"].get("backward"))
    check_policy_lines(perf.axes[0], cases, lambda c: c.get("TFLOPs"))
    check_policy_lines(perf.axes[1], cases, lambda c: c["median_ms"])


@pytest.mark.parametrize("path", reports("tor"), ids=lambda p: p.name)
def test_tor_figures(path):
    report = json.loads(path.read_text())
    cases = sorted(fastest(report["cases"], lambda c: (label(c), c["params"]["n"])).values(),
                   key=lambda c: (c["params"]["n"], label(c)))
    ours = [c for c in cases if c["implementation"] == "halfscope" and c["method"] != "reconstructor_fp64"]
    acc, perf = plots.tor_figures(path)
    check_title(perf, report)
    check_tile_bars(acc.axes[0], ours)
    diff = lambda c: abs(c["error"]["strehl_otf_diff_vs_fp64"]) if "strehl_otf_diff_vs_fp64" in c["error"] else None
    check_policy_lines(acc.axes[1], cases, diff)
    check_policy_lines(perf.axes[0], cases, lambda c: c.get("TFLOPs"))
    check_policy_lines(perf.axes[1], cases, lambda c: c["median_ms"])


def test_wrong_benchmark_and_missing_keys_are_named():
    mfilter = reports("mfilter")[0]
    with pytest.raises(ValueError, match=rf"{mfilter.name}.*'benchmark' is 'mfilter', expected 'conv'"):
        plots.conv_figures(mfilter)
    report = json.loads(reports("tor")[0].read_text())
    del report["cases"][1]["params"]["n"]
    with pytest.raises(ValueError, match=r"missing key 'params.n' in cases\[1\]"):
        plots.tor_figures(report)
    with pytest.raises(ValueError, match="missing key 'cases'"):
        plots.cholesky_figures({"benchmark": "cholesky", "device": {"name": "x"}})


def test_save_all_writes_pngs(tmp_path):
    path = reports("tor")[0]
    written = plots.save_all(path, tmp_path / "out")
    assert [p.name for p in written] == [f"{path.stem}-tor-accuracy.png", f"{path.stem}-tor-performance.png"]
    for p in written:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ceilings = RESULTS / "2026-11-21-nvidia-h200-ceilings.json"
    with pytest.raises(ValueError, match="'ceilings', expected one of"):
        plots.save_all(ceilings, tmp_path)


def test_mfilter_non_finite_error_is_drawn_as_such():
    # A method that wrote NaN (error recorded as null, or non-finite outputs counted) must not
    # look accurate: it is drawn apart, above every finite error, and labelled non-finite.
    report = json.loads(reports("mfilter")[0].read_text())
    a = [c for c in report["cases"] if c["params"].get("case") == "a" and measured(c)]
    a[0]["error"]["real_max_abs"] = None
    a[1]["error"]["uniform_nonfinite"] = 3
    fig = next(f for f in plots.mfilter_figures(report) if f.get_label() == "mfilter-case-a")
    got = lines(fig.axes[1])
    bad = {mf_variant(a[0]) + " (non-finite)", mf_variant(a[1]) + " (non-finite)"}
    assert bad <= set(got) and mf_variant(a[0]) not in got
    top = max(y[0] for lab, (x, y) in got.items() if lab not in bad)
    assert all(got[lab][1][0] > top for lab in bad)
