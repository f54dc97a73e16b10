"""kendall: Kendall's tau-b between error level and score along a walk (not in the paper).

Sign as rank_m: a perfectly ordered higher-is-better metric scores +1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .nodestats import NodeStats, tau_b_denominator
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["kendall_walks", "kendall_nodes", "walk_kendall", "kendall_null_means", "kendall_null_estimate"]


def kendall_walks(stats: WalkStats, degenerate: str = "zero") -> np.ndarray:
    """Negated tau-b of (level, score) for every walk.

    ``tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2))`` with ``n0 = n(n-1)/2``, ``n1`` the pairs tied
    in level, ``n2`` the pairs tied in score (:func:`scipy.stats.kendalltau`, variant ``b``).
    Computed from per-level "strictly greater" pair counts, no O(n^2) pair loop.

    Tie, NaN and constant policy: as :func:`analysis.metametrics.rank.rank_walks` (constant
    scores give 0 where scipy gives NaN).
    """
    fill = degenerate_fill(degenerate)
    G = stats.greater_pairs
    up = stats.upper
    good = np.where(up, G, 0.0).sum(axis=(1, 2))  # lower level scored higher: right order
    bad = np.where(up, G.transpose(0, 2, 1), 0.0).sum(axis=(1, 2))
    n = stats.n.astype(float)
    n0 = n * (n - 1) / 2
    n1 = (stats.count * (stats.count - 1) / 2).sum(axis=1)
    n2 = np.where(stats.sorted_valid, stats.group_end - stats.group_start, 0).sum(axis=1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.clip((good - bad) / np.sqrt((n0 - n1) * (n0 - n2)), -1.0, 1.0)
    out[stats.n_score_values <= 1] = 0.0
    out[stats.n_slots <= 1] = fill
    out[stats.n < 2] = np.nan
    return out


def kendall_nodes(stats: NodeStats, degenerate: str = "zero") -> np.ndarray:
    """:func:`kendall_walks` from node-pair statistics (:mod:`.nodestats`), ``(S, B, W)``."""
    fill = degenerate_fill(degenerate)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.clip(stats.concordance / tau_b_denominator(stats.n, stats.level_tied_pairs, stats.tied_pairs),
                      -1.0, 1.0)
    out[stats.constant] = 0.0
    out[stats.n_slots <= 1] = fill
    out[stats.n < 2] = np.nan
    return out


def walk_kendall(levels, scores, degenerate: str = "zero") -> float:
    """Negated Kendall tau-b of one walk.

    Examples
    --------
    >>> walk_kendall([0, 1, 2], [0.9, 0.5, 0.1])
    1.0
    >>> walk_kendall([0, 1, 2], [0.5, 0.9, 0.1])
    0.3333333333333333
    """
    lv, sc = as_batch(levels, scores)
    return float(kendall_walks(WalkStats(lv, sc), degenerate)[0])


def kendall_null_means(batches: Sequence[NodeStats], degenerate: str = "zero") -> list[np.ndarray]:
    """Exact expected kendall of each walk under the within-SEG permutation null, NaN where unknown.

    0 where the walk visits no image twice (given the values it receives, their order along the
    walk is uniform: ``E[C - D] = 0`` and ``n2`` is fixed) or its SEG's valid scores have no tie
    (a duplicated root's twin pair is then the only tie, a fixed ``n2``); NaN otherwise (the
    chance levels estimate it, through :func:`kendall_null_estimate`).
    Arguments and shapes as :func:`analysis.metametrics.rank.rank_null_means`.
    """
    return [np.where(~st.repeats[:, None, :] | ~st.seg_tied[:, :, None], 0.0, np.nan) for st in batches]


def kendall_null_estimate(stats: NodeStats, degenerate: str = "zero") -> np.ndarray:
    """A lower-variance stand-in for each permuted walk value with the same null expectation,
    ``(S, B, W)``, for walks that visit one node ``m > 1`` times; NaN elsewhere.

    As :func:`analysis.metametrics.rank.rank_null_estimate`: given which values the repeated
    node's ``r`` images and the walk's ``o`` other images get (``C``), only pairs across the two
    have an expected sign, ``E[C - D | C] = m s Q / o`` (``s`` the other positions above the
    node's level minus those below, ``Q`` the pairs across where the node's image scores higher
    minus lower; ``E[Q] = 0``). The stand-in is that conditional value minus the same with ``n2``
    at its null expectation, on the walk minus on its twin-free walk: exactly unbiased, and far
    less variable than the walk value.
    """
    out = np.full(stats.shape, np.nan)
    rep = stats.stand_in_walks
    if not rep.any():
        return out
    f = stats.repeat_frames
    est = 0.0
    for frame, mu, sign in ((f["twin"], f["m"], 1.0), (f["free"], 1.0, -1.0)):
        n = frame["n"]
        n0 = n * (n - 1) / 2
        with np.errstate(invalid="ignore", divide="ignore"):
            e = mu * f["s"] * f["q"] / f["o"]  # E[C - D | C]
            inv = (np.where(n0 > (frame["ties2"] - n) / 2,  # n2 < n0: not every pair tied
                            1 / tau_b_denominator(n, frame["level_ties"], frame["ties2"]), 0.0)
                   - np.where(n0 > (frame["e_ties2"] - n) / 2,
                              1 / tau_b_denominator(n, frame["level_ties"], frame["e_ties2"]), 0.0))
            est = est + sign * np.where(e == 0, 0.0, e * inv)
    return np.where(rep, est, np.nan)
