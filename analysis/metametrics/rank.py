"""rank_m: Spearman correlation between error level and score along a walk (paper eq. 1-2).

Sign: the correlation of (level, score) is negated, so a higher-is-better metric that orders
a walk perfectly scores +1 (lower-is-better metrics are negated before they get here).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .nodestats import NodeFormUnavailable, NodeStats, score_rank_ss
from .walkstats import WalkStats, as_batch, degenerate_fill

__all__ = ["rank_walks", "rank_nodes", "walk_rank", "rank_null_means", "rank_null_estimate"]


def rank_walks(stats: WalkStats, tie_method: str = "average", degenerate: str = "zero") -> np.ndarray:
    """rank_m of every walk of a batch.

    ``-pearson(R(levels), R(scores))`` over the walk's valid samples, with ``R`` the ranks of
    ``tie_method`` (``average`` is :func:`scipy.stats.spearmanr`; ``min`` is eq. 1).

    Tie, NaN and constant policy
        NaN scores are dropped first. Fewer than 2 valid samples: NaN (walk skipped). All
        valid samples on one level: 0 if ``degenerate == "zero"`` (``spearmanr`` gives NaN,
        which the paper maps to 0), else NaN. Constant scores: 0 (eq. 2's convention).

    Returns
    -------
    ndarray, shape (n_walks,)
    """
    fill = degenerate_fill(degenerate)
    v = stats.sorted_valid
    n = stats.n.astype(float)
    rx = stats.level_ranks(tie_method)
    ry = stats.score_ranks(tie_method)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = np.where(v, rx, 0.0).sum(axis=1) / n
        my = np.where(v, ry, 0.0).sum(axis=1) / n
        dx = np.where(v, rx - mx[:, None], 0.0)
        dy = np.where(v, ry - my[:, None], 0.0)
        rho = (dx * dy).sum(axis=1) / np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    out = -np.clip(rho, -1.0, 1.0)
    out[stats.n_score_values <= 1] = 0.0
    out[stats.n_slots <= 1] = fill
    out[stats.n < 2] = np.nan
    return out


def rank_nodes(stats: NodeStats, tie_method: str = "average", degenerate: str = "zero") -> np.ndarray:
    """:func:`rank_walks` from node-pair statistics (:mod:`.nodestats`), ``(S, B, W)``.

    Only ``average`` ranks have a node-pair form (the squared ranks of tied scores then depend on
    the tie sizes alone, ``sum t^3``); other tie methods raise :class:`NodeFormUnavailable`.
    """
    if tie_method != "average":
        raise NodeFormUnavailable(f"rank_m with tie_method={tie_method!r} (node-pair form: 'average')")
    fill = degenerate_fill(degenerate)
    num, sxx, syy = stats.spearman_average()
    with np.errstate(invalid="ignore", divide="ignore"):
        out = -np.clip(num / np.sqrt(sxx * syy), -1.0, 1.0)
    out[stats.constant] = 0.0
    out[stats.n_slots <= 1] = fill
    out[stats.n < 2] = np.nan
    return out


def walk_rank(levels, scores, tie_method: str = "average", degenerate: str = "zero") -> float:
    """rank_m of one walk: ``-spearman(levels, scores)``.

    Parameters
    ----------
    levels, scores : 1-D array-like of equal length
        Error count and score of each image on the walk (NaN score = missing, dropped).
    tie_method : {"average", "min", "max", "dense"}
    degenerate : {"zero", "skip"}
        Value when all valid samples share one level: 0 or NaN.

    Examples
    --------
    >>> walk_rank([0, 1, 2], [0.9, 0.5, 0.1])
    1.0
    >>> round(walk_rank([0, 0, 1, 2], [0.9, 0.8, 0.5, 0.1]), 4)  # right order, yet the tied level costs
    0.9487
    >>> round(walk_rank([0, 1, 1, 2], [1.0, 0.51, 0.49, 0.0]), 4)  # section 6.4's tie example
    0.9487
    """
    lv, sc = as_batch(levels, scores)
    return float(rank_walks(WalkStats(lv, sc), tie_method, degenerate)[0])


def rank_null_means(batches: Sequence[NodeStats], tie_method: str = "average", degenerate: str = "zero"
                    ) -> list[np.ndarray]:
    """Exact expected rank_m of each walk under the within-SEG permutation null, NaN where unknown.

    0 wherever the walk's score-rank spread cannot move: given the values a walk receives,
    their order along it is uniform, so the numerator has expectation 0 and the denominator is
    fixed. That holds for a walk visiting no image twice (any ``tie_method``), and for a walk
    with a duplicated root when the SEG's valid scores have no tie and ties are ranked
    ``average`` (the twin pair then always ties, adding a fixed correction, and each ordered
    pair of positions still compares as "greater" with probability 1/2). Otherwise (ties and
    a repeat, or ``min``/``max``/``dense`` ranks of a repeat) there is no closed form: NaN (the
    chance levels estimate it, through :func:`rank_null_estimate` where ranks are ``average``).

    Parameters
    ----------
    batches : sequence of NodeStats
        Of the unpermuted scores (:attr:`~.nodestats.NodeStats.repeats`,
        :attr:`~.nodestats.NodeStats.seg_tied`).
    tie_method, degenerate : as :func:`rank_walks` (a one-level walk's fill is its value under
        every permutation, already exact).

    Returns
    -------
    list of ndarray, shape (S, B, W) each
    """
    return [np.where(~st.repeats[:, None, :] | (~st.seg_tied[:, :, None] & (tie_method == "average")), 0.0, np.nan)
            for st in batches]


def rank_null_estimate(stats: NodeStats, tie_method: str = "average", degenerate: str = "zero") -> np.ndarray:
    """A lower-variance stand-in for each permuted walk value with the same null expectation,
    ``(S, B, W)``, for walks that visit one node ``m > 1`` times (root duplication); NaN elsewhere.

    Under the within-SEG permutation null let ``C`` be which values the repeated node's ``r``
    valid images get and which the walk's ``o`` other valid images get. Given ``C`` the ``o``
    values are uniform over the other positions, so with average ranks (``R`` the repeated node's
    images' rank sum, each image once, ``l`` its centred level rank, ``n = m r + o``)

        E[value | C] = -m l (R - r L / o) / sqrt(Sxx Syy),   L = n (n + 1) / 2 - m R.

    Every image's expected rank is ``(n + 1) / 2``, so ``E[R - r L / o] = 0``: the same term with
    ``Syy`` replaced by its null expectation (a constant,
    :meth:`~.nodestats.NodeStats.expected_tie_powers`) is a control variate of mean 0. On the
    twin-free walk (the node visited once) both terms have mean 0 (it repeats nothing, so its
    value's expectation is 0), and their difference there is a second control variate, which
    moves with the first. The stand-in

        [E[v | C] - control](walk) - [E[v | C] - control](twin-free walk)

    has exactly the walk value's null expectation (its mean over every permutation equals the
    value's) and, on TS2's tied columns, hundreds of times less variance.

    Only ``average`` ranks (other tie methods: NaN everywhere). Walks whose value cannot move
    (fewer than 2 samples, one level) are NaN: their value is already exact. Arguments as
    :func:`rank_nodes` (``degenerate`` only concerns those).
    """
    out = np.full(stats.shape, np.nan)
    rep = stats.stand_in_walks
    if tie_method != "average" or not rep.any():
        return out
    f = stats.repeat_frames
    r, o = f["r"], f["o"]
    est = 0.0
    for frame, mu, sign in ((f["twin"], f["m"], 1.0), (f["free"], 1.0, -1.0)):
        n = frame["n"]
        with np.errstate(invalid="ignore", divide="ignore"):
            g = mu * frame["lr"] * (frame["ranks"] - r * (n * (n + 1) / 2 - mu * frame["ranks"]) / o)
            syy, e_syy = score_rank_ss(n, frame["ties3"]), score_rank_ss(n, frame["e_ties3"])
            inv = (np.where(syy > 0, 1 / np.sqrt(frame["sxx"] * syy), 0.0)
                   - np.where(e_syy > 0, 1 / np.sqrt(frame["sxx"] * e_syy), 0.0))
            est = est + sign * np.where(g == 0, 0.0, -g * inv)
    return np.where(rep, est, np.nan)
