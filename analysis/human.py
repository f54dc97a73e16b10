"""Human view of a metric: correlation with human ratings, agreement, bootstrap CIs, paired tests.

Pure functions on arrays (numpy in, floats / small frozen dataclasses out), the meta-evaluation
that metric papers such as TIFA (Hu et al., 2023, Table 2) report, set beside the SEG view.

Two groupings
    ``"global"``  one statistic over all items (images) pooled, TIFA's Table 2 setting.
    ``"prompt"``  the statistic within each prompt's images, averaged over prompts where it is
                  defined: the setting closest to a SEG walk (images of one prompt ordered by
                  how wrong they are), free of between-prompt difficulty differences.

Statistics (registry :data:`STATISTICS`; each ``f(metric, human) -> float``)
    ``spearman``, ``kendall_b``, ``kendall_c``, ``pearson`` (scipy.stats), and ``pairwise_acc``:
    the tie-calibrated pairwise accuracy ``acc_eq`` of Deutsch, Foster & Freitag (2023), "Ties
    Matter: Meta-Evaluating Modern Metrics with Pairwise Accuracy and Tie Calibration" (see
    :func:`tie_calibrated_pairwise_accuracy`).

Conventions shared by all functions
    * Higher metric score and higher human rating both mean "better"; a metric where lower is
      better must be negated by the caller.
    * NaN policy: ``nan_policy="raise"`` (default) rejects NaN/inf with the positions;
      ``"omit"`` drops items whose metric or human value is not finite.
    * Undefined statistics are NaN, never an exception: fewer than 2 items, or a constant side
      (e.g. a prompt whose 5 images all got the same human rating). Grouped averages skip NaN
      groups and report how many groups were used.

This module imports numpy, scipy, pandas and (lazily) krippendorff only; never torch.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as ss

from .stats import cluster_draws, draw_counts, percentile_ci, williams_test

__all__ = [
    "STATISTICS", "GROUPINGS", "get_statistic",
    "spearman", "kendall_tau_b", "kendall_tau_c", "pearson", "pairwise_accuracy",
    "PairwiseAccuracy", "tie_calibrated_pairwise_accuracy", "grouped_pairwise_accuracy",
    "GroupedCorrelation", "grouped_correlation", "human_statistic",
    "krippendorff_alpha",
    "BootstrapCI", "draw_clusters", "cluster_bootstrap", "bootstrap_human_statistic",
    "bootstrap_krippendorff_alpha",
    "PairedTest", "williams_test_metrics", "permutation_test",
    "metric_correlation_matrix", "metric_correlation_pvalues",
    "STATISTIC_LABELS", "human_table", "table_to_markdown", "write_human_table",
]

log = logging.getLogger(__name__)

GROUPINGS = ("global", "prompt")


# -- input checks -----------------------------------------------------------------------------
def _as_pair(x, y, nan_policy: str = "raise") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two equal-length float vectors and the boolean mask of the items kept."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"expected 1-D score vectors, got shapes {x.shape} and {y.shape}")
    if x.shape != y.shape:
        raise ValueError(f"expected metric and human vectors of equal length, got {len(x)} and {len(y)}")
    keep = np.isfinite(x) & np.isfinite(y)
    if nan_policy == "raise":
        if not keep.all():
            bad = np.flatnonzero(~keep)
            raise ValueError(f"expected finite scores, got {len(bad)} NaN/inf at positions {bad[:10].tolist()}"
                             f"{' ...' if len(bad) > 10 else ''} (pass nan_policy='omit' to drop them)")
    elif nan_policy != "omit":
        raise ValueError(f"expected nan_policy 'raise' or 'omit', got {nan_policy!r}")
    return x[keep], y[keep], keep


def _groups_codes(groups, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes (0..G-1, first-appearance order) and the group ids."""
    g = np.asarray(groups, dtype=object)
    if g.shape != (n,):
        raise ValueError(f"expected one group id per item ({n}), got shape {g.shape}")
    if pd.isna(pd.Series(g)).any():
        raise ValueError("expected a group id for every item, got a missing (NaN/None) one")
    codes, uniques = pd.factorize(g, sort=False)
    return codes.astype(np.intp), np.asarray(uniques, dtype=object)


def _quiet(fn: Callable[[], float]) -> float:
    """Call a scipy statistic, turning its constant-input warnings into a NaN result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=ss.ConstantInputWarning)
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return float(fn())


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
    for s, e in zip(starts, ends):
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


# -- registry -----------------------------------------------------------------------------------
STATISTICS: Mapping[str, Callable[..., float]] = {
    "spearman": spearman,
    "kendall_b": kendall_tau_b,
    "kendall_c": kendall_tau_c,
    "pearson": pearson,
    "pairwise_acc": pairwise_accuracy,
}


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
    fn = get_statistic(statistic)
    if statistic == "pairwise_acc":
        raise ValueError("expected a correlation statistic, got 'pairwise_acc' (its tie threshold is shared "
                         "across groups): use grouped_pairwise_accuracy")
    x, y, keep = _as_pair(metric, human, nan_policy)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(keep))
    codes = codes[keep]
    per = np.full(len(uniq), np.nan)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.r_[True, codes[order][1:] != codes[order][:-1], True])
    for s, e in zip(bounds[:-1], bounds[1:]):
        idx = order[s:e]
        per[codes[idx[0]]] = fn(x[idx], y[idx])
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


# -- inter-annotator agreement -------------------------------------------------------------------
def krippendorff_alpha(reliability_data, level: str = "interval", value_domain=None) -> float:
    """Krippendorff's alpha with the ``krippendorff`` package.

    ``alpha = 1 - D_o / D_e``: observed disagreement within items over the disagreement
    expected by chance from all pairable values. ``level`` picks the distance: ``"interval"``
    (squared difference), ``"ordinal"`` (rank-frequency distance), ``"nominal"``, ``"ratio"``.
    Items with fewer than 2 ratings do not contribute.

    Parameters
    ----------
    reliability_data : array_like, shape (raters, items)
        Ratings, NaN where a rater did not rate an item
        (:meth:`seg_data.human.HumanJudgments.reliability_data`).
    level : {"interval", "ordinal", "nominal", "ratio"}
    value_domain : sequence, optional
        The ordered scale (e.g. ``[1, 2, 3, 4, 5]``); default: the values present.

    Raises
    ------
    ValueError
        Not 2-D, fewer than 2 raters, unknown level, or no variation (a single value in the
        data, where alpha is undefined).
    ImportError
        ``krippendorff`` is not installed (``pip install ts2[human]``).

    Examples
    --------
    >>> round(krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 5]]), 3)  # 1 - (2/8) / (222/56)
    0.937
    """
    try:
        import krippendorff
    except ImportError as e:  # optional dependency: say how to get it
        raise ImportError("krippendorff's alpha needs the 'krippendorff' package: pip install 'ts2[human]'") from e
    data = np.asarray(reliability_data, dtype=float)
    if data.ndim != 2 or data.shape[0] < 2:
        raise ValueError(f"expected a (raters >= 2, items) array, got shape {data.shape}")
    if level not in {"interval", "ordinal", "nominal", "ratio"}:
        raise ValueError(f"expected level in ['interval', 'ordinal', 'nominal', 'ratio'], got {level!r}")
    try:
        return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level,
                                        value_domain=value_domain))
    except (ValueError, ZeroDivisionError) as e:
        vals = np.unique(data[np.isfinite(data)])
        raise ValueError(f"Krippendorff's alpha is undefined here: expected ratings with at least 2 distinct "
                         f"values in items rated twice or more, got values {vals[:10].tolist()} ({e})") from e


# -- cluster bootstrap ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BootstrapCI:
    """A point estimate and its percentile bootstrap interval.

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

    value: float
    low: float
    high: float
    n_boot: int
    n_invalid: int
    confidence: float


def draw_clusters(n_groups: int, n_boot: int, seed: int | None = 0) -> np.ndarray:
    """``(n_boot, n_groups)`` prompt indices drawn with replacement (:func:`analysis.stats.cluster_draws`).

    Every bootstrap function here draws through this, so the same seed resamples the same
    prompts for every metric and statistic (the intervals are comparable, paired).
    """
    return cluster_draws(n_groups, n_boot, np.random.default_rng(seed))


def _progress(it, progress: bool, desc: str):
    if not progress:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, desc=desc, leave=False)


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
        return BootstrapCI(value, math.nan, math.nan, 0, 0, confidence)
    draws = draw_clusters(len(uniq), n_boot, seed)
    reps = np.empty(n_boot)
    for b in _progress(range(n_boot), progress, desc):
        idx = np.concatenate([members[k] for k in draws[b]])
        lab = np.repeat(np.arange(len(uniq)), [len(members[k]) for k in draws[b]])
        reps[b] = statistic(idx, lab)
    ci = percentile_ci(reps, confidence)
    return BootstrapCI(value, ci.low, ci.high, n_boot, ci.n_invalid, confidence)


def _bootstrap_pairwise(x, y, codes, n_groups, draws, grouping, progress, desc) -> np.ndarray:
    """Replicates of (grouped) tie-calibrated accuracy without materializing resampled data.

    A replicate where cluster ``c`` is drawn ``w_c`` times has, for items i != j, ``w_ci * w_cj``
    copies of the pair (i, j) (also inside one cluster: copy s of i with copy t of j), plus
    ``C(w_c, 2)`` pairs of an item with its own copy, tied in both metric and human. So one sort
    of the pairs serves every replicate: only the weights change.
    """
    counts = draw_counts(draws, n_groups)
    reps = np.empty(len(draws))
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
    if grouping == "global":
        sizes = np.bincount(codes, minlength=n_groups).astype(float)
        for b in _progress(range(len(draws)), progress, desc):
            w = counts[b]
            extra = float((sizes * w * (w - 1) / 2).sum())
            reps[b] = _calibrate_sorted(d, a, gain, w[gi] * w[gj], cand, extra).accuracy
        return reps
    ppg = np.bincount(gi, minlength=n_groups).astype(float)
    for b in _progress(range(len(draws)), progress, desc):
        w = counts[b]
        used = float(((ppg > 0) * w).sum())
        if used == 0:
            reps[b] = math.nan
            continue
        per_group = w / (np.maximum(ppg, 1) * used)
        reps[b] = _calibrate_sorted(d, a, gain, per_group[gi], cand).accuracy
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
    fn = get_statistic(statistic)
    if grouping not in GROUPINGS:
        raise ValueError(f"expected grouping in {list(GROUPINGS)}, got {grouping!r}")
    x, y, keep = _as_pair(metric, human, nan_policy)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(keep))
    # Re-code after dropping NaN items so that every group has at least one item.
    codes, uniq = _groups_codes(np.asarray(uniq[codes[keep]], dtype=object), len(x))
    G = len(uniq)
    value = human_statistic(x, y, uniq[codes], statistic, grouping)
    if n_boot <= 0:
        return BootstrapCI(value, math.nan, math.nan, 0, 0, confidence)
    draws = draw_clusters(G, n_boot, seed)
    desc = f"{statistic}/{grouping}"
    if statistic == "pairwise_acc":
        reps = _bootstrap_pairwise(x, y, codes, G, draws, grouping, progress, desc)
    elif grouping == "prompt":
        per = grouped_correlation(x, y, uniq[codes], statistic).per_group
        ok = np.isfinite(per)
        counts = draw_counts(draws, G)
        den = counts @ ok.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = np.where(den > 0, (counts @ np.where(ok, per, 0.0)) / den, np.nan)
    else:
        members = [np.flatnonzero(codes == k) for k in range(G)]
        reps = np.empty(n_boot)
        for b in _progress(range(n_boot), progress, desc):
            idx = np.concatenate([members[k] for k in draws[b]])
            reps[b] = fn(x[idx], y[idx])
    ci = percentile_ci(reps, confidence)
    return BootstrapCI(value, ci.low, ci.high, n_boot, ci.n_invalid, confidence)


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
    return BootstrapCI(value, r.low, r.high, r.n_boot, r.n_invalid, confidence)


# -- paired tests between two metrics -------------------------------------------------------------
@dataclass(frozen=True)
class PairedTest:
    """Test of ``stat(a, human) == stat(b, human)`` for two metrics scored on the same items.

    Attributes
    ----------
    test : str
        ``"williams"`` or ``"permutation"``.
    statistic, grouping : str
    value_a, value_b : float
        The two metrics' statistics (for grouped permutation tests: over the prompts where both
        are defined).
    diff : float
        ``value_a - value_b``.
    test_statistic : float
        Williams' t (NaN for the permutation test).
    p_value : float
        Two-sided.
    n : int
        Items (Williams, global) or prompts used (grouped).
    n_resamples : int
        Permutations drawn (0 for Williams).
    """

    test: str
    statistic: str
    grouping: str
    value_a: float
    value_b: float
    diff: float
    test_statistic: float
    p_value: float
    n: int
    n_resamples: int


def williams_test_metrics(a, b, human, method: str = "pearson", nan_policy: str = "raise") -> PairedTest:
    """Williams' test between metrics ``a`` and ``b`` (global grouping).

    ``method="spearman"`` applies the test to Spearman correlations (Pearson on ranks), the
    usual approximation; Kendall's tau has no Williams form (use :func:`permutation_test`).

    Raises
    ------
    ValueError
        Unknown method, unequal lengths, NaN with ``"raise"``, fewer than 4 items.
    """
    if method not in {"pearson", "spearman"}:
        raise ValueError(f"expected method 'pearson' or 'spearman' for Williams' test, got {method!r}")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    h = np.asarray(human, dtype=float)
    if not (a.shape == b.shape == h.shape) or a.ndim != 1:
        raise ValueError(f"expected three 1-D vectors of equal length, got {a.shape}, {b.shape}, {h.shape}")
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if nan_policy == "raise" and not keep.all():
        raise ValueError(f"expected finite scores, got {(~keep).sum()} NaN/inf (pass nan_policy='omit')")
    a, b, h = a[keep], b[keep], h[keep]
    fn = STATISTICS[method]
    r12, r13, r23 = fn(a, h), fn(b, h), fn(a, b)
    if not all(math.isfinite(r) for r in (r12, r13, r23)):
        t, p = math.nan, math.nan
    else:
        w = williams_test(r12, r13, r23, len(a))
        t, p = w.t, w.p
    return PairedTest("williams", method, "global", r12, r13, r12 - r13, t, p, len(a), 0)


def _standardize(v: np.ndarray, how: str | None) -> np.ndarray:
    if how is None or how == "none":
        return v
    if how == "zscore":
        sd = v.std()
        return (v - v.mean()) / sd if sd > 0 else v - v.mean()
    if how == "rank":
        return ss.rankdata(v) / len(v)
    raise ValueError(f"expected standardize in ['zscore', 'rank', None], got {how!r}")


def permutation_test(a, b, human, groups, statistic: str = "kendall_b", grouping: str = "global",
                     n_perm: int = 1000, seed: int | None = 0, standardize: str | None = "zscore",
                     nan_policy: str = "raise", progress: bool = False) -> PairedTest:
    """Paired permutation test swapping the two metrics' scores per prompt.

    Under H0 (the metrics correlate equally with humans) the labels "a" and "b" are
    exchangeable within a prompt: each permutation swaps all of a prompt's scores between the
    metrics with probability 1/2 and recomputes ``diff = stat(a', h) - stat(b', h)``;
    ``p = (1 + #{|diff_perm| >= |diff_obs|}) / (1 + n_perm)`` (two-sided, never 0).

    For ``grouping="prompt"`` with a correlation statistic, swapping prompt g just flips the
    sign of its per-prompt difference, so permutations are sign flips of those differences
    (exact, and fast); prompts where either metric's value is undefined are left out, and
    ``value_a``/``value_b`` are over the prompts kept. Otherwise the statistic is recomputed.

    Parameters
    ----------
    a, b, human, groups : array_like, shape (n,)
    statistic, grouping : see :func:`human_statistic`
    n_perm : int
        Permutations (>= 1).
    seed : int
    standardize : {"zscore", "rank", None}
        Applied to each metric over all items before swapping, so that mixing two metrics on
        different scales (CLIPScore ~30, TIFA in [0, 1]) stays meaningful for pooled statistics.
        Within-prompt rank statistics do not depend on it.
    nan_policy : {"raise", "omit"}
        ``"omit"`` drops items where a, b or human is not finite.

    Raises
    ------
    KeyError
        Unknown statistic.
    ValueError
        Bad grouping/shapes/``n_perm``, NaN with ``"raise"``.
    """
    get_statistic(statistic)
    if grouping not in GROUPINGS:
        raise ValueError(f"expected grouping in {list(GROUPINGS)}, got {grouping!r}")
    if n_perm < 1:
        raise ValueError(f"expected n_perm >= 1, got {n_perm}")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    h = np.asarray(human, dtype=float)
    if not (a.shape == b.shape == h.shape) or a.ndim != 1:
        raise ValueError(f"expected three 1-D vectors of equal length, got {a.shape}, {b.shape}, {h.shape}")
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(a))
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if nan_policy == "raise" and not keep.all():
        raise ValueError(f"expected finite scores, got {(~keep).sum()} NaN/inf (pass nan_policy='omit')")
    a, b, h = a[keep], b[keep], h[keep]
    codes, uniq = _groups_codes(np.asarray(uniq[codes[keep]], dtype=object), len(a))
    G = len(uniq)
    rng = np.random.default_rng(seed)
    flips = rng.random((n_perm, G)) < 0.5

    if grouping == "prompt" and statistic != "pairwise_acc":
        pa = grouped_correlation(a, h, uniq[codes], statistic).per_group
        pb = grouped_correlation(b, h, uniq[codes], statistic).per_group
        ok = np.isfinite(pa) & np.isfinite(pb)
        d = np.where(ok, pa - pb, 0.0)
        n_ok = int(ok.sum())
        if n_ok == 0:
            return PairedTest("permutation", statistic, grouping, math.nan, math.nan, math.nan, math.nan,
                              math.nan, 0, n_perm)
        va, vb = float(pa[ok].mean()), float(pb[ok].mean())
        obs = float(d.sum() / n_ok)
        perm = (np.where(flips, -1.0, 1.0) @ d) / n_ok
        p = (1 + int((np.abs(perm) >= abs(obs) - 1e-12).sum())) / (1 + n_perm)
        return PairedTest("permutation", statistic, grouping, va, vb, va - vb, math.nan, p, n_ok, n_perm)

    za, zb = _standardize(a, standardize), _standardize(b, standardize)
    labels = uniq[codes]

    def diff(x1, x2) -> float:
        return (human_statistic(x1, h, labels, statistic, grouping)
                - human_statistic(x2, h, labels, statistic, grouping))

    va = human_statistic(a, h, labels, statistic, grouping)
    vb = human_statistic(b, h, labels, statistic, grouping)
    obs = diff(za, zb)
    perm = np.empty(n_perm)
    for k in _progress(range(n_perm), progress, f"permutation {statistic}/{grouping}"):
        swap = flips[k][codes]
        perm[k] = diff(np.where(swap, zb, za), np.where(swap, za, zb))
    ok = np.isfinite(perm)
    p = (1 + int((np.abs(perm[ok]) >= abs(obs) - 1e-12).sum())) / (1 + int(ok.sum())) if math.isfinite(obs) \
        else math.nan
    n = G if grouping == "prompt" else len(a)
    return PairedTest("permutation", statistic, grouping, va, vb, va - vb, math.nan, p, n, n_perm)


# -- metric-metric correlation ----------------------------------------------------------------------
def metric_correlation_matrix(scores: pd.DataFrame, method: str = "spearman", min_periods: int = 3) -> pd.DataFrame:
    """Correlation between every two metrics of a score table ("What makes a good metric?", 3.3).

    ``scores`` has one row per image and one column per metric (SEG or human score tables
    alike). Each pair uses the rows where both are present (pairwise complete, pandas
    ``DataFrame.corr``); fewer than ``min_periods`` such rows or a constant column give NaN.

    Raises
    ------
    ValueError
        Unknown method or a non-numeric column.
    """
    if method not in {"spearman", "kendall", "pearson"}:
        raise ValueError(f"expected method in ['spearman', 'kendall', 'pearson'], got {method!r}")
    bad = [c for c in scores.columns if not pd.api.types.is_numeric_dtype(scores[c])]
    if bad:
        raise ValueError(f"expected numeric score columns, got non-numeric {bad}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return scores.astype(float).corr(method=method, min_periods=min_periods)


def metric_correlation_pvalues(scores: pd.DataFrame, method: str = "spearman", min_periods: int = 3) -> pd.DataFrame:
    """Two-sided p-values matching :func:`metric_correlation_matrix` (scipy's tests, pairwise complete)."""
    fns = {"spearman": ss.spearmanr, "kendall": ss.kendalltau, "pearson": ss.pearsonr}
    if method not in fns:
        raise ValueError(f"expected method in {list(fns)}, got {method!r}")
    cols = list(scores.columns)
    out = pd.DataFrame(np.nan, index=cols, columns=cols)
    v = scores.to_numpy(dtype=float)
    for i, ci in enumerate(cols):
        for j in range(i, len(cols)):
            ok = np.isfinite(v[:, i]) & np.isfinite(v[:, j])
            if ok.sum() < min_periods:
                continue
            if i == j:
                out.iloc[i, j] = 0.0
                continue
            p = _quiet(lambda: fns[method](v[ok, i], v[ok, j]).pvalue)
            out.iloc[i, j] = out.iloc[j, i] = p
    return out


# -- TIFA-Table-2-like tables ------------------------------------------------------------------------
STATISTIC_LABELS: Mapping[str, str] = {
    "spearman": "Spearman's ρ",
    "kendall_b": "Kendall's τ_b",
    "kendall_c": "Kendall's τ_c",
    "pearson": "Pearson's r",
    "pairwise_acc": "Pairwise acc_eq",
}


def human_table(results: pd.DataFrame, grouping: str = "global",
                statistics: Sequence[str] = ("spearman", "kendall_b"),
                labels: Mapping[str, str] | None = None, metrics: Sequence[str] | None = None,
                scale: float = 100.0, with_ci: bool = False) -> pd.DataFrame:
    """A table like TIFA's Table 2: one row per metric, one column per statistic (x ``scale``).

    Parameters
    ----------
    results : DataFrame
        Long results with columns ``metric, statistic, grouping, value, ci_low, ci_high`` (as in
        ``human_metametrics.csv``).
    grouping : str
    statistics : sequence of str
        Columns, in order (labels from :data:`STATISTIC_LABELS`).
    labels : mapping, optional
        Metric display names for the index.
    metrics : sequence, optional
        Row order (default: first appearance in ``results``).
    scale : float
        100 prints percentages like the paper.
    with_ci : bool
        Add ``<stat> low`` / ``<stat> high`` columns.

    Raises
    ------
    ValueError
        Missing columns, or no rows for ``grouping``.
    """
    need = {"metric", "statistic", "grouping", "value"}
    if not need <= set(results.columns):
        raise ValueError(f"expected result columns {sorted(need)}, got {list(results.columns)}")
    sub = results[(results["grouping"] == grouping) & results["statistic"].isin(statistics)]
    if sub.empty:
        raise ValueError(f"expected results for grouping {grouping!r} and statistics {list(statistics)}, found none")
    order = list(metrics) if metrics is not None else list(dict.fromkeys(sub["metric"]))
    labels = labels or {}
    table = pd.DataFrame(index=pd.Index([labels.get(m, m) for m in order], name="metric"))
    for st in statistics:
        rows = sub[sub["statistic"] == st].set_index("metric")
        col = STATISTIC_LABELS.get(st, st)
        table[col] = [scale * float(rows["value"].get(m, np.nan)) for m in order]
        if with_ci and {"ci_low", "ci_high"} <= set(rows.columns):
            table[f"{col} low"] = [scale * float(rows["ci_low"].get(m, np.nan)) for m in order]
            table[f"{col} high"] = [scale * float(rows["ci_high"].get(m, np.nan)) for m in order]
    return table


def table_to_markdown(table: pd.DataFrame, digits: int = 1) -> str:
    """GitHub markdown of a numeric table (index as first column, NaN as an en dash)."""
    def fmt(v) -> str:
        return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"

    head = [table.index.name or "", *map(str, table.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for name, row in table.iterrows():
        lines.append("| " + " | ".join([str(name), *(fmt(float(v)) for v in row)]) + " |")
    return "\n".join(lines) + "\n"


def write_human_table(results: pd.DataFrame, path: str | Path, fmt: str | None = None,
                      groupings: Iterable[str] = GROUPINGS,
                      statistics: Sequence[str] = ("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc"),
                      labels: Mapping[str, str] | None = None, metrics: Sequence[str] | None = None,
                      digits: int = 1) -> Path:
    """Write :func:`human_table` for each grouping as markdown (``.md``) or CSV (``.csv``).

    Markdown: one titled table per grouping. CSV: the tables stacked with a ``grouping``
    column, values x100 unrounded. Groupings without results are left out.

    Raises
    ------
    ValueError
        Unknown format, or no grouping had results.
    """
    p = Path(path)
    fmt = (fmt or p.suffix.lstrip(".")).lower()
    if fmt not in {"md", "csv"}:
        raise ValueError(f"expected table format 'md' or 'csv', got {fmt!r}")
    titles = {"global": "Correlation with human judgments over all images (TIFA Table 2 setting), x100",
              "prompt": "Correlation with human judgments within prompts, averaged over prompts, x100"}
    parts: list[tuple[str, pd.DataFrame]] = []
    for g in groupings:
        try:
            parts.append((g, human_table(results, g, statistics, labels, metrics)))
        except ValueError:
            continue
    if not parts:
        raise ValueError(f"expected results for one of the groupings {list(groupings)}, found none")
    p.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "md":
        text = "\n".join(f"### {titles.get(g, g)}\n\n{table_to_markdown(t, digits)}" for g, t in parts)
        p.write_text(text, encoding="utf-8")
    else:
        pd.concat([t.assign(grouping=g) for g, t in parts]).to_csv(p)
    return p
