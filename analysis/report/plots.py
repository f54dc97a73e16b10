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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = [
    "MARKERS",
    "OKABE_ITO",
    "add_levels",
    "metric_colors",
    "rank_scatter",
    "save_figure",
    "score_histograms",
    "seg_heatmap",
    "si_flops",
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
    for i, (seg, node) in enumerate(zip(scores["seg_id"], scores["node"], strict=True)):
        try:
            levels.append(parse_label(str(node))[0])
        except LabelError as e:
            raise ValueError(f"scores row {i + 2} (SEG {seg}): {e}") from e
    return scores.assign(level=levels)


def si_flops(v: float) -> str:
    """``6.04e8`` -> ``"604M"``, ``1e13`` -> ``"10T"`` (3 significant digits, SI prefix)."""
    if not np.isfinite(v) or v <= 0:
        return ""
    exp = min(max(int(math.floor(math.log10(v) / 3)), 0), 6)
    return f"{v / 10 ** (3 * exp):.3g}{['', 'k', 'M', 'G', 'T', 'P', 'E'][exp]}"


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
    rows = _LevelRows.of(s["level"].to_numpy(int), max_levels, min_count)
    labels = dict(labels or {})
    n = len(metrics)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    row_h = 0.55 * len(rows.present) + 1.3
    with _style():
        fig = _new_figure(max(4.8 * ncols, 6.5), row_h * nrows + 0.4)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax in axes[n:]:
            ax.set_visible(False)
        # The grid can hold more axes than metrics (the spare ones are hidden above).
        for ax, m in zip(axes, metrics, strict=False):
            rows.draw(ax, pd.to_numeric(s[m], errors="coerce").to_numpy(float), labels.get(m, m), bins)
        head = title or "Score distributions by error count (one row per level; dotted line: the level's mean)"
        fig.suptitle("\n".join(textwrap.wrap(head, width=max(int(fig.get_figwidth() * 10), 30))))
    return fig


@dataclass(frozen=True)
class _LevelRows:
    """The rows of a ridgeline panel: each image's error level (sparse top levels pooled, see
    :func:`_pool_levels`), the levels present (0 errors on top), the pooling cap and whether any
    level was pooled into it, and each level's colour on ``viridis``."""

    levels: np.ndarray
    present: list[int]
    cap: int
    pooled: bool
    colours: dict

    @classmethod
    def of(cls, levels: np.ndarray, max_levels: int, min_count: int) -> _LevelRows:
        import matplotlib

        lev, cap = _pool_levels(levels, max_levels, min_count)
        present = sorted(set(lev.tolist()))
        cmap = matplotlib.colormaps["viridis"]
        colours = {lv: cmap(0.85 * i / max(len(present) - 1, 1)) for i, lv in enumerate(present)}
        return cls(lev, present, cap, bool(np.any(levels > cap)), colours)

    def name(self, lv: int) -> str:
        """A level's row name: ``2``, or ``>=5`` for the level others were pooled into."""
        return f"\u2265{self.cap}" if lv == self.cap and self.pooled else f"{lv}"

    def draw(self, ax, x: np.ndarray, title: str, bins: int) -> None:
        """One metric's panel: a histogram of its finite scores ``x`` per level, scaled to the same
        height, with the level mean marked (NaN scores left out and counted in the ``title``)."""
        ok = np.isfinite(x)
        nan_note = f" ({int((~ok).sum())} NaN left out)" if (~ok).any() else ""
        ax.set_title(title + nan_note)
        ax.set_xlabel("score")
        ax.spines["left"].set_visible(False)
        if not ok.any():
            ax.text(0.5, 0.5, "no finite scores", transform=ax.transAxes, ha="center")
            ax.set_yticks([])
            return
        edges = _histogram_edges(x[ok], bins)
        if x[ok].max() == x[ok].min():
            ax.set_title(ax.get_title() + " (constant)")
        ticks, names = [], []
        for r, lv in enumerate(self.present):
            base = len(self.present) - 1 - r  # 0 errors on top
            sel = ok & (self.levels == lv)
            ticks.append(base + 0.4)
            names.append(f"{self.name(lv)} err (n={int(sel.sum())})")
            if sel.any():
                self._draw_level(ax, x[sel], edges, base, self.colours[lv])
        ax.set_ylim(-0.05, len(self.present) + 0.02)
        ax.set_yticks(ticks, names)
        ax.tick_params(axis="y", length=0)

    @staticmethod
    def _draw_level(ax, x: np.ndarray, edges: np.ndarray, base: float, colour) -> None:
        """One level's filled histogram on the row at height ``base``, its mean a dotted tick."""
        h, _ = np.histogram(x, bins=edges)
        h = h / h.max() * 0.92
        ax.stairs(base + h, edges, baseline=base, fill=True, color=colour, alpha=0.75)
        ax.stairs(base + h, edges, baseline=base, color="black", lw=0.6)
        mu = x.mean()
        ax.plot([mu, mu], [base, base + 0.95], color="white", lw=2.4)
        ax.plot([mu, mu], [base, base + 0.95], color="black", lw=1.0, ls=":")


def _histogram_edges(x: np.ndarray, bins: int) -> np.ndarray:
    """Bin edges over the range of the finite scores ``x``: at most ``bins`` bins, fewer for small
    samples (square-root rule, at least 8) so a level's shape is not all gaps; a constant metric
    gets one bar centred in a unit-wide axis (odd bin count)."""
    lo, hi = x.min(), x.max()
    nb = int(np.clip(round(math.sqrt(len(x))), 8, bins))
    if hi > lo:
        return np.linspace(lo, hi, nb + 1)
    return np.linspace(lo - 0.5, lo + 0.5, (nb | 1) + 1)


# -- per-SEG heatmap (Figure 8 style) --------------------------------------------------------------

def seg_heatmap(scores: pd.DataFrame, seg_id: str, metrics: Sequence[str],
                lower_is_better: Sequence[str] = (), seg_values: Mapping[str, float] | None = None,
                labels: Mapping[str, str] | None = None, prompt: str | None = None,
                aggregate: str = "auto", max_cells: int = 36, title: str | None = None,
                max_per_row: int = 20) -> Figure:
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
    max_per_row : int
        Cells per row of panels: a wider SEG wraps over rows, whole nodes per row.

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
    d, aggregate = _heatmap_rows(scores, seg_id, metrics, aggregate, max_cells)
    mat = np.vstack([pd.to_numeric(d[m], errors="coerce").to_numpy(float) for m in metrics])
    grid = _HeatmapGrid(mat, _scale_within_seg(mat, metrics, lower_is_better), d["node"].astype(str).to_list(),
                        max_per_row)
    ylab = _heatmap_row_labels(metrics, dict(labels or {}), dict(seg_values or {}))
    import matplotlib

    cmap = matplotlib.colormaps["RdBu"].with_extremes(bad="0.85")  # grey: no score (failed image)
    width = min(max(4.0 + 0.5 * grid.widest, 6.5), 14.0)
    panel_h = 0.55 * len(metrics) + 0.7
    with _style():
        fig = _new_figure(width, 1.3 + panel_h * len(grid.chunks))
        axes = np.atleast_1d(fig.subplots(len(grid.chunks), 1, squeeze=False)).ravel()
        for ax, (a, b) in zip(axes, grid.chunks, strict=True):
            im = grid.draw_panel(ax, a, b, cmap, ylab)
        axes[-1].set_xlabel("node (error count, variant)" + ("; one cell per image" if aggregate == "image"
                                                             else "; cells are node means")
                            + ("; continued over rows" if len(grid.chunks) > 1 else ""))
        cb = fig.colorbar(im, ax=list(axes), fraction=0.04, pad=0.01)
        cb.set_ticks([0, 1], labels=["worst\nin SEG", "best\nin SEG"])
        head = title or f"SEG {seg_id}"
        if prompt:
            head += f": \u201c{prompt}\u201d"
        # ~9 characters of 11 pt text per inch of figure width
        fig.suptitle("\n".join(textwrap.wrap(head, width=max(int(width * 9), 40))), fontsize=11)
    return fig


def _heatmap_row_labels(metrics: Sequence[str], labels: Mapping[str, str], seg_values: Mapping[str, float]) -> list[str]:
    """The heatmap's row labels: each metric's label, with its value on this SEG (rank_m) when finite."""
    out = []
    for m in metrics:
        v = seg_values.get(m)
        out.append(labels.get(m, m) + ("" if v is None or not np.isfinite(v) else f"\n(rank$_m$ {100 * v:.0f}%)"))
    return out


@dataclass(frozen=True)
class _HeatmapGrid:
    """The cells of one SEG's heatmap: raw scores ``mat`` and colour values ``norm`` (metrics x
    cells), the node of each cell, and their layout in rows of panels (:func:`_node_chunks`)."""

    mat: np.ndarray
    norm: np.ndarray
    nodes: list[str]
    max_per_row: int

    @cached_property
    def _layout(self) -> tuple[list[int], list[int], list[tuple[int, int]]]:
        return _node_chunks(self.nodes, self.max_per_row)

    @property
    def chunks(self) -> list[tuple[int, int]]:
        """The cell range of each row of panels."""
        return self._layout[2]

    @property
    def widest(self) -> int:
        """Cells in the widest row of panels (every row is drawn at that width)."""
        return max(b - a for a, b in self.chunks)

    def draw_panel(self, ax, a: int, b: int, cmap, ylab: Sequence[str]):
        """The cells ``a:b`` on ``ax``: coloured, written, nodes labelled once on top and separated by
        lines; returns the image (for the colour bar)."""
        starts, ends, _ = self._layout
        widest = self.widest
        n = self.mat.shape[0]
        im = ax.imshow(np.ma.masked_invalid(self.norm[:, a:b]), cmap=cmap, vmin=0, vmax=1, aspect="auto",
                       interpolation="nearest", extent=(a - 0.5, b - 0.5, n - 0.5, -0.5))
        ax.set_xlim(a - 0.5, a - 0.5 + widest)  # equal cell widths in every row
        ax.set_yticks(range(n), ylab)
        # Node groups: label once per node, separators between nodes.
        sub = [(s0, e0) for s0, e0 in zip(starts, ends, strict=True) if a <= s0 < b]
        ax.set_xticks([(s0 + e0 - 1) / 2 for s0, e0 in sub], [self.nodes[s0] for s0, _ in sub])
        ax.xaxis.tick_top()
        ax.tick_params(axis="x", length=0)
        for _, e0 in sub[:-1]:
            ax.axvline(e0 - 0.5, color="black", lw=1.6)
        _write_cell_values(ax, self.mat, self.norm, a, b, fontsize=8 if widest <= 24 else 6.5)
        for sp in ax.spines.values():
            sp.set_visible(False)
        return im


def _heatmap_rows(scores: pd.DataFrame, seg_id: str, metrics: Sequence[str], aggregate: str,
                  max_cells: int) -> tuple[pd.DataFrame, str]:
    """The SEG's rows for :func:`seg_heatmap` in level/node(/file) order, node means when aggregating
    by node; returns them and the resolved ``aggregate`` (``auto`` decided by ``max_cells``)."""
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
    return d, aggregate


def _scale_within_seg(mat: np.ndarray, metrics: Sequence[str], lower_is_better: Sequence[str]) -> np.ndarray:
    """Each metric's row min-max scaled to [0, 1] within the SEG (1 = best, flipped for lower-is-better
    metrics; 0.5 for a constant row; NaN where there is no score), the heatmap's colour values."""
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
    return norm


def _node_chunks(nodes: list[str], max_per_row: int) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """Cell ranges of the heatmap's nodes (``starts``, ``ends``) and of its rows of panels (``chunks``).

    Wide SEGs wrap over several rows of panels (whole nodes per row) so that the figure stays
    readable at page width instead of becoming a 2000-px strip.
    """
    ncell = len(nodes)
    starts = [i for i in range(ncell) if i == 0 or nodes[i] != nodes[i - 1]]
    ends = starts[1:] + [ncell]
    # Rows of about equal width (22 cells at 20 per row: about 11 + 11, not 20 + 2): a row takes
    # whole nodes until it holds at least its share.
    per_row = math.ceil(ncell / math.ceil(ncell / max_per_row))
    chunks: list[tuple[int, int]] = []
    for a, b in zip(starts, ends, strict=True):
        if chunks and chunks[-1][1] - chunks[-1][0] < per_row:
            chunks[-1] = (chunks[-1][0], b)
        else:
            chunks.append((a, b))
    return starts, ends, chunks


def _write_cell_values(ax, mat: np.ndarray, norm: np.ndarray, a: int, b: int, fontsize: float) -> None:
    """The raw scores written in the heatmap cells of columns ``a:b`` (white on dark cells)."""
    for r in range(mat.shape[0]):
        for c in range(a, b):
            if np.isfinite(mat[r, c]):
                dark = np.isfinite(norm[r, c]) and abs(norm[r, c] - 0.5) > 0.33
                ax.text(c, r, f"{mat[r, c]:.2g}", ha="center", va="center", fontsize=fontsize,
                        color="white" if dark else "black")


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
        # Each axis keeps its own metric's range: equal axes squash a metric with a narrow spread
        # into a strip. The diagonal is drawn where the ranges overlap.
        xl, yl = _percent_axis_range(wide[metric_x]), _percent_axis_range(wide[metric_y])
        ax.set_xlim(xl)
        ax.set_ylim(yl)
        d0, d1 = max(xl[0], yl[0]), min(xl[1], yl[1])
        if d1 > d0:
            ax.plot([d0, d1], [d0, d1], color="0.5", lw=1, ls="--", zorder=0, label="_diagonal")
        name = META_LABELS.get(meta_metric, meta_metric).split(" (")[0]
        ax.set_xlabel(f"{labels.get(metric_x, metric_x)}: per-SEG {name}, %")
        ax.set_ylabel(f"{labels.get(metric_y, metric_y)}: per-SEG {name}, %")
        txt = (_correlation_note(wide[metric_x], wide[metric_y])
               + f"\nabove the dashed diagonal: {labels.get(metric_y, metric_y)} better")
        ax.text(0.02, 0.98, txt, transform=ax.transAxes, va="top", fontsize=9)
        fig.legend(title="subset (SEGs)", loc="outside right upper", frameon=False)  # never over points
        ax.grid(True, color="0.92")
        fig.suptitle(title or f"Per-SEG {name}" + (f" ({protocol} protocol)" if protocol else ""))
    return fig


def _percent_axis_range(v: pd.Series) -> list[float]:
    """An axis range for values ``v`` shown in percent: their range padded by 6% (at least 2
    points wide); -100..100 (padded) without values."""
    lo, hi = (float(v.min()) * 100, float(v.max()) * 100) if len(v) else (-100.0, 100.0)
    pad = max(hi - lo, 2.0) * 0.06
    return [lo - pad, hi + pad]


def _correlation_note(x: pd.Series, y: pd.Series) -> str:
    """``Spearman rho = 0.42 over 61 SEGs``; only the SEG count when there are fewer than 3 SEGs or
    one metric is constant over them (no correlation to report)."""
    from scipy.stats import spearmanr

    if len(x) >= 3 and x.nunique() > 1 and y.nunique() > 1:
        return f"Spearman $\\rho$ = {spearmanr(x, y).statistic:.2f} over {len(x)} SEGs"
    return f"{len(x)} SEGs"
