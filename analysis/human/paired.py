"""Paired tests between two metrics on the same items: Williams' test and prompt-swap permutations."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as ss

from ..stats import sign_flip_pvalues, williams_test
from ._common import _groups_codes, _progress
from .correlation import (
    GROUPINGS,
    STATISTICS,
    get_statistic,
    grouped_correlation,
    human_statistic,
)
from .vectorized import swapped_kendall_b_diffs, swapped_pearson_diffs


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


def _three_vectors(a, b, human) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two metrics' scores and the human judgments as float vectors of one length (both paired tests)."""
    a, b, h = (np.asarray(x, dtype=float) for x in (a, b, human))
    if not (a.shape == b.shape == h.shape) or a.ndim != 1:
        raise ValueError(f"expected three 1-D vectors of equal length, got {a.shape}, {b.shape}, {h.shape}")
    return a, b, h


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
    a, b, h = _three_vectors(a, b, human)
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
    sign of its per-prompt difference, so the test is :func:`analysis.stats.sign_flip_pvalues`
    on those differences (the one paired sign-flip test of the project: every sign vector is
    enumerated when ``2**n_prompts <= n_perm``, else ``n_perm`` random ones); prompts where either metric's value is undefined are left out, and
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
    a, b, h = _three_vectors(a, b, human)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), len(a))
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if nan_policy == "raise" and not keep.all():
        raise ValueError(f"expected finite scores, got {(~keep).sum()} NaN/inf (pass nan_policy='omit')")
    a, b, h = a[keep], b[keep], h[keep]
    codes, uniq = _groups_codes(np.asarray(uniq[codes[keep]], dtype=object), len(a))
    G = len(uniq)
    if len(a) < 2:  # nothing to compare (e.g. a metric without any score): an undefined test, not a crash
        return PairedTest("permutation", statistic, grouping, math.nan, math.nan, math.nan, math.nan,
                          math.nan, 0, n_perm)
    rng = np.random.default_rng(seed)

    if grouping == "prompt" and statistic != "pairwise_acc":
        return _per_prompt_sign_flip_test(a, b, h, uniq[codes], statistic, n_perm, rng)

    flips = rng.random((n_perm, G)) < 0.5
    za, zb = _standardize(a, standardize), _standardize(b, standardize)
    labels = uniq[codes]

    def diff(x1, x2) -> float:
        return (human_statistic(x1, h, labels, statistic, grouping)
                - human_statistic(x2, h, labels, statistic, grouping))

    va = human_statistic(a, h, labels, statistic, grouping)
    vb = human_statistic(b, h, labels, statistic, grouping)
    obs = diff(za, zb)
    if statistic == "kendall_b" and grouping == "global":
        # All permutations at once from per-prompt-pair counts (same values as the loop below).
        perm = swapped_kendall_b_diffs(za, zb, h, codes, G, flips)
    elif statistic == "pearson" and grouping == "global":
        perm = swapped_pearson_diffs(za, zb, h, codes, G, flips)  # sums linear in the flips (= the loop)
    else:
        perm = np.empty(n_perm)
        for k in _progress(range(n_perm), progress, f"permutation {statistic}/{grouping}"):
            swap = flips[k][codes]
            perm[k] = diff(np.where(swap, zb, za), np.where(swap, za, zb))
    ok = np.isfinite(perm)
    p = (1 + int((np.abs(perm[ok]) >= abs(obs) - 1e-12).sum())) / (1 + int(ok.sum())) if math.isfinite(obs) \
        else math.nan
    n = G if grouping == "prompt" else len(a)
    return PairedTest("permutation", statistic, grouping, va, vb, va - vb, math.nan, p, n, n_perm)


def _per_prompt_sign_flip_test(a: np.ndarray, b: np.ndarray, h: np.ndarray, labels: np.ndarray, statistic: str,
                               n_perm: int, rng: np.random.Generator) -> PairedTest:
    """:func:`permutation_test` of a correlation within prompts: swapping a prompt's scores flips the sign
    of its per-prompt difference, so the test is the shared paired sign-flip test on those differences
    (exact when the prompts are few enough to enumerate every sign vector), over the prompts where
    both metrics' values are defined."""
    pa = grouped_correlation(a, h, labels, statistic).per_group
    pb = grouped_correlation(b, h, labels, statistic).per_group
    ok = np.isfinite(pa) & np.isfinite(pb)
    n_ok = int(ok.sum())
    if n_ok == 0:
        return PairedTest("permutation", statistic, "prompt", math.nan, math.nan, math.nan, math.nan,
                          math.nan, 0, n_perm)
    va, vb = float(pa[ok].mean()), float(pb[ok].mean())
    p = float(sign_flip_pvalues(pa[ok] - pb[ok], n_perm, rng)[0])
    return PairedTest("permutation", statistic, "prompt", va, vb, va - vb, math.nan, p, n_ok, n_perm)


def pairwise_acc_permutation_test(a, b, human, groups, grouping: str = "global", n_perm: int = 1000,
                                  seed: int | None = 0, nan_policy: str = "raise") -> PairedTest:
    """Paired permutation test of two metrics' tie-calibrated pairwise accuracies, over item pairs.

    mt-metrics-eval's ``PairwisePermutationSigDiff`` (the test it uses for ``acc23``): each metric
    keeps its own calibrated tie threshold (re-calibrating per permutation is what makes a
    score-swapping test too slow), every item pair is scored correct or not for each metric, and
    under H0 the two metrics' outcomes on a pair are exchangeable. A permutation swaps them pair
    by pair with probability 1/2, which flips the sign of the pair's weighted difference
    ``w_p (correct_a - correct_b)``; ``p`` is the sign-flip p-value of their sum
    (:func:`analysis.stats.sign_flip_pvalues`). Pooled (``global``) every pair weighs the same,
    so the number of flips that favour ``a`` is binomial and ``p`` is the exact two-sided binomial
    test (``n_perm`` is not used); within prompts a pair of prompt ``g`` weighs ``1 / (P_g G)``
    as in :func:`analysis.human.grouped_pairwise_accuracy`.

    Returns
    -------
    PairedTest
        ``test="pair_permutation"``; ``value_a``/``value_b`` are the accuracies on the items both
        metrics scored; ``n`` the pairs whose outcome differs.
    """
    from .pairwise import _calibrate, _pair_arrays, _within_group_pairs

    if grouping not in GROUPINGS:
        raise ValueError(f"expected grouping in {list(GROUPINGS)}, got {grouping!r}")
    a, b, h = _three_vectors(a, b, human)
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if nan_policy == "raise" and not keep.all():
        raise ValueError(f"expected finite scores, got {(~keep).sum()} NaN/inf (pass nan_policy='omit')")
    codes, _ = _groups_codes(np.asarray(groups, dtype=object)[keep], int(keep.sum()))
    a, b, h = a[keep], b[keep], h[keep]
    if grouping == "global":
        i, j = np.triu_indices(len(a), 1)
        w = np.ones(len(i))
    else:
        i, j, g = _within_group_pairs(codes)
        ppg = np.bincount(g, minlength=int(codes.max(initial=-1)) + 1).astype(float)
        w = 1.0 / (ppg[g] * max(int((ppg > 0).sum()), 1))
    if len(i) == 0:
        return PairedTest("pair_permutation", "pairwise_acc", grouping, math.nan, math.nan, math.nan, math.nan,
                          math.nan, 0, n_perm)
    correct = []
    for x in (a, b):
        d, agree, htie = _pair_arrays(x, h, i, j)
        eps = _calibrate(d, agree, htie, w).epsilon
        correct.append(np.where(d <= eps, htie, agree).astype(float))
    diff = w * (correct[0] - correct[1])
    va, vb = float((w * correct[0]).sum() / w.sum()), float((w * correct[1]).sum() / w.sum())
    nz = diff != 0
    n_nz = int(nz.sum())
    if n_nz == 0:
        p = 1.0
    elif grouping == "global":
        wins = int((diff > 0).sum())
        p = float(ss.binomtest(wins, n_nz, 0.5).pvalue)
    else:
        p = float(sign_flip_pvalues(diff[nz], n_perm, np.random.default_rng(seed))[0])
    return PairedTest("pair_permutation", "pairwise_acc", grouping, va, vb, va - vb, math.nan, p, n_nz, n_perm)


def bootstrap_paired_pvalue(reps_a, reps_b, observed_diff: float) -> float:
    """Two-sided p-value of ``value_a == value_b`` from paired bootstrap replicates of both statistics.

    The replicates must come from the same draws (the same resampled prompts for both metrics).
    A Wald test with the bootstrap standard error of the difference:
    ``z = observed_diff / sd(a* - b*)`` (``ddof=1``, over the replicates where both are defined),
    ``p = 2 (1 - Phi(|z|))``. Unlike counting replicates on the far side of zero, its p-values are
    not floored at ``2 / (B + 1)``, so they survive a Holm correction over many pairs. NaN when
    ``observed_diff`` is NaN or fewer than 2 replicates are defined; 1 when nothing varies and the
    difference is 0, 0 when nothing varies and it is not.

    Examples
    --------
    >>> round(bootstrap_paired_pvalue([0.6, 0.7, 0.8, 0.65], [0.5, 0.5, 0.5, 0.7], 0.1), 3)
    0.503
    """
    d = np.asarray(reps_a, dtype=float) - np.asarray(reps_b, dtype=float)
    d = d[np.isfinite(d)]
    if not math.isfinite(observed_diff) or len(d) < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    if sd == 0:
        return 1.0 if observed_diff == 0 else 0.0
    return float(2 * ss.norm.sf(abs(observed_diff) / sd))


def paired_test(a, b, human, groups, statistic: str, grouping: str, n_perm: int = 1000, seed: int | None = 0,
                nan_policy: str = "omit", replicates=None) -> PairedTest:
    """The paired test of ``statistic`` between metrics ``a`` and ``b`` that the significance clusters use.

    ``pairwise_acc``: a paired cluster-bootstrap test (:func:`bootstrap_paired_pvalue`, Wald with
    the bootstrap standard error): ``n_perm`` replicates drawing the same prompts for both
    metrics, each metric's tie threshold re-fitted in every replicate (the pair-level permutation test of mt-metrics-eval,
    :func:`pairwise_acc_permutation_test`, treats the n(n-1)/2 pairs as independent although
    pairs sharing an image or a prompt are not, and so finds tiny differences significant).
    ``replicates`` may pass both metrics' replicates (same draws) to skip recomputing them.
    Every other statistic: :func:`permutation_test` swapping prompts (scores rank-normalised for
    ``roc_auc``, z-scored otherwise).
    """
    if statistic != "pairwise_acc":
        return permutation_test(a, b, human, groups, statistic, grouping, n_perm, seed,
                                standardize="rank" if statistic == "roc_auc" else "zscore", nan_policy=nan_policy)
    from .bootstrap import bootstrap_replicates, draw_clusters

    a, b, h = _three_vectors(a, b, human)
    keep = np.isfinite(a) & np.isfinite(b) & np.isfinite(h)
    if nan_policy == "raise" and not keep.all():
        raise ValueError(f"expected finite scores, got {(~keep).sum()} NaN/inf (pass nan_policy='omit')")
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object)[keep], int(keep.sum()))
    a, b, h = a[keep], b[keep], h[keep]
    labels = uniq[codes]
    va, vb = (human_statistic(x, h, labels, statistic, grouping) for x in (a, b))
    if len(a) < 2 or n_perm < 1:
        return PairedTest("bootstrap", statistic, grouping, va, vb, va - vb, math.nan, math.nan, len(a), 0)
    if replicates is None:
        draws = draw_clusters(len(uniq), n_perm, seed)
        replicates = [bootstrap_replicates(x, h, codes, len(uniq), draws, statistic, grouping) for x in (a, b)]
    p = bootstrap_paired_pvalue(replicates[0], replicates[1], va - vb)
    n = len(a) if grouping == "global" else len(uniq)
    return PairedTest("bootstrap", statistic, grouping, va, vb, va - vb, math.nan, p, n, len(replicates[0]))
