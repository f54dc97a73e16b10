"""delta_m: mean gap between the mean scores of adjacent levels along a walk (paper eq. 5).

The dataset-level normalisation (division by the metric's score std) happens in
:mod:`analysis.aggregate`; this module gives the raw per-walk gap.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .nodestats import NodeStats
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["delta_walks", "delta_nodes", "delta_linear", "walk_delta", "delta_null_means"]


def delta_walks(stats: WalkStats, degenerate: str = "zero") -> np.ndarray:
    """Raw delta of every walk: mean over adjacent present levels of ``mean(k) - mean(k+1)``.

    Level means pool all valid samples of a level on the walk (a duplicated root counts twice).
    NaN policy: NaN scores dropped first. No valid sample: NaN. One level only: 0
    (``degenerate="zero"``, the paper's code) or NaN.
    """
    fill = degenerate_fill(degenerate)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = stats.total / stats.count
        gaps = means[:, :-1] - means[:, 1:]
        ok = np.arange(1, stats.n_slot_cols)[None, :] < stats.n_slots[:, None]
        out = np.where(ok, gaps, 0.0).sum(axis=1) / ok.sum(axis=1)
    out[stats.n_slots <= 1] = fill
    out[stats.n < 1] = np.nan
    return out


def delta_nodes(stats: NodeStats, degenerate: str = "zero") -> np.ndarray:
    """:func:`delta_walks` from node sums (:mod:`.nodestats`), ``(S, B, W)``: the adjacent gaps
    telescope to (lowest present level's mean - highest's) / (present levels - 1)."""
    fill = degenerate_fill(degenerate)
    ns = stats.n_slots
    with np.errstate(invalid="ignore", divide="ignore"):
        out = stats.level_mean_span() / (ns - 1)
    out[ns <= 1] = fill
    out[stats.n < 1] = np.nan
    return out


def delta_linear(stats: NodeStats, degenerate: str = "zero") -> np.ndarray:
    """:func:`delta_nodes` as a linear form of the nodes' score sums: ``(S, B, W, P)`` weights, so
    that a walk's raw delta is ``sum_P w[P] * sum of node P's valid scores`` (0 weights on a
    one-level walk with ``degenerate="zero"``; NaN on a walk whose delta is NaN)."""
    ns = stats.n_slots
    with np.errstate(invalid="ignore", divide="ignore"):
        w = stats.level_mean_span_weights() / (ns - 1)[..., None]
    w[ns <= 1] = degenerate_fill(degenerate)
    w[stats.n < 1] = np.nan
    return w


def walk_delta(levels, scores, degenerate: str = "zero") -> float:
    """Raw delta of one walk.

    Examples
    --------
    >>> walk_delta([0, 1, 1, 2], [1.0, 0.6, 0.4, 0.0])  # gaps 0.5 and 0.5
    0.5
    """
    lv, sc = as_batch(levels, scores)
    return float(delta_walks(WalkStats(lv, sc), degenerate)[0])


def delta_null_means(batches: Sequence[NodeStats], degenerate: str = "zero") -> list[np.ndarray]:
    """Exact expected raw delta of each walk under the within-SEG permutation null: 0 everywhere.

    delta is linear in the scores and every walk position's expected score is its SEG's mean
    valid score, so every level mean has the same expectation. (A lower-is-better delta read as
    a magnitude is ``|delta|`` at the dataset level; :mod:`analysis.chance` handles that.)
    Arguments and shapes as :func:`analysis.metametrics.rank.rank_null_means`.
    """
    return [np.zeros(st.shape) for st in batches]
