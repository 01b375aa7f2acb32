"""Shared helpers of halfscope.plots: loading and checking a bench report, the figure factory,
case selection and the study-002 drawing blocks (tile-variant bars, one line per policy)."""
from __future__ import annotations

import importlib
import json
import math
import os
from collections import defaultdict
from pathlib import Path

# Tile variants of the tile Cholesky, most to least accurate (docs/cholesky.md).
TILE_VARIANTS = ("DP", "SP", "TF32", "HP1", "HP2", "HP3", "BF16")


def figure(name: str, suptitle: str, ncols: int, width: float = 6.0, height: float = 4.8):
    """(Figure, list of ncols axes in one row): matplotlib's object API, imported here so that
    halfscope imports without matplotlib; `name` becomes the figure's label (save_all's file
    name)."""
    try:
        mpl_figure = importlib.import_module("matplotlib.figure")
    except ImportError as e:
        raise ImportError("halfscope.plots needs matplotlib, which is not installed: "
                          "pip install matplotlib") from e
    fig = mpl_figure.Figure(figsize=(width * ncols, height), layout="constrained")
    fig.set_label(name)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    fig.suptitle(suptitle)
    return fig, list(axes)


def load(report, benchmark: str, case_keys=(), param_keys=()):
    """(report dict, name for messages) after checking it is `benchmark`'s JSON."""
    if isinstance(report, (str, os.PathLike)):
        name = str(report)
        try:
            report = json.loads(Path(report).read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{name}: not JSON ({e})") from e
    else:
        name = "the report dict"
    if not isinstance(report, dict):
        raise ValueError(f"{name}: expected a JSON object, found {type(report).__name__}")
    for key in ("benchmark", "device", "cases"):
        if key not in report:
            raise ValueError(f"{name}: missing key {key!r} (not a halfscope bench report)")
    if report["benchmark"] != benchmark:
        raise ValueError(f"{name}: key 'benchmark' is {report['benchmark']!r}, expected {benchmark!r}")
    if "name" not in report["device"]:
        raise ValueError(f"{name}: missing key 'device.name'")
    for i, c in enumerate(report["cases"]):
        for key in ("implementation", "method", "precision", "params", *case_keys):
            if key not in c:
                raise ValueError(f"{name}: missing key {key!r} in cases[{i}]")
        if measured(c):
            for key in param_keys:
                if key not in c["params"]:
                    raise ValueError(f"{name}: missing key 'params.{key}' in cases[{i}]")
    return report, name


def measured(c) -> bool:
    """Whether a case holds a measurement (not failed, not skipped, timed)."""
    p = c.get("params", {})
    return "median_ms" in c and "failed" not in p and "skipped" not in p


def title(report, what: str) -> str:
    """A figure title naming the device, date and commit of the run."""
    return (f"{what}: {report['device']['name']} ({report.get('date', '?')}, "
            f"commit {report.get('commit', '?')})")


def label(c) -> str:
    """'method precision', prefixed by the implementation for peers."""
    impl = "" if c["implementation"] == "halfscope" else c["implementation"] + " "
    return f"{impl}{c['method']} {c['precision']}"


def finite(x) -> float:
    """x as a float, NaN for null / missing / non-finite (matplotlib leaves a gap there)."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else math.nan


def fastest(cases, key):
    """{key(c): fastest c} over the measured cases."""
    best = {}
    for c in cases:
        k = key(c)
        if measured(c) and (k not in best or c["median_ms"] < best[k]["median_ms"]):
            best[k] = c
    return best


def tile_mix(ax, cases, xlabel_of):
    """Stacked bars of the tile-variant shares (Fig. 5's bars), one bar per case; returns the
    (variant, shares) drawn."""
    drawn = []
    names = [xlabel_of(c) for c in cases]
    bottom = [0.0] * len(cases)
    for v in TILE_VARIANTS:
        counts = [c["params"].get(f"tiles_{v}", 0) for c in cases]
        if not any(counts):
            continue
        totals = [sum(c["params"].get(f"tiles_{w}", 0) for w in TILE_VARIANTS) for c in cases]
        shares = [k / t if t else 0.0 for k, t in zip(counts, totals)]
        ax.bar(names, shares, bottom=bottom, label=v)
        bottom = [b + s for b, s in zip(bottom, shares)]
        drawn.append((v, shares))
    ax.set(ylabel="share of off-diagonal tiles", ylim=(0, 1.05))
    ax.tick_params(axis="x", labelsize=6, labelrotation=30)
    if drawn:
        ax.legend(fontsize=7)
    return drawn


def per_policy_lines(ax, cases, value, **fmt):
    """One line per label (implementation, method, precision): x = params.n, y = value(c)."""
    series = defaultdict(list)
    for c in cases:
        y = value(c)
        if math.isfinite(y):
            series[label(c)].append((c["params"]["n"], y))
    for name in sorted(series):
        pts = sorted(series[name])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set(xlabel="n (matrix order)", xscale="log", **fmt)
    if series:
        ax.legend(fontsize=6)
    else:
        ax.text(0.5, 0.5, "nothing measured or scored", transform=ax.transAxes, ha="center")
    return len(series)
