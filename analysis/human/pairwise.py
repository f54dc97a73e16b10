"""Tie-calibrated pairwise accuracy (Deutsch, Foster & Freitag, 2023), pooled and within prompts."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ._common import _as_pair, _groups_codes


# -- tie-calibrated pairwise accuracy (Deutsch et al., 2023) ----------------------------------
@dataclass(frozen=True)
class PairwiseAccuracy:
    """Tie-calibrated pairwise accuracy.

    Attributes
    ----------
    accuracy : float
        ``acc_eq`` at the calibrated threshold (NaN when there is no pair).
    epsilon : float
        The calibrated tie threshold: metric differences ``<= epsilon`` count as metric ties.
        It is the largest metric difference declared a tie (0.0 when only exact ties are).
    n_pairs : float
        Number of pairs scored (a weighted count inside the bootstrap).
    """

    accuracy: float
    epsilon: float
    n_pairs: float


def _pair_arrays(x: np.ndarray, y: np.ndarray, i: np.ndarray, j: np.ndarray):
    dm = x[i] - x[j]
    dh = y[i] - y[j]
    d = np.abs(dm)
    htie = dh == 0
    agree = (np.sign(dm) == np.sign(dh)) & ~htie
    return d, agree, htie


def _candidates(d_sorted: np.ndarray) -> np.ndarray:
    """Valid numbers k of smallest differences to declare ties (0..n), for sorted ``d``.

    Only cuts between distinct differences are thresholds, and exact metric ties (d == 0) are
    always ties.
    """
    n = len(d_sorted)
    boundary = np.ones(n + 1, dtype=bool)
    if n > 1:
        boundary[1:n] = d_sorted[:-1] < d_sorted[1:]
    n_zero = int(np.searchsorted(d_sorted, 0.0, side="right"))
    boundary[:n_zero] = False
    return np.flatnonzero(boundary)


def _calibrate_sorted(d: np.ndarray, agree: np.ndarray, gain: np.ndarray, w: np.ndarray, cand: np.ndarray,
                      extra_tied: float = 0.0) -> PairwiseAccuracy:
    """Best ``acc_eq`` over thresholds for pairs sorted by ``d`` (see :func:`_calibrate`).

    ``agree`` (0/1) marks sign agreement with a non-tied human pair, ``gain = htie - agree``
    is what declaring a pair a metric tie changes in its correctness.
    """
    total = float(w.sum()) + extra_tied
    if total <= 0:
        return PairwiseAccuracy(math.nan, math.nan, 0.0)
    # Declaring the k smallest differences ties: correct(k) = all sign agreements
    # + sum over those k pairs of (human tie - sign agreement).
    cum = np.concatenate(([0.0], np.cumsum(w * gain)))
    correct = extra_tied + float((w * agree).sum()) + cum[cand]  # not np.dot: BLAS threads cost more here
    b = int(np.argmax(correct))  # first maximum = smallest threshold
    k = int(cand[b])
    eps = float(d[k - 1]) if k > 0 else 0.0
    return PairwiseAccuracy(float(correct[b] / total), eps, total)


def _calibrate(d: np.ndarray, agree: np.ndarray, htie: np.ndarray, w: np.ndarray,
               extra_tied: float = 0.0) -> PairwiseAccuracy:
    """Best ``acc_eq`` over all tie thresholds, pairs given as arrays (see the public function).

    ``extra_tied`` adds pairs tied in both metric and human (bootstrap copies of one item).
    Candidate thresholds are 0 and every distinct |metric difference|: between two consecutive
    candidates nothing changes, so this search is exact. Ties in accuracy go to the smallest
    threshold.
    """
    order = np.argsort(d, kind="stable")
    d = d[order]
    a = agree[order].astype(float)
    gain = htie[order].astype(float) - a
    return _calibrate_sorted(d, a, gain, np.asarray(w, dtype=float)[order], _candidates(d), extra_tied)


def tie_calibrated_pairwise_accuracy(metric, human, nan_policy: str = "raise") -> PairwiseAccuracy:
    """Pairwise accuracy with tie calibration, ``acc_eq`` of Deutsch et al. (2023).

    Over all pairs ``(i, j)``, ``i < j``, with ``dm = m_i - m_j`` and ``dh = h_i - h_j``::

        acc_eq(eps) = (C + T_hm) / (C + D + T_h + T_m + T_hm)

    where a pair is a metric tie when ``|dm| <= eps`` and a human tie when ``dh == 0`` (exact),
    C = neither tied and ``sign(dm) == sign(dh)``, D = neither tied and opposite signs,
    T_h / T_m / T_hm = tied in human only / metric only / both. The denominator is every pair,
    so, unlike Kendall's tau, a metric is rewarded for predicting a human tie, which is most
    pairs on a 5-point Likert scale. Tie calibration picks the ``eps`` maximizing ``acc_eq``
    (the paper's procedure; it is fitted on the same data and so optimistic, which is why the
    bootstrap re-fits it in every replicate).

    Parameters
    ----------
    metric, human : array_like, shape (n,)
        Metric scores and human ratings (both "higher = better").
    nan_policy : {"raise", "omit"}

    Returns
    -------
    PairwiseAccuracy
        accuracy, the calibrated ``epsilon`` and the number of pairs. NaN accuracy for n < 2.

    Raises
    ------
    ValueError
        Unequal lengths, non-1-D input, or NaN with ``nan_policy="raise"``.

    Notes
    -----
    O(n^2) memory and O(n^2 log n) time: 800 items (320k pairs) take a few tens of ms.

    Examples
    --------
    >>> r = tie_calibrated_pairwise_accuracy([0.1, 0.2, 0.9], [1, 1, 5])
    >>> r.accuracy, r.epsilon
    (1.0, 0.1)
    """
    x, y, _ = _as_pair(metric, human, nan_policy)
    return _pooled_cached(np.ascontiguousarray(x).tobytes(), np.ascontiguousarray(y).tobytes())


@functools.lru_cache(maxsize=32)
def _pooled_cached(xb: bytes, yb: bytes) -> PairwiseAccuracy:
    # The human view asks for the same metric's accuracy for the value and for epsilon, and each
    # costs a sort of n(n-1)/2 pairs; the result is a frozen dataclass, safe to share.
    x, y = np.frombuffer(xb, dtype=float), np.frombuffer(yb, dtype=float)
    i, j = np.triu_indices(len(x), 1)
    d, agree, htie = _pair_arrays(x, y, i, j)
    return _calibrate(d, agree, htie, np.ones(len(d)))


def pairwise_accuracy(metric, human, nan_policy: str = "raise") -> float:
    """The accuracy of :func:`tie_calibrated_pairwise_accuracy` (registry form)."""
    return tie_calibrated_pairwise_accuracy(metric, human, nan_policy).accuracy


def _within_group_pairs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs (i, j), i < j, of items in the same group, and the group of each pair."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = np.r_[starts[1:], len(codes)]
    ii, jj, gg = [], [], []
    for s, e in zip(starts, ends, strict=True):
        if e - s < 2:
            continue
        a, b = np.triu_indices(e - s, 1)
        ii.append(order[s + a])
        jj.append(order[s + b])
        gg.append(np.full(len(a), sorted_codes[s]))
    if not ii:
        z = np.zeros(0, dtype=np.intp)
        return z, z, z
    return np.concatenate(ii), np.concatenate(jj), np.concatenate(gg)


def grouped_pairwise_accuracy(metric, human, groups, nan_policy: str = "raise",
                              group_weights: np.ndarray | None = None) -> PairwiseAccuracy:
    """Within-group tie-calibrated pairwise accuracy, averaged over groups, one shared epsilon.

    Only pairs inside a group (a prompt) are compared; ``acc_eq`` is computed per group and
    averaged over groups with at least 2 items, with a single ``eps`` chosen to maximize that
    average (Deutsch et al.'s "group-by-item" setting). Each pair of group ``g`` is weighted
    ``1 / (P_g * G)``, ``P_g`` its pairs, ``G`` the groups used.

    Parameters
    ----------
    metric, human, groups : array_like, shape (n,)
    nan_policy : {"raise", "omit"}
    group_weights : array, optional
        Multiplicity of each group (first-appearance order), used by the cluster bootstrap.

    Returns
    -------
    PairwiseAccuracy
        ``n_pairs`` is the number of groups used (weighted). NaN when no group has 2 items.
    """
    x, y, keep = _as_pair(metric, human, nan_policy)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(keep))
    codes = codes[keep]
    i, j, g = _within_group_pairs(codes)
    d, agree, htie = _pair_arrays(x, y, i, j)
    n_groups = len(uniq)
    pairs_per_group = np.bincount(g, minlength=n_groups).astype(float)
    mult = np.ones(n_groups) if group_weights is None else np.asarray(group_weights, dtype=float)
    used = (pairs_per_group > 0) * mult
    if used.sum() == 0:
        return PairwiseAccuracy(math.nan, math.nan, 0.0)
    w = mult[g] / (pairs_per_group[g] * used.sum())
    r = _calibrate(d, agree, htie, w)
    return PairwiseAccuracy(r.accuracy, r.epsilon, float(used.sum()))
