"""Pareto figure of the report: a meta-metric against FLOPs per image, one panel per subset.

Split from :mod:`analysis.report.plots` (whose helpers it uses; it imports nothing back); same conventions:
Agg canvas, no pyplot, Okabe-Ito colours with markers. Controls (a ``role`` column equal to
``control``) are grey crosses below a dashed floor and never on the frontier; ``chance_low`` /
``chance_high`` columns, when present, draw the chance band.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from .plots import META_LABELS, _new_figure, _style, metric_colors, si_flops

__all__ = ["pareto_figure", "si_flops"]

# -- Pareto ----------------------------------------------------------------------------------------

def _cost_label(v: float, zero_x: float | None) -> str:
    if zero_x is not None and v < zero_x * 10 ** 0.5:
        return "0" if math.isclose(v, zero_x, rel_tol=1e-6) else ""
    return si_flops(v)


def _frontier_mask(cost: np.ndarray, value: np.ndarray) -> np.ndarray:
    from analysis.pareto import (
        pareto_mask,  # the one Pareto implementation lives in analysis.pareto
    )

    return np.asarray(pareto_mask(value, cost), dtype=bool)


def _spread(ys: list[float], gap: float, lo: float, hi: float) -> list[float]:
    """Label positions near ``ys`` (sorted ascending) at least ``gap`` apart, inside [lo, hi]."""
    out = list(ys)
    for i in range(1, len(out)):
        out[i] = max(out[i], out[i - 1] + gap)
    overflow = out[-1] - hi if out else 0.0
    if overflow > 0:
        out = [y - overflow for y in out]
        for i in range(len(out) - 2, -1, -1):
            out[i] = min(out[i], out[i + 1] - gap)
    if out and out[0] < lo:  # too many labels for the space: squeeze evenly
        out = list(np.linspace(lo, hi, len(out)))
    return out


def _label_points(ax, xs: np.ndarray, ys: np.ndarray, texts: list[str], bold: np.ndarray,
                  max_per_cluster: int = 5) -> None:
    """Label points to their right; labels of points at a similar cost are spread vertically.

    In a cluster of more than ``max_per_cluster`` points only the ``bold`` (frontier) ones are
    labelled: long fans of leader lines are unreadable, and the legend names every point.
    """
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    lx = (np.log10(xs) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
    ly = (ys - y0) / (y1 - y0)
    order = np.argsort(lx, kind="stable")
    clusters: list[list[int]] = []
    for i in order:
        if clusters and lx[i] - lx[clusters[-1][-1]] < 0.12:
            clusters[-1].append(int(i))
        else:
            clusters.append([int(i)])
    for cl in clusters:
        if len(cl) > max_per_cluster:
            cl = [i for i in cl if bold[i]]
            if not cl:
                continue
        cl.sort(key=lambda i: ly[i])
        pos = _spread([float(ly[i]) for i in cl], gap=0.055, lo=0.02, hi=0.98)
        for i, py in zip(cl, pos, strict=True):
            ax.annotate(texts[i], xy=(xs[i], ys[i]), xycoords="data", xytext=(lx[i] + 0.03, py),
                        textcoords="axes fraction", va="center", ha="left", fontsize=8.5,
                        fontweight="bold" if bold[i] else "normal",
                        bbox=dict(boxstyle="round,pad=0.12", fc="white", ec="none", alpha=0.85),
                        zorder=2.5,  # under the markers: a label never hides another metric's point
                        arrowprops=dict(arrowstyle="-", color="0.6", lw=0.6, shrinkA=0, shrinkB=3))


def _same_as_avg(pts: pd.DataFrame, subset: str) -> bool:
    """A subset holding every SEG (a dataset with one subset) repeats the Avg panel."""
    if "Avg" not in set(pts["subset"]):
        return False
    a = pts[pts["subset"] == "Avg"].set_index("metric")["value"]
    b = pts[pts["subset"] == subset].set_index("metric")["value"]
    return a.index.equals(b.index) and np.allclose(a.to_numpy(float), b.to_numpy(float), equal_nan=True)


def pareto_figure(points: pd.DataFrame, meta_metric: str, subsets: Sequence[str] | None = None,
                  labels: Mapping[str, str] | None = None, groups: Mapping[str, str] | None = None,
                  title: str | None = None) -> Figure:
    """Meta-metric vs FLOPs per image (log x), one panel per subset, Pareto frontier drawn.

    Parameters
    ----------
    points : DataFrame
        ``metametrics.csv`` rows plus a ``flops`` column (FLOPs per image of the metric):
        ``metric, meta_metric, subset, value, flops`` and optionally ``ci_low, ci_high``
        (fractions; drawn as whiskers when present and finite). Rows of other meta-metrics are
        ignored; metrics without a cost (NaN) are left out (the panel says how many); metrics
        that cost 0 FLOPs are drawn in a column labelled ``0`` left of a dotted line.
    meta_metric : str
        ``rank``, ``sep``, ``delta``, ``kendall`` or ``pair_acc``.
    subsets : sequence of str, optional
        Panels, default ``Avg`` then the other subsets in order of appearance.
    labels, groups : mapping, optional
        Display name and colour group (e.g. family ``TIFA``) per metric.

    Returns
    -------
    Figure
        Frontier points are filled, labelled in bold and joined by a step line (the region a
        cheaper or better metric would have to enter to join the frontier); dominated points
        are hollow. Values are shown in %.

    Raises
    ------
    ValueError
        No rows for ``meta_metric``, or no ``flops`` column.
    """
    pts, subsets = _pareto_rows(points, meta_metric, subsets)
    labels = dict(labels or {})
    metrics = list(dict.fromkeys(pts["metric"]))
    style = metric_colors(metrics, groups)
    n = len(subsets)
    ncols = min(n, 2)
    nrows = math.ceil(n / ncols)
    with _style():
        fig = _new_figure(6.0 * ncols + 2.2, 4.6 * nrows)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax in axes[n:]:
            ax.set_visible(False)
        any_zero, any_chance, no_cost, no_value = False, False, set(), set()
        numbered = len(metrics) > 8  # a numbered key: 19 names do not fit beside their points
        number = {m: i + 1 for i, m in enumerate(metrics)}
        point_label = {m: str(number[m]) if numbered else labels.get(m, m) for m in metrics}
        # The grid can hold one axes more than there are subsets (the spare one is hidden above).
        for ax, subset in zip(axes, subsets, strict=False):
            d = pts[pts["subset"] == subset]
            cost = pd.to_numeric(d["flops"], errors="coerce").to_numpy(float)
            has_cost = np.isfinite(cost) & (cost >= 0)
            ok = has_cost & np.isfinite(d["value"].to_numpy(float))
            no_cost |= set(d.loc[~has_cost, "metric"])
            no_value |= set(d.loc[has_cost & ~ok, "metric"])
            has_zero, chance = _pareto_panel(ax, d[ok], cost[ok], subset, meta_metric, style, point_label)
            any_chance |= chance
            any_zero |= has_zero
        note = _pareto_note(pts, labels, any_chance, any_zero, no_cost, no_value)
        fig.supxlabel("\n".join(textwrap.wrap(note, width=int(fig.get_figwidth() * 14))), fontsize=9, color="0.3")
        if len(metrics) > 1:
            _pareto_legend(fig, pts, metrics, style, number if numbered else None, labels)
        fig.suptitle(title or f"{META_LABELS.get(meta_metric, meta_metric)} vs cost")
    return fig


def _pareto_rows(points: pd.DataFrame, meta_metric: str,
                 subsets: Sequence[str] | None) -> tuple[pd.DataFrame, Sequence[str]]:
    """The rows of ``meta_metric`` (checked: a ``flops`` column, at least one row) and the panels:
    ``subsets``, or by default ``Avg`` then the other subsets that do not repeat it."""
    if "flops" not in points.columns:
        raise ValueError(f"expected a 'flops' column (FLOPs per image) in the Pareto points, got {list(points.columns)}")
    pts = points[points["meta_metric"] == meta_metric]
    if pts.empty:
        raise ValueError(f"expected rows with meta_metric={meta_metric!r}, got meta-metrics "
                         f"{sorted(points['meta_metric'].unique())}")
    if subsets is None:
        seen = list(dict.fromkeys(pts["subset"]))
        subsets = (["Avg"] if "Avg" in seen else []) + [s for s in seen if s != "Avg" and not _same_as_avg(pts, s)]
    return pts, subsets


def _pareto_panel(ax, d: pd.DataFrame, cost: np.ndarray, subset: str, meta_metric: str,
                  style: Mapping[str, tuple[str, str]], point_label: Mapping[str, str]) -> tuple[bool, bool]:
    """One subset's panel from its rows with a cost and a value; returns (a metric costs 0 FLOPs,
    the chance band was drawn), both False for an empty panel."""
    is_ctrl = (d["role"] == "control").to_numpy() if "role" in d.columns else np.zeros(len(d), bool)
    # A free metric (0 FLOPs, e.g. a random control) cannot sit on a log axis: it is drawn
    # in a column labelled "0" one decade left of the cheapest costed metric; the
    # frontier is computed on the true costs.
    pos = cost[cost > 0]
    zero_x = 10.0 ** (math.floor(math.log10(pos.min())) - 1) if len(pos) else 1.0
    x = np.where(cost > 0, cost, zero_x)
    ax.set_xscale("log")
    ax.set_title(subset)
    ax.set_xlabel("FLOPs per image (log scale; k, M, G, T, P = 10^3 ... 10^15)")
    ax.set_ylabel(META_LABELS.get(meta_metric, meta_metric) + ", %")
    ax.grid(True, which="major", color="0.9", lw=0.8)
    if d.empty:
        ax.text(0.5, 0.5, "no metric with a FLOPs estimate and a value", transform=ax.transAxes,
                ha="center")
        return False, False
    val = d["value"].to_numpy(float) * 100
    # Controls are built to fail: they set the floor, they never compete for the frontier.
    front = np.zeros(len(d), bool)
    if (~is_ctrl).any():
        front[~is_ctrl] = _frontier_mask(cost[~is_ctrl], val[~is_ctrl])
    lo = d["ci_low"].to_numpy(float) * 100 if "ci_low" in d else np.full(len(d), np.nan)
    hi = d["ci_high"].to_numpy(float) * 100 if "ci_high" in d else np.full(len(d), np.nan)
    _draw_pareto_points(ax, d["metric"], x, val, (lo, hi), front, is_ctrl, style)
    chance = _draw_floor_and_chance(ax, d, val, is_ctrl)
    has_zero = _set_cost_axis(ax, x, cost, zero_x, has_positive=bool(len(pos)))
    # Staircase: a frontier metric's value holds until a costlier one improves on it.
    fi = np.flatnonzero(front)
    fi = fi[np.lexsort((-val[fi], cost[fi]))]
    if len(fi):
        fx = np.r_[x[fi], ax.get_xlim()[1]]
        fy = np.r_[val[fi], val[fi][-1]]
        ax.step(fx, fy, where="post", color="0.25", lw=1.4, ls="-", zorder=1.8,  # above the grid (1.5)
                label="Pareto frontier")
    allv = np.r_[val, lo[np.isfinite(lo)], hi[np.isfinite(hi)]]
    if {"chance_low", "chance_high"} <= set(d.columns):
        allv = np.r_[allv, [v * 100 for v in (*d["chance_low"], *d["chance_high"]) if np.isfinite(v)]]
    span = max(allv.max() - allv.min(), 1.0)
    ax.set_ylim(allv.min() - 0.08 * span, allv.max() + 0.12 * span)
    _label_points(ax, x, val, [point_label[m] for m in d["metric"]], front)
    return has_zero, chance


def _draw_pareto_points(ax, metrics: Sequence[str], x: np.ndarray, val: np.ndarray, ci: tuple[np.ndarray, np.ndarray],
                        front: np.ndarray, is_ctrl: np.ndarray, style: Mapping[str, tuple[str, str]]) -> None:
    """A panel's markers and interval whiskers (``ci``: the low and high ends, NaN where there is
    no interval): frontier filled, dominated hollow, controls grey crosses."""
    lo, hi = ci
    for i, m in enumerate(metrics):
        colour, marker = style[m]
        if is_ctrl[i]:
            colour = "0.6"
        if np.isfinite(lo[i]) and np.isfinite(hi[i]):
            ax.errorbar(x[i], val[i], yerr=[[max(val[i] - lo[i], 0)], [max(hi[i] - val[i], 0)]],
                        fmt="none", ecolor=colour, elinewidth=1.2, capsize=3, alpha=0.8, zorder=2)
        if is_ctrl[i]:
            ax.scatter(x[i], val[i], s=52, marker="x", color="0.45", linewidths=1.8, zorder=4)
        else:
            ax.scatter(x[i], val[i], s=64 if front[i] else 46, marker=marker, zorder=4,
                       facecolors=colour if front[i] else "white", edgecolors=colour, linewidths=1.6)


def _draw_floor_and_chance(ax, d: pd.DataFrame, val: np.ndarray, is_ctrl: np.ndarray) -> bool:
    """The best control's dashed floor and, when the rows carry one, the chance band; returns
    whether the band was drawn (the figure's note then explains it)."""
    if is_ctrl.any():
        floor = float(np.max(val[is_ctrl]))
        ax.axhline(floor, color="0.45", lw=1.2, ls="--", zorder=1.7)
        ax.annotate("best control", xy=(1.0, floor), xycoords=("axes fraction", "data"), ha="right",
                    va="bottom", fontsize=8, color="0.35")
    if {"chance_low", "chance_high"} <= set(d.columns):
        clo = d["chance_low"].to_numpy(float) * 100
        chi = d["chance_high"].to_numpy(float) * 100
        if np.isfinite(clo).any() and np.isfinite(chi).any():
            ax.axhspan(np.nanmin(clo), np.nanmax(chi), color="0.85", alpha=0.6, zorder=0.5, lw=0)
            return True
    return False


def _set_cost_axis(ax, x: np.ndarray, cost: np.ndarray, zero_x: float, has_positive: bool) -> bool:
    """Limits, ticks and SI labels of a panel's log cost axis, with the "0" column of free metrics;
    returns whether the panel has such a metric."""
    xmin, xmax = x.min(), x.max()
    pad = max(math.log10(xmax / xmin) * 0.08, 0.4)
    ax.set_xlim(10 ** (math.log10(xmin) - pad), 10 ** (math.log10(xmax) + pad * 2.5))
    if math.log10(xmax / xmin) < 2:
        # A narrow cost range has one decade tick or none: tick 1-2-5 steps instead.
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    # SI labels as in the paper's FLOP row (604M, 224T, 1.66P); no minor ticks (clutter,
    # and slow to lay out over many decades).
    has_zero = bool((cost == 0).any())
    # Bind this panel's zero column now: a closure would read the last panel's value.
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _pos, z=(zero_x if has_zero else None): _cost_label(v, z)))
    ax.xaxis.set_minor_locator(NullLocator())
    if has_zero and has_positive:
        ax.axvline(zero_x * 10 ** 0.5, color="0.5", lw=0.8, ls=":", zorder=0)
    elif has_zero:  # every metric is free: the axis is just the "0" column
        ax.set_xlim(zero_x / 10, zero_x * 10)
        ax.xaxis.set_major_locator(FixedLocator([zero_x]))
    return has_zero


def _pareto_note(pts: pd.DataFrame, labels: Mapping[str, str], any_chance: bool, any_zero: bool,
                 no_cost: set, no_value: set) -> str:
    """The one note under the panels (inside an axes it would cover points): what the marks mean
    and which metrics are not shown."""
    note = ("Filled marker, bold name: Pareto-optimal among the non-control metrics (none both cheaper and "
            "better). Solid staircase: the frontier.")
    if "role" in pts.columns and (pts["role"] == "control").any():
        note += " Grey \u00d7: controls (never on the frontier); dashed line: the best control, the floor."
    if any_chance:
        note += " Shaded band: chance level (scores permuted within each SEG)."
    if any_zero:
        note += " At \u201c0\u201d (left of the dotted line): metrics that cost 0 FLOPs."
    if no_cost:
        note += f" Not shown (no FLOPs estimate): {', '.join(labels.get(m, m) for m in sorted(no_cost))}."
    if no_value:
        note += f" Not shown where the value is undefined: {', '.join(labels.get(m, m) for m in sorted(no_value))}."
    return note


def _pareto_legend(fig: Figure, pts: pd.DataFrame, metrics: list[str], style: Mapping[str, tuple[str, str]],
                   number: Mapping[str, int] | None, labels: Mapping[str, str]) -> None:
    """The figure's metric key right of the panels (numbered when ``number`` is given)."""
    from matplotlib.lines import Line2D

    ctrl = set(pts.loc[pts["role"] == "control", "metric"]) if "role" in pts.columns else set()
    handles = [Line2D([], [], ls="none", marker="x" if m in ctrl else style[m][1],
                      color="0.45" if m in ctrl else style[m][0], markersize=7,
                      label=(f"{number[m]}. " if number is not None else "") + labels.get(m, m)
                      + (" (control)" if m in ctrl else "")) for m in metrics]
    fig.legend(handles=handles, loc="outside right upper", frameon=False, title="metric")


