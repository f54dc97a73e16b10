"""Cluster (prompt) bootstrap intervals of the human-view statistics, on :mod:`analysis.stats`."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..stats import Interval, cluster_draws, draw_counts, group_means, percentile_ci
from ._common import _as_pair, _groups_codes, _progress
from .agreement import krippendorff_alpha
from .correlation import GLOBAL_ONLY, GROUPINGS, get_statistic, human_statistic
from .pairwise import _candidates, _pair_arrays, _within_group_pairs
from .vectorized import bootstrap_statistics, grouped_statistics

log = logging.getLogger(__name__)


# -- cluster bootstrap ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BootstrapCI(Interval):
    """A point estimate and its percentile bootstrap interval: an
    :class:`analysis.stats.intervals.Interval` (``low``, ``high``, ``n_invalid``, ``confidence``)
    with the statistic's ``value`` and the number of replicates ``n_boot``.

    Attributes
    ----------
    value : float
        The statistic on the data as given.
    low, high : float
        Percentile interval at ``confidence`` (NaN when ``n_boot == 0`` or no valid replicate).
    n_boot : int
        Replicates drawn. ``n_invalid`` of them gave NaN (e.g. only constant prompts drawn) and
        are left out of the interval.
    confidence : float
    """

    value: float = math.nan
    n_boot: int = 0


def draw_clusters(n_groups: int, n_boot: int, seed: int | None = 0) -> np.ndarray:
    """``(n_boot, n_groups)`` prompt indices drawn with replacement (:func:`analysis.stats.cluster_draws`).

    Every bootstrap function here draws through this, so the same seed resamples the same
    prompts for every metric and statistic (the intervals are comparable, paired).
    """
    return cluster_draws(n_groups, n_boot, np.random.default_rng(seed))


def cluster_bootstrap(statistic: Callable[[np.ndarray, np.ndarray], float], groups, n_boot: int = 1000,
                      seed: int | None = 0, confidence: float = 0.95, progress: bool = False,
                      desc: str = "bootstrap") -> BootstrapCI:
    """Cluster (prompt) bootstrap of any statistic of items.

    Each replicate draws ``G`` prompts with replacement and keeps all images of each drawn
    prompt; a prompt drawn twice enters twice, as two distinct groups. Resampling prompts, not
    images, respects that images of one prompt are not independent.

    Parameters
    ----------
    statistic : callable ``(idx, group_codes) -> float``
        ``idx`` are item indices into the original arrays (repeats allowed), ``group_codes`` a
        group label per entry of ``idx`` (copies of a prompt get distinct labels). It is first
        called on all items for the point estimate.
    groups : array_like, shape (n,)
        Prompt id per item.
    n_boot : int
        Replicates; 0 gives the point estimate with NaN bounds.
    seed, confidence, progress, desc
        RNG seed (:func:`draw_clusters`), interval level, tqdm bar and its label.

    Returns
    -------
    BootstrapCI
    """
    g = np.asarray(groups, dtype=object)
    codes, uniq = _groups_codes(g, len(g))
    members = [np.flatnonzero(codes == k) for k in range(len(uniq))]
    value = float(statistic(np.arange(len(g)), codes))
    if n_boot <= 0:
        return BootstrapCI(value=value, low=math.nan, high=math.nan, n_boot=0, n_invalid=0, confidence=confidence)
    draws = draw_clusters(len(uniq), n_boot, seed)
    reps = np.empty(n_boot)
    for b in _progress(range(n_boot), progress, desc):
        idx = np.concatenate([members[k] for k in draws[b]])
        lab = np.repeat(np.arange(len(uniq)), [len(members[k]) for k in draws[b]])
        reps[b] = statistic(idx, lab)
    ci = percentile_ci(reps, confidence)
    return BootstrapCI(value=value, low=ci.low, high=ci.high, n_boot=n_boot, n_invalid=ci.n_invalid,
                       confidence=confidence)


def _bootstrap_pairwise(x, y, codes, n_groups, draws, grouping, progress, desc) -> np.ndarray:
    """Replicates of (grouped) tie-calibrated accuracy without materializing resampled data.

    A replicate where cluster ``c`` is drawn ``w_c`` times has, for items i != j, ``w_ci * w_cj``
    copies of the pair (i, j) (also inside one cluster: copy s of i with copy t of j), plus
    ``C(w_c, 2)`` pairs of an item with its own copy, tied in both metric and human. So one sort
    of the pairs serves every replicate: only the weights change. The calibrated accuracy is
    ``max_k correct(k) / total`` over the candidate thresholds ``k`` (:func:`_calibrate_sorted`);
    the per-replicate prefix sums ``correct(k)`` are computed for many replicates at once.
    """
    counts = draw_counts(draws, n_groups)
    if grouping == "global":
        i, j = np.triu_indices(len(x), 1)
        gi, gj = codes[i], codes[j]
    else:
        i, j, gi = _within_group_pairs(codes)
        gj = gi
    d, agree, htie = _pair_arrays(x, y, i, j)
    order = np.argsort(d, kind="stable")
    d, gi, gj = d[order], gi[order], gj[order]
    a = agree[order].astype(float)
    gain = htie[order].astype(float) - a
    cand = _candidates(d)
    # correct(cand[m]) = extra + sum_p w_p agree_p + sum_{p < cand[m]} w_p gain_p: pair p enters
    # the prefix sums of every candidate after it, i.e. from column col[p] on.
    col = np.searchsorted(cand, np.arange(len(d)), side="right")
    if grouping == "global":
        return _global_pairwise_reps(counts, codes, n_groups, gi, gj, a, gain, col, len(cand), progress, desc)
    ppg = np.bincount(gi, minlength=n_groups).astype(float)
    used = counts @ (ppg > 0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_group = counts / (np.maximum(ppg, 1) * used[:, None])  # weight of each pair of group g
    reps = np.full(len(draws), math.nan)
    for lo in _progress(range(0, len(draws), 256), progress, desc):
        w = per_group[lo:lo + 256][:, gi]
        cum = np.concatenate((np.zeros((len(w), 1)), np.cumsum(w * gain, axis=1)), axis=1)
        correct = (w * a).sum(axis=1)[:, None] + cum[:, cand]
        reps[lo:lo + 256] = correct.max(axis=1) / w.sum(axis=1)
    reps[used == 0] = math.nan
    return reps


def _global_pairwise_reps(counts, codes, n_groups, gi, gj, a, gain, col, n_cand, progress, desc) -> np.ndarray:
    """Pooled tie-calibrated accuracy per replicate, from per prompt-pair sums (exact integers).

    A pair's weight is ``w_gi w_gj``, so every sum over pairs is a product of the replicate's
    prompt-pair weights ``V[b, (g, g')] = w_g w_g'`` with a sparse (prompt pair x column) matrix.
    """
    from scipy import sparse

    G = n_groups
    u = np.minimum(gi, gj) * G + np.maximum(gi, gj)  # unordered prompt pair: w_g w_g' is symmetric
    agree_u = np.bincount(u, weights=a, minlength=G * G)
    # Only candidates that can hold the maximum for some weights: column m >= 1 holds the pairs
    # between candidates m-1 and m, so m-1 is never above m when that block has no negative
    # gain, and m never above m-1 when it has no positive gain (all-zero blocks: keep m).
    # Dominance only points to neighbours and never both ways, so the maximum survives.
    # Merging the blocks of dropped candidates can make new dominated ones: repeat to a fixed point.
    new_col = col
    while True:
        has_pos = np.bincount(new_col, weights=gain > 0, minlength=n_cand + 1)[:n_cand] > 0
        has_neg = np.bincount(new_col, weights=gain < 0, minlength=n_cand + 1)[:n_cand] > 0
        keep = np.ones(n_cand, dtype=bool)
        keep[:-1] &= has_neg[1:]
        keep[1:] &= has_pos[1:] | ~has_neg[1:]
        kept = np.flatnonzero(keep)
        new_col = np.searchsorted(kept, new_col, side="left")  # pair p counts from the first kept m >= col[p]
        if len(kept) == n_cand:
            break
        n_cand = len(kept)
    nz = (gain != 0) & (new_col < n_cand)
    rows, u_row = np.unique(u[nz], return_inverse=True)  # prompt pairs that hold a pair
    Zt = sparse.csr_matrix((gain[nz], (new_col[nz], u_row)), shape=(n_cand, len(rows)))
    g1, g2 = rows // G, rows % G
    pairs_u = np.bincount(u, minlength=G * G).astype(float)
    sizes = np.bincount(codes, minlength=G).astype(float)
    log.debug("pooled pairwise bootstrap: %d candidate thresholds, %d non-zero terms", n_cand, Zt.nnz)
    reps = np.empty(len(counts))
    step = 100
    pairs_gg = pairs_u.reshape(G, G)
    agree_gg = agree_u.reshape(G, G)
    for lo in _progress(range(0, len(counts), step), progress, desc):
        w = counts[lo:lo + step]
        extra = (sizes * w * (w - 1) / 2).sum(axis=1)
        total = np.einsum("kg,kg->k", w @ pairs_gg, w) + extra
        best = np.cumsum(np.asarray(Zt @ (w[:, g1] * w[:, g2]).T), axis=0).max(axis=0)  # (cand, reps)
        correct = extra + np.einsum("kg,kg->k", w @ agree_gg, w) + best
        with np.errstate(invalid="ignore", divide="ignore"):
            reps[lo:lo + step] = np.where(total > 0, correct / total, math.nan)
    return reps


def bootstrap_human_statistic(metric, human, groups, statistic: str = "kendall_b", grouping: str = "global",
                              n_boot: int = 1000, seed: int | None = 0, confidence: float = 0.95,
                              nan_policy: str = "raise", progress: bool = False) -> BootstrapCI:
    """:func:`human_statistic` with a cluster-bootstrap (by prompt) percentile interval.

    Same resampling as :func:`cluster_bootstrap`, with exact shortcuts: for ``"prompt"``
    correlations a replicate is the mean of the drawn prompts' per-prompt values (a prompt's
    within-prompt value does not change when it is drawn), and pairwise accuracy re-weights
    pairs instead of copying data (:func:`_bootstrap_pairwise`). The tie threshold of
    ``pairwise_acc`` is re-calibrated in every replicate.

    Parameters
    ----------
    metric, human, groups : array_like, shape (n,)
    statistic, grouping : see :func:`human_statistic`
    n_boot, seed, confidence, progress : see :func:`cluster_bootstrap`
    nan_policy : {"raise", "omit"}

    Returns
    -------
    BootstrapCI
    """
    get_statistic(statistic)
    if grouping not in GROUPINGS or (grouping != "global" and statistic in GLOBAL_ONLY):
        raise ValueError(f"expected grouping in {list(GROUPINGS)} ('global' for {statistic!r}), got {grouping!r}")
    x, y, keep = _as_pair(metric, human, nan_policy)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(keep))
    # Re-code after dropping NaN items so that every group has at least one item.
    codes, uniq = _groups_codes(np.asarray(uniq[codes[keep]], dtype=object), len(x))
    G = len(uniq)
    value = human_statistic(x, y, uniq[codes], statistic, grouping)
    if n_boot <= 0:
        return BootstrapCI(value=value, low=math.nan, high=math.nan, n_boot=0, n_invalid=0, confidence=confidence)
    draws = draw_clusters(G, n_boot, seed)
    reps = bootstrap_replicates(x, y, codes, G, draws, statistic, grouping, progress)
    ci = percentile_ci(reps, confidence)
    return BootstrapCI(value=value, low=ci.low, high=ci.high, n_boot=n_boot, n_invalid=ci.n_invalid,
                       confidence=confidence)


def bootstrap_replicates(x: np.ndarray, y: np.ndarray, codes: np.ndarray, n_groups: int, draws: np.ndarray,
                         statistic: str, grouping: str, progress: bool = False) -> np.ndarray:
    """The statistic on every cluster-bootstrap replicate of finite items ``x, y`` (no NaN check).

    ``codes`` (0..``n_groups``-1) may leave groups empty (a rater's items, :mod:`.ceiling`): a
    drawn empty group adds nothing, so the replicates of several item subsets coded alike share
    their draws. Each replicate equals the statistic on the resampled items (see
    :func:`bootstrap_human_statistic`; tested against that in tests/test_human_vectorized.py).

    Returns
    -------
    ndarray, shape (n_boot,)
    """
    desc = f"{statistic}/{grouping}"
    if statistic == "pairwise_acc":
        return _bootstrap_pairwise(x, y, codes, n_groups, draws, grouping, progress, desc)
    counts = draw_counts(draws, n_groups)
    if statistic == "roc_auc":
        return _bootstrap_auc(x, y, codes, counts)
    if grouping == "prompt":
        # A replicate is the mean of the drawn prompts' values (undefined ones left out): the
        # SEG view's group mean with one group, all prompts (a slice: the same sums as ever).
        per = grouped_statistics(x, y, codes, n_groups, statistic)[None, :]
        return group_means(per, [("prompts", slice(None))], counts)[0][:, 0, 0]
    # Pooled: every replicate from per-prompt sums, equal to ``fn`` on the resampled items.
    return bootstrap_statistics(x, y, codes, n_groups, counts, statistic)


def _bootstrap_auc(x: np.ndarray, y: np.ndarray, codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """ROC AUC per replicate, an item weighted by its prompt's draw count: the share of
    (positive, negative) copy pairs ordered right, ties one half, as on the resampled items."""
    _, inv = np.unique(x, return_inverse=True)
    pos, neg = y == 1, y == 0
    n_vals = int(inv.max()) + 1 if len(inv) else 0
    reps = np.full(len(counts), np.nan)
    for b, w_g in enumerate(counts):
        w = w_g[codes]
        neg_at = np.bincount(inv[neg], weights=w[neg], minlength=n_vals)
        below = np.cumsum(neg_at) - neg_at
        wp, wn = w[pos].sum(), neg_at.sum()
        if wp > 0 and wn > 0:
            reps[b] = float((w[pos] * (below[inv[pos]] + 0.5 * neg_at[inv[pos]])).sum() / (wp * wn))
    return reps


def bootstrap_krippendorff_alpha(reliability_data, groups, level: str = "interval", n_boot: int = 1000,
                                 seed: int | None = 0, confidence: float = 0.95,
                                 progress: bool = False) -> BootstrapCI:
    """Krippendorff's alpha with a cluster-bootstrap (by prompt) interval.

    Replicates where alpha is undefined (no variation drawn) count as invalid.
    """
    data = np.asarray(reliability_data, dtype=float)
    value = krippendorff_alpha(data, level)  # raises on bad input before resampling

    def stat(idx, _lab):
        try:
            return krippendorff_alpha(data[:, idx], level)
        except ValueError:
            return math.nan

    r = cluster_bootstrap(stat, groups, n_boot, seed, confidence, progress, desc=f"alpha/{level}")
    return BootstrapCI(value=value, low=r.low, high=r.high, n_boot=r.n_boot, n_invalid=r.n_invalid,
                       confidence=confidence)
