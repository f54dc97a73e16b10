"""pair_acc: tie-aware pairwise ordering accuracy along a walk (not in the paper).

Share of cross-level image pairs on the walk that the metric orders correctly (the image with
fewer errors scores higher), a tie counting half. Unlike Spearman it does not reward a metric
for tying images of one level (section 6.4), and it reads as a probability: 0.5 is chance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .nodestats import NodeStats
from .walkstats import WalkStats, as_batch

__all__ = ["pair_acc_walks", "pair_acc_nodes", "walk_pair_acc", "pair_acc_null_means"]


def pair_acc_walks(stats: WalkStats) -> np.ndarray:
    """pair_acc of every walk: ``(#right + 0.5 #tied) / #cross-level pairs``.

    Equals the sum over level pairs ``a < b`` of the Mann-Whitney U statistic of (level a
    scores > level b scores) over ``sum n_a n_b``. NaN scores are dropped; a walk with fewer
    than two levels has no cross-level pair and gives NaN (skipped in every protocol).
    """
    G = stats.greater_pairs
    T = stats.tied_pairs
    up = stats.upper
    c = stats.count
    num = np.where(up, G + 0.5 * T, 0.0).sum(axis=(1, 2))
    den = np.where(up, c[:, :, None] * c[:, None, :], 0.0).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[den == 0] = np.nan
    return out


def pair_acc_nodes(stats: NodeStats) -> np.ndarray:
    """:func:`pair_acc_walks` from node-pair statistics (:mod:`.nodestats`), ``(S, B, W)``."""
    c = stats.level_count
    den = (stats.n ** 2 - (c * c).sum(axis=-1)) / 2  # cross-level pairs
    with np.errstate(invalid="ignore", divide="ignore"):
        out = stats.right_pairs / den
    out[den == 0] = np.nan
    return out


def walk_pair_acc(levels, scores) -> float:
    """pair_acc of one walk.

    Examples
    --------
    >>> walk_pair_acc([0, 1, 1], [0.5, 0.5, 0.1])  # one tie (half) and one right pair
    0.75
    """
    lv, sc = as_batch(levels, scores)
    return float(pair_acc_walks(WalkStats(lv, sc))[0])


def pair_acc_null_means(batches: Sequence[NodeStats]) -> list[np.ndarray]:
    """Exact expected pair_acc of each walk under the within-SEG permutation null: 0.5 everywhere.

    A cross-level pair is two different images, exchangeable under the permutation, so
    ``P(right) + P(tie) / 2 = 1/2`` for every pair, ties, repeats and missing cells included.
    Arguments and shapes as :func:`analysis.metametrics.rank.rank_null_means`.
    """
    return [np.full(st.shape, 0.5) for st in batches]
