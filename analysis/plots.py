"""Report figures: Pareto frontiers vs cost, score histograms per error level, per-SEG heatmaps
(the paper's Figure 8 style) and a per-SEG scatter of two metrics.

Every function takes plain tables (pandas DataFrames in the ``scores.csv`` / ``metametrics.csv``
/ ``per_seg.csv`` layouts), builds a :class:`matplotlib.figure.Figure` on the Agg canvas (no
pyplot, no global figure state, no display needed) and returns it; :func:`save_figure` writes the
PNG. Colours are the Okabe-Ito palette (distinguishable with the common colour-vision
deficiencies), ordinal error levels use ``viridis`` and the heatmaps the diverging ``RdBu``
(red = worse, blue = better, as in the paper's Figure 8); markers vary as well so that no
information is carried by colour alone.

This module never imports torch; costs arrive as numbers (FLOPs per image).
"""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

__all__ = [
    "OKABE_ITO", "MARKERS", "save_figure", "pareto_figure", "score_histograms", "seg_heatmap",
    "rank_scatter", "add_levels", "metric_colors", "si_flops",
]

log = logging.getLogger(__name__)

# Okabe & Ito (2008) "Color Universal Design": black first is dropped so points never vanish
# into text; order chosen so neighbours differ in lightness too.
OKABE_ITO: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
                              "#000000")
MARKERS: tuple[str, ...] = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*")

_RC = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.dpi": 130,
    "figure.dpi": 100,
}

META_LABELS = {"rank": "rank$_m$ (Spearman ordering)", "sep": "sep$_m$ (KS separation)",
               "delta": "delta$_m$ (normalised gap)", "kendall": "Kendall $\\tau_b$ ordering",
               "pair_acc": "pairwise ordering accuracy"}


@contextmanager
def _style():
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG (parents created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _style():
        fig.savefig(path, format="png")
    return path


def metric_colors(metrics: Sequence[str], groups: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """(colour, marker) per metric: by group (e.g. metric family) when given, else by metric."""
    out: dict[str, tuple[str, str]] = {}
    if groups:
        names = list(dict.fromkeys(groups.get(m, "other") for m in metrics))
        seen: dict[str, int] = {}
        for m in metrics:
            g = groups.get(m, "other")
            k = seen.get(g, 0)
            seen[g] = k + 1
            out[m] = (OKABE_ITO[names.index(g) % len(OKABE_ITO)], MARKERS[k % len(MARKERS)])
    else:
        for i, m in enumerate(metrics):
            out[m] = (OKABE_ITO[i % len(OKABE_ITO)], MARKERS[(i // len(OKABE_ITO) + i) % len(MARKERS)])
    return out


def add_levels(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` with an integer ``level`` column parsed from ``node`` (``"2b"`` -> 2).

    Raises
    ------
    ValueError
        A node label that is not digits then optional letters, naming the row.
    """
    if "level" in scores.columns:
        return scores
    from seg_data import LabelError, parse_label

    levels = []
    for i, (seg, node) in enumerate(zip(scores["seg_id"], scores["node"])):
        try:
            levels.append(parse_label(str(node))[0])
        except LabelError as e:
            raise ValueError(f"scores row {i + 2} (SEG {seg}): {e}") from e
    return scores.assign(level=levels)


# -- Pareto ----------------------------------------------------------------------------------------

def _cost_label(v: float, zero_x: float | None) -> str:
    if zero_x is not None and v < zero_x * 10 ** 0.5:
        return "0" if math.isclose(v, zero_x, rel_tol=1e-6) else ""
    return si_flops(v)


def si_flops(v: float) -> str:
    """``6.04e8`` -> ``"604M"``, ``1e13`` -> ``"10T"`` (3 significant digits, SI prefix)."""
    if not np.isfinite(v) or v <= 0:
        return ""
    exp = min(max(int(math.floor(math.log10(v) / 3)), 0), 6)
    return f"{v / 10 ** (3 * exp):.3g}{['', 'k', 'M', 'G', 'T', 'P', 'E'][exp]}"


def _frontier_mask(cost: np.ndarray, value: np.ndarray) -> np.ndarray:
    from analysis.pareto import pareto_mask  # the one Pareto implementation lives in analysis.pareto

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
        for i, py in zip(cl, pos):
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
    if "flops" not in points.columns:
        raise ValueError(f"expected a 'flops' column (FLOPs per image) in the Pareto points, got {list(points.columns)}")
    pts = points[points["meta_metric"] == meta_metric]
    if pts.empty:
        raise ValueError(f"expected rows with meta_metric={meta_metric!r}, got meta-metrics "
                         f"{sorted(points['meta_metric'].unique())}")
    if subsets is None:
        seen = list(dict.fromkeys(pts["subset"]))
        subsets = (["Avg"] if "Avg" in seen else []) + [s for s in seen if s != "Avg" and not _same_as_avg(pts, s)]
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
        any_zero, no_cost, no_value = False, set(), set()
        for ax, subset in zip(axes, subsets):
            d = pts[pts["subset"] == subset]
            cost = pd.to_numeric(d["flops"], errors="coerce").to_numpy(float)
            has_cost = np.isfinite(cost) & (cost >= 0)
            ok = has_cost & np.isfinite(d["value"].to_numpy(float))
            no_cost |= set(d.loc[~has_cost, "metric"])
            no_value |= set(d.loc[has_cost & ~ok, "metric"])
            d, cost = d[ok], cost[ok]
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
                continue
            val = d["value"].to_numpy(float) * 100
            front = _frontier_mask(cost, val)
            lo = d["ci_low"].to_numpy(float) * 100 if "ci_low" in d else np.full(len(d), np.nan)
            hi = d["ci_high"].to_numpy(float) * 100 if "ci_high" in d else np.full(len(d), np.nan)
            for i, m in enumerate(d["metric"]):
                colour, marker = style[m]
                if np.isfinite(lo[i]) and np.isfinite(hi[i]):
                    ax.errorbar(x[i], val[i], yerr=[[max(val[i] - lo[i], 0)], [max(hi[i] - val[i], 0)]],
                                fmt="none", ecolor=colour, elinewidth=1.2, capsize=3, alpha=0.8, zorder=2)
                ax.scatter(x[i], val[i], s=64 if front[i] else 46, marker=marker, zorder=4,
                           facecolors=colour if front[i] else "white", edgecolors=colour, linewidths=1.6)
            fi = np.flatnonzero(front)
            fi = fi[np.lexsort((-val[fi], cost[fi]))]
            xmin, xmax = x.min(), x.max()
            pad = max(math.log10(xmax / xmin) * 0.08, 0.4)
            ax.set_xlim(10 ** (math.log10(xmin) - pad), 10 ** (math.log10(xmax) + pad * 2.5))
            if math.log10(xmax / xmin) < 2:
                # A narrow cost range has one decade tick or none: tick 1-2-5 steps instead.
                ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            # SI labels as in the paper's FLOP row (604M, 224T, 1.66P); no minor ticks (clutter,
            # and slow to lay out over many decades).
            has_zero = bool((cost == 0).any())
            ax.xaxis.set_major_formatter(FuncFormatter(
                lambda v, _pos: _cost_label(v, zero_x if has_zero else None)))
            ax.xaxis.set_minor_locator(NullLocator())
            if has_zero and len(pos):
                ax.axvline(zero_x * 10 ** 0.5, color="0.5", lw=0.8, ls=":", zorder=0)
            elif has_zero:  # every metric is free: the axis is just the "0" column
                ax.set_xlim(zero_x / 10, zero_x * 10)
                ax.xaxis.set_major_locator(FixedLocator([zero_x]))
            # Staircase: a frontier metric's value holds until a costlier one improves on it.
            fx = np.r_[x[fi], ax.get_xlim()[1]]
            fy = np.r_[val[fi], val[fi][-1]]
            ax.step(fx, fy, where="post", color="0.25", lw=1.4, ls="--", zorder=1.8,  # above the grid (1.5)
                    label="Pareto frontier")
            allv = np.r_[val, lo[np.isfinite(lo)], hi[np.isfinite(hi)]]
            span = max(allv.max() - allv.min(), 1.0)
            ax.set_ylim(allv.min() - 0.08 * span, allv.max() + 0.12 * span)
            _label_points(ax, x, val, [labels.get(m, m) for m in d["metric"]], front)
            any_zero |= has_zero
        # One note under the panels (inside an axes it would cover points).
        note = "Filled marker, bold name: Pareto-optimal (no metric both cheaper and better)."
        if any_zero:
            note += " At \u201c0\u201d (left of the dotted line): metrics that cost 0 FLOPs."
        if no_cost:
            note += f" Not shown (no FLOPs estimate): {', '.join(labels.get(m, m) for m in sorted(no_cost))}."
        if no_value:
            note += f" Not shown where the value is undefined: {', '.join(labels.get(m, m) for m in sorted(no_value))}."
        fig.supxlabel("\n".join(textwrap.wrap(note, width=int(fig.get_figwidth() * 14))), fontsize=9, color="0.3")
        if len(metrics) > 1:
            from matplotlib.lines import Line2D

            handles = [Line2D([], [], ls="none", marker=style[m][1], color=style[m][0], markersize=7,
                              label=labels.get(m, m)) for m in metrics]
            fig.legend(handles=handles, loc="outside right upper", frameon=False, title="metric")
        fig.suptitle(title or f"{META_LABELS.get(meta_metric, meta_metric)} vs cost")
    return fig


# -- score histograms per error level --------------------------------------------------------------

def _pool_levels(levels: np.ndarray, max_levels: int, min_count: int) -> tuple[np.ndarray, int]:
    """Cap levels at ``max_levels - 1`` and pool sparse top levels downwards (returns the cap)."""
    cap = int(min(max_levels - 1, levels.max())) if len(levels) else 0
    while cap > 0 and np.sum(levels >= cap) < min_count:
        cap -= 1
    return np.minimum(levels, cap), cap


def score_histograms(scores: pd.DataFrame, metrics: Sequence[str], labels: Mapping[str, str] | None = None,
                     bins: int = 25, max_levels: int = 6, min_count: int = 20, title: str | None = None) -> Figure:
    """Distribution of each metric's scores at each error level (what sep_m's KS compares).

    Parameters
    ----------
    scores : DataFrame
        ``scores.csv`` rows: ``seg_id, node`` (or ``level``) and one column per metric. NaN
        scores (failed images) are left out and counted in the panel title.
    metrics : sequence of str
        Columns to draw, one panel each.
    bins : int
        Most bins over each metric's observed range (shared by all levels of the metric); small
        samples get fewer (``sqrt(n)``, at least 8).
    max_levels, min_count : int
        Levels above ``max_levels - 1`` are pooled as ``>= max_levels - 1``, and the top level
        is pooled further down while it holds fewer than ``min_count`` images, so a handful of
        deep-level images does not draw a spiky, unreadable histogram.

    Returns
    -------
    Figure
        One ridgeline panel per metric: a filled histogram per error level stacked from
        0 errors (top) down, each scaled to the same height, coloured on ``viridis``; a white
        tick marks the level mean. A metric that separates error levels shows the mass moving
        steadily left (lower scores) from row to row.
    """
    missing = [m for m in metrics if m not in scores.columns]
    if missing:
        raise ValueError(f"expected score columns {list(metrics)}, missing {missing} (got {list(scores.columns)})")
    if not len(metrics):
        raise ValueError("expected at least one metric to draw, got none")
    s = add_levels(scores)
    lev, cap = _pool_levels(s["level"].to_numpy(int), max_levels, min_count)
    pooled = bool(np.any(s["level"].to_numpy(int) > cap))
    present = sorted(set(lev.tolist()))
    labels = dict(labels or {})
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    colours = {lv: cmap(0.85 * i / max(len(present) - 1, 1)) for i, lv in enumerate(present)}
    n = len(metrics)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    row_h = 0.55 * len(present) + 1.3
    with _style():
        fig = _new_figure(4.8 * ncols, row_h * nrows)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax in axes[n:]:
            ax.set_visible(False)
        for ax, m in zip(axes, metrics):
            x = pd.to_numeric(s[m], errors="coerce").to_numpy(float)
            ok = np.isfinite(x)
            nan_note = f" ({int((~ok).sum())} NaN left out)" if (~ok).any() else ""
            ax.set_title(labels.get(m, m) + nan_note)
            ax.set_xlabel("score")
            ax.spines["left"].set_visible(False)
            if not ok.any():
                ax.text(0.5, 0.5, "no finite scores", transform=ax.transAxes, ha="center")
                ax.set_yticks([])
                continue
            lo, hi = x[ok].min(), x[ok].max()
            # Fewer bins for small samples (square-root rule), so a level's shape is not all gaps.
            nb = int(np.clip(round(math.sqrt(ok.sum())), 8, bins))
            if hi > lo:
                edges = np.linspace(lo, hi, nb + 1)
            else:  # a constant metric: one bar centred in a unit-wide axis (odd bin count)
                edges = np.linspace(lo - 0.5, lo + 0.5, (nb | 1) + 1)
                ax.set_title(ax.get_title() + " (constant)")
            ticks, names = [], []
            for r, lv in enumerate(present):
                base = len(present) - 1 - r  # 0 errors on top
                sel = ok & (lev == lv)
                name = f"\u2265{cap}" if lv == cap and pooled else f"{lv}"
                ticks.append(base + 0.4)
                names.append(f"{name} err (n={int(sel.sum())})")
                if not sel.any():
                    continue
                h, _ = np.histogram(x[sel], bins=edges)
                h = h / h.max() * 0.92
                ax.stairs(base + h, edges, baseline=base, fill=True, color=colours[lv], alpha=0.75)
                ax.stairs(base + h, edges, baseline=base, color="black", lw=0.6)
                mu = x[sel].mean()
                ax.plot([mu, mu], [base, base + 0.95], color="white", lw=2.4)
                ax.plot([mu, mu], [base, base + 0.95], color="black", lw=0.9, ls=(0, (2, 1.5)))
            ax.set_ylim(-0.05, len(present) + 0.02)
            ax.set_yticks(ticks, names)
            ax.tick_params(axis="y", length=0)
        fig.suptitle(title or "Score distributions by error count (one row per level, dashed: level mean)")
    return fig


# -- per-SEG heatmap (Figure 8 style) --------------------------------------------------------------

def seg_heatmap(scores: pd.DataFrame, seg_id: str, metrics: Sequence[str],
                lower_is_better: Sequence[str] = (), seg_values: Mapping[str, float] | None = None,
                labels: Mapping[str, str] | None = None, prompt: str | None = None,
                aggregate: str = "auto", max_cells: int = 36, title: str | None = None) -> Figure:
    """Scores of several metrics on one SEG, nodes ordered by error level (paper Figure 8).

    Parameters
    ----------
    scores : DataFrame
        ``scores.csv`` rows (``seg_id, node, file_name`` and the metric columns).
    seg_id : str
        The SEG to draw (compared as text).
    metrics : sequence of str
        One row of cells per metric.
    lower_is_better : sequence of str
        Metrics whose colour scale is flipped, so blue always means "better".
    seg_values : mapping, optional
        Per-metric value shown beside the row label (e.g. this SEG's rank_m).
    aggregate : {"auto", "image", "node"}
        One cell per image, or per node (the node mean); ``auto`` uses images unless the SEG has
        more than ``max_cells`` of them.

    Returns
    -------
    Figure
        Cells coloured by the score min-max scaled within this SEG per metric (``RdBu``: red the
        metric's worst score in the SEG, blue its best), raw scores written in the cells; a
        metric that is constant on the SEG is drawn mid-scale. Node labels on top, vertical
        lines between nodes.

    Raises
    ------
    ValueError
        The SEG has no rows, or an unknown ``aggregate``.
    """
    if aggregate not in {"auto", "image", "node"}:
        raise ValueError(f"expected aggregate in ['auto', 'image', 'node'], got {aggregate!r}")
    d = add_levels(scores[scores["seg_id"].astype(str) == str(seg_id)])
    if d.empty:
        raise ValueError(f"expected rows of SEG {seg_id!r} in the score table, got none")
    sort_cols = ["level", "node"] + (["file_name"] if "file_name" in d.columns else [])
    d = d.sort_values(sort_cols, kind="stable")
    if aggregate == "auto":
        aggregate = "image" if len(d) <= max_cells else "node"
    if aggregate == "node":
        d = d.groupby(["level", "node"], sort=True)[list(metrics)].mean(numeric_only=False).reset_index()
    mat = np.vstack([pd.to_numeric(d[m], errors="coerce").to_numpy(float) for m in metrics])
    norm = np.full_like(mat, np.nan)
    for r, m in enumerate(metrics):
        row = mat[r]
        fin = np.isfinite(row)
        if not fin.any():
            continue
        lo, hi = row[fin].min(), row[fin].max()
        scaled = np.full(row.shape, 0.5) if hi == lo else (row - lo) / (hi - lo)
        norm[r] = 1 - scaled if m in set(lower_is_better) else scaled
        norm[r][~fin] = np.nan
    labels = dict(labels or {})
    seg_values = dict(seg_values or {})
    nodes = d["node"].astype(str).to_list()
    ncell = len(nodes)
    import matplotlib

    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.85")  # grey: no score (failed image)
    width = min(max(4.0 + 0.42 * ncell, 6.5), 18.0)
    with _style():
        fig = _new_figure(width, 1.5 + 0.55 * len(metrics) + 0.9)
        ax = fig.add_subplot()
        im = ax.imshow(np.ma.masked_invalid(norm), cmap=cmap, vmin=0, vmax=1, aspect="auto",
                       interpolation="nearest")
        ylab = []
        for m in metrics:
            v = seg_values.get(m)
            ylab.append(labels.get(m, m) + ("" if v is None or not np.isfinite(v) else f"\n(rank$_m$ {100 * v:.0f}%)"))
        ax.set_yticks(range(len(metrics)), ylab)
        # Node groups: label once per node, separators between nodes.
        starts = [i for i in range(ncell) if i == 0 or nodes[i] != nodes[i - 1]]
        ends = starts[1:] + [ncell]
        ax.set_xticks([(a + b - 1) / 2 for a, b in zip(starts, ends)], [nodes[a] for a in starts])
        ax.xaxis.tick_top()
        ax.tick_params(axis="x", length=0)
        for b in ends[:-1]:
            ax.axvline(b - 0.5, color="black", lw=1.6)
        ax.set_xlabel("node (error count, variant)" + ("; one cell per image" if aggregate == "image"
                                                       else "; cells are node means"))
        if ncell <= 40:
            fs = 8 if ncell <= 24 else 6.5
            for r in range(mat.shape[0]):
                for c in range(ncell):
                    if np.isfinite(mat[r, c]):
                        dark = np.isfinite(norm[r, c]) and abs(norm[r, c] - 0.5) > 0.33
                        ax.text(c, r, f"{mat[r, c]:.2g}", ha="center", va="center", fontsize=fs,
                                color="white" if dark else "black")
        for sp in ax.spines.values():
            sp.set_visible(False)
        cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.01)
        cb.set_ticks([0, 1], labels=["worst\nin SEG", "best\nin SEG"])
        head = title or f"SEG {seg_id}"
        if prompt:
            head += f": \u201c{prompt}\u201d"
        # ~9 characters of 11 pt text per inch of figure width
        fig.suptitle("\n".join(textwrap.wrap(head, width=max(int(width * 9), 40))), fontsize=11)
    return fig


# -- scatter of two metrics' per-SEG values --------------------------------------------------------

def rank_scatter(per_seg: pd.DataFrame, metric_x: str, metric_y: str, meta_metric: str = "rank",
                 protocol: str | None = None, labels: Mapping[str, str] | None = None,
                 title: str | None = None) -> Figure:
    """Per-SEG ``meta_metric`` of two metrics against each other, coloured by subset.

    Parameters
    ----------
    per_seg : DataFrame
        ``per_seg.csv`` rows: ``metric, protocol, meta_metric, seg_id, subset, value``.
    protocol : str, optional
        Keep one protocol when the table holds several (default: the first one present).

    Returns
    -------
    Figure
        One point per SEG where both metrics have a value, the diagonal, and the Spearman
        correlation of the two metrics' per-SEG values with its SEG count. Points above the
        diagonal are SEGs ``metric_y`` orders better.

    Raises
    ------
    ValueError
        A metric has no rows for ``meta_metric``.
    """
    from scipy.stats import spearmanr

    d = per_seg[per_seg["meta_metric"] == meta_metric]
    if protocol is None and "protocol" in d.columns and len(d):
        protocol = d["protocol"].iloc[0]
    if protocol is not None and "protocol" in d.columns:
        d = d[d["protocol"] == protocol]
    for m in (metric_x, metric_y):
        if not (d["metric"] == m).any():
            raise ValueError(f"expected per-SEG {meta_metric} values of metric {m!r}, got metrics "
                             f"{sorted(d['metric'].unique())}")
    wide = d.pivot_table(index=["seg_id", "subset"], columns="metric", values="value", aggfunc="first").reset_index()
    wide = wide.dropna(subset=[metric_x, metric_y])
    labels = dict(labels or {})
    subsets = list(dict.fromkeys(wide["subset"]))
    with _style():
        fig = _new_figure(6.8, 5.2)
        ax = fig.add_subplot()
        for i, sub in enumerate(subsets):
            w = wide[wide["subset"] == sub]
            ax.scatter(w[metric_x] * 100, w[metric_y] * 100, s=26, alpha=0.75, color=OKABE_ITO[i % 8],
                       marker=MARKERS[i % len(MARKERS)], edgecolors="white", linewidths=0.4,
                       label=f"{sub} ({len(w)})")
        lims = [min(wide[metric_x].min(), wide[metric_y].min(), 0) * 100 - 5, 105] if len(wide) else [-105, 105]
        ax.plot(lims, lims, color="0.5", lw=1, ls="--", zorder=0)
        ax.set_xlim(lims)
        ax.set_ylim(lims)
        ax.set_aspect("equal")
        name = META_LABELS.get(meta_metric, meta_metric).split(" (")[0]
        ax.set_xlabel(f"{labels.get(metric_x, metric_x)}: per-SEG {name}, %")
        ax.set_ylabel(f"{labels.get(metric_y, metric_y)}: per-SEG {name}, %")
        if len(wide) >= 3 and wide[metric_x].nunique() > 1 and wide[metric_y].nunique() > 1:
            rho = spearmanr(wide[metric_x], wide[metric_y]).statistic
            txt = f"Spearman $\\rho$ = {rho:.2f} over {len(wide)} SEGs"
        else:  # too few SEGs, or one metric constant over them: no correlation to report
            txt = f"{len(wide)} SEGs"
        txt += f"\nabove the diagonal: {labels.get(metric_y, metric_y)} better"
        ax.text(0.02, 0.98, txt, transform=ax.transAxes, va="top", fontsize=9)
        fig.legend(title="subset (SEGs)", loc="outside right upper", frameon=False)  # never over points
        ax.grid(True, color="0.92")
        fig.suptitle(title or f"Per-SEG {name}" + (f" ({protocol} protocol)" if protocol else ""))
    return fig
