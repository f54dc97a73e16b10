"""Correlation statistics of a metric with human ratings, their registry, and the within-prompt grouping."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as ss

from ._common import _as_pair, _groups_codes, _quiet
from .pairwise import grouped_pairwise_accuracy, pairwise_accuracy
from .vectorized import grouped_statistics

GROUPINGS = ("global", "prompt")



# -- correlation statistics -------------------------------------------------------------------
def spearman(metric, human, nan_policy: str = "raise") -> float:
    """Spearman's rank correlation, ``scipy.stats.spearmanr``.

    Pearson correlation of the average ranks (ties get their mean rank). NaN when fewer than 2
    items or either side is constant.

    Examples
    --------
    >>> round(spearman([1, 2, 3, 4], [1, 3, 2, 4]), 4)
    0.8
    """
    x, y, _ = _as_pair(metric, human, nan_policy)
    if len(x) < 2:
        return math.nan
    return _quiet(lambda: ss.spearmanr(x, y).statistic)


def kendall_tau_b(metric, human, nan_policy: str = "raise") -> float:
    """Kendall's tau-b, ``scipy.stats.kendalltau(variant="b")`` (scipy's default).

    ``tau_b = (C - D) / sqrt((P - T_x) (P - T_y))`` with C/D concordant/discordant pairs, P all
    pairs, T_x/T_y pairs tied in x/y. The variant that reproduces TIFA's Table 2. NaN when
    fewer than 2 items or a constant side.

    Examples
    --------
    >>> round(kendall_tau_b([1, 2, 2, 3], [1, 1, 2, 3]), 4)
    0.8
    """
    x, y, _ = _as_pair(metric, human, nan_policy)
    if len(x) < 2:
        return math.nan
    return _quiet(lambda: ss.kendalltau(x, y, variant="b").statistic)


def kendall_tau_c(metric, human, nan_policy: str = "raise") -> float:
    """Stuart's tau-c, ``scipy.stats.kendalltau(variant="c")``.

    ``tau_c = 2 (C - D) / (n^2 (m - 1) / m)``, ``m = min(#distinct x, #distinct y)``: suited to
    rectangular contingency tables (a continuous metric against a 5-point scale). NaN when fewer
    than 2 items or a constant side.

    Examples
    --------
    >>> round(kendall_tau_c([1, 2, 2, 3], [1, 1, 2, 3]), 4)
    0.75
    """
    x, y, _ = _as_pair(metric, human, nan_policy)
    if len(x) < 2:
        return math.nan
    return _quiet(lambda: ss.kendalltau(x, y, variant="c").statistic)


def pearson(metric, human, nan_policy: str = "raise") -> float:
    """Pearson's r, ``scipy.stats.pearsonr``. NaN when fewer than 2 items or a constant side.

    Examples
    --------
    >>> round(pearson([1, 2, 3], [2, 4, 7]), 4)
    0.9934
    """
    x, y, _ = _as_pair(metric, human, nan_policy)
    if len(x) < 2:
        return math.nan
    return _quiet(lambda: ss.pearsonr(x, y).statistic)


def roc_auc(metric, labels, nan_policy: str = "raise") -> float:
    """ROC AUC of a metric separating 0/1 labels (SeeTRUE's statistic), the Mann-Whitney form.

    ``AUC = (sum of the positives' average ranks - n1 (n1 + 1) / 2) / (n1 n0)``: the probability
    that a random positive scores above a random negative, ties counted one half (equal to the
    trapezoidal area of ``sklearn.metrics.roc_auc_score``). NaN when a class is absent.

    Raises
    ------
    ValueError
        A label that is not 0 or 1, unequal lengths, NaN with ``nan_policy="raise"``.

    Examples
    --------
    >>> roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    """
    x, y, _ = _as_pair(metric, labels, nan_policy)
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"expected 0/1 labels for ROC AUC, got {y[bad][0]!r} at position {int(np.flatnonzero(bad)[0])}")
    pos = y == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return math.nan
    ranks = ss.rankdata(x)
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


# -- registry -----------------------------------------------------------------------------------
STATISTICS: Mapping[str, Callable[..., float]] = {
    "spearman": spearman,
    "kendall_b": kendall_tau_b,
    "kendall_c": kendall_tau_c,
    "pearson": pearson,
    "pairwise_acc": pairwise_accuracy,
    "roc_auc": roc_auc,
}

#: Statistics of a pair of items' order only (not of a per-group mean): no within-prompt form.
GLOBAL_ONLY = frozenset({"roc_auc"})


def get_statistic(name: str) -> Callable[..., float]:
    """The statistic registered as ``name``.

    Raises
    ------
    KeyError
        Unknown name; the message lists the valid ones.
    """
    try:
        return STATISTICS[name]
    except KeyError:
        raise KeyError(f"unknown statistic {name!r}; expected one of {list(STATISTICS)}") from None


# -- grouped (within-prompt) correlation --------------------------------------------------------
@dataclass(frozen=True)
class GroupedCorrelation:
    """A statistic computed within each group and averaged.

    Attributes
    ----------
    value : float
        Mean of ``per_group`` over groups where it is defined (NaN if none is).
    per_group : numpy.ndarray
        One value per group in ``group_ids`` order; NaN where undefined (fewer than 2 items, or a
        constant side such as all images of the prompt rated alike).
    group_ids : numpy.ndarray
        Group ids, first-appearance order.
    n_groups, n_used : int
        Groups present and groups with a defined value.
    """

    value: float
    per_group: np.ndarray
    group_ids: np.ndarray
    n_groups: int
    n_used: int


def grouped_correlation(metric, human, groups, statistic: str = "kendall_b",
                        nan_policy: str = "raise") -> GroupedCorrelation:
    """Correlation within each group (prompt), averaged over groups where it is defined.

    ``value = mean_g stat(metric[g], human[g])`` over groups whose statistic is not NaN.

    Parameters
    ----------
    metric, human, groups : array_like, shape (n,)
    statistic : {"spearman", "kendall_b", "kendall_c", "pearson"}
        ``pairwise_acc`` is not averaged per group independently because its tie threshold is
        shared; use :func:`grouped_pairwise_accuracy`.
    nan_policy : {"raise", "omit"}

    Raises
    ------
    KeyError
        Unknown statistic.
    ValueError
        ``statistic="pairwise_acc"``, bad shapes, missing group ids, NaN with ``"raise"``.

    Examples
    --------
    >>> r = grouped_correlation([1, 2, 3, 3, 2, 1], [1, 2, 3, 1, 2, 3], ["a"] * 3 + ["b"] * 3, "spearman")
    >>> r.value, r.per_group.tolist()
    (0.0, [1.0, -1.0])
    """
    get_statistic(statistic)
    if statistic == "pairwise_acc":
        raise ValueError("expected a correlation statistic, got 'pairwise_acc' (its tie threshold is shared "
                         "across groups): use grouped_pairwise_accuracy")
    if statistic in GLOBAL_ONLY:
        raise ValueError(f"expected a correlation statistic, got {statistic!r}, which has no within-prompt form here")
    x, y, keep = _as_pair(metric, human, nan_policy)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(keep))
    codes = codes[keep]
    # All prompts at once; equals ``fn`` on each prompt's items (tests/test_human_vectorized.py).
    per = grouped_statistics(x, y, codes, len(uniq), statistic)
    used = np.isfinite(per)
    value = float(per[used].mean()) if used.any() else math.nan
    return GroupedCorrelation(value, per, uniq, len(uniq), int(used.sum()))


def human_statistic(metric, human, groups=None, statistic: str = "kendall_b", grouping: str = "global",
                    nan_policy: str = "raise") -> float:
    """One statistic of metric vs human, pooled (``"global"``) or within prompts (``"prompt"``).

    Raises
    ------
    KeyError
        Unknown statistic.
    ValueError
        Unknown grouping, ``grouping="prompt"`` without ``groups``, bad input.
    """
    get_statistic(statistic)
    if grouping == "global":
        return STATISTICS[statistic](metric, human, nan_policy=nan_policy)
    if grouping != "prompt":
        raise ValueError(f"expected grouping in {list(GROUPINGS)}, got {grouping!r}")
    if groups is None:
        raise ValueError("expected groups (prompt ids) for grouping='prompt', got None")
    if statistic == "pairwise_acc":
        return grouped_pairwise_accuracy(metric, human, groups, nan_policy).accuracy
    return grouped_correlation(metric, human, groups, statistic, nan_policy).value
