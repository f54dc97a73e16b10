"""Statistics of the human view (analysis/human.py, analysis/views.py) against scipy or plain loops."""

from __future__ import annotations

import math
from dataclasses import astuple
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats as ss

from analysis import human as H
from analysis.stats import WilliamsResult, williams_test
from analysis.views import compare_views, view_values


# -- plain-loop references ---------------------------------------------------------------------
def ref_kendall(x, y):
    """tau-b and tau-c from concordant/discordant/tie counts over all pairs."""
    n = len(x)
    c = d = tx = ty = 0
    for i, j in combinations(range(n), 2):
        sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if sx == 0:
            tx += 1
        if sy == 0:
            ty += 1
        if sx * sy > 0:
            c += 1
        elif sx * sy < 0:
            d += 1
    p = n * (n - 1) / 2
    tau_b = (c - d) / math.sqrt((p - tx) * (p - ty)) if (p - tx) * (p - ty) > 0 else math.nan
    m = min(len(set(x)), len(set(y)))
    tau_c = 2 * (c - d) / (n * n * (m - 1) / m) if m > 1 else math.nan
    return tau_b, tau_c


def ref_ranks(v):
    return np.array([1 + sum(w < a for w in v) + (sum(w == a for w in v) - 1) / 2 for a in v], dtype=float)


def ref_pearson(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else math.nan


def ref_acc_eq(x, y, eps, pairs):
    """acc_eq at threshold eps over the given pairs, by the definition."""
    good = 0
    for i, j in pairs:
        mt = abs(x[i] - x[j]) <= eps
        ht = y[i] == y[j]
        if mt and ht:
            good += 1
        elif not mt and not ht and np.sign(x[i] - x[j]) == np.sign(y[i] - y[j]):
            good += 1
    return good / len(pairs)


def ref_tie_calibrated(x, y):
    pairs = list(combinations(range(len(x)), 2))
    cands = sorted({0.0} | {abs(x[i] - x[j]) for i, j in pairs})
    best = max(cands, key=lambda e: (ref_acc_eq(x, y, e, pairs), -e))
    return ref_acc_eq(x, y, best, pairs), best


def ref_grouped_tie_calibrated(x, y, groups):
    by = {}
    for k, g in enumerate(groups):
        by.setdefault(g, []).append(k)
    gp = [list(combinations(ix, 2)) for ix in by.values() if len(ix) >= 2]
    cands = sorted({0.0} | {abs(x[i] - x[j]) for ps in gp for i, j in ps})

    def avg(e):
        return sum(ref_acc_eq(x, y, e, ps) for ps in gp) / len(gp)

    best = max(cands, key=lambda e: (round(avg(e), 12), -e))
    return avg(best), best


def ref_alpha(data, level):
    """Krippendorff's alpha from its definition (pairable values, coincidences)."""
    units = [[v for v in col if not math.isnan(v)] for col in np.asarray(data, float).T]
    units = [u for u in units if len(u) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    domain = sorted(set(values))
    freq = {c: values.count(c) for c in domain}

    def delta(a, b):
        if level == "interval":
            return (a - b) ** 2
        lo, hi = min(a, b), max(a, b)  # ordinal
        return (sum(freq[g] for g in domain if lo <= g <= hi) - (freq[a] + freq[b]) / 2) ** 2

    do = sum(delta(u[i], u[j]) / (len(u) - 1) for u in units for i in range(len(u)) for j in range(len(u)) if i != j) / n
    de = sum(delta(values[i], values[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    return 1 - do / de


likert = st.integers(1, 5)
coarse = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])


@st.composite
def tie_heavy_pairs(draw, min_n=2, max_n=14):
    n = draw(st.integers(min_n, max_n))
    x = draw(st.lists(coarse, min_size=n, max_size=n))
    y = draw(st.lists(likert, min_size=n, max_size=n))
    return np.array(x), np.array(y, dtype=float)


# -- correlations -------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(tie_heavy_pairs())
def test_kendall_and_spearman_match_loops_on_likert(pair):
    x, y = pair
    rb, rc = ref_kendall(x, y)
    b, c = H.kendall_tau_b(x, y), H.kendall_tau_c(x, y)
    assert (math.isnan(b) and math.isnan(rb)) or b == pytest.approx(rb, abs=1e-12)
    assert (math.isnan(c) and math.isnan(rc)) or c == pytest.approx(rc, abs=1e-12)
    rs = ref_pearson(ref_ranks(x), ref_ranks(y))
    s = H.spearman(x, y)
    assert (math.isnan(s) and math.isnan(rs)) or s == pytest.approx(rs, abs=1e-12)
    rp = ref_pearson(x, y)
    p = H.pearson(x, y)
    assert (math.isnan(p) and math.isnan(rp)) or p == pytest.approx(rp, abs=1e-12)


def test_correlations_match_scipy_on_random_data():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=200), rng.integers(1, 6, size=200).astype(float)
    assert H.spearman(x, y) == pytest.approx(ss.spearmanr(x, y).statistic)
    assert H.kendall_tau_b(x, y) == pytest.approx(ss.kendalltau(x, y).statistic)
    assert H.kendall_tau_c(x, y) == pytest.approx(ss.kendalltau(x, y, variant="c").statistic)
    assert H.pearson(x, y) == pytest.approx(ss.pearsonr(x, y).statistic)
    # tau-b and tau-c differ on a continuous-vs-Likert table, so the variant really is applied.
    assert abs(H.kendall_tau_b(x, y) - H.kendall_tau_c(x, y)) > 1e-4


def test_hand_computed_kendall():
    # pairs of (x, y) = (1,1),(2,1),(2,2),(3,3): C=4, D=0, Tx=1, Ty=1 -> tau_b = 4/sqrt(5*5) = 0.8
    assert H.kendall_tau_b([1, 2, 2, 3], [1, 1, 2, 3]) == pytest.approx(0.8)
    # tau_c = 2*4 / (16 * 2/3) = 0.75
    assert H.kendall_tau_c([1, 2, 2, 3], [1, 1, 2, 3]) == pytest.approx(0.75)


def test_undefined_and_nan_policy():
    assert math.isnan(H.spearman([1, 1, 1], [1, 2, 3]))  # constant side
    assert math.isnan(H.kendall_tau_b([1.0], [2.0]))  # one item
    with pytest.raises(ValueError, match="NaN/inf at positions \\[1\\]"):
        H.kendall_tau_b([1, np.nan, 3], [1, 2, 3])
    assert H.kendall_tau_b([1, np.nan, 3, 4], [1, 2, 3, 5], nan_policy="omit") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="equal length"):
        H.spearman([1, 2], [1, 2, 3])
    with pytest.raises(KeyError, match="expected one of"):
        H.get_statistic("spearmann")


# -- pairwise accuracy ----------------------------------------------------------------------------
def test_pairwise_accuracy_hand_example():
    # metric [0.1, 0.2, 0.9], human [1, 1, 5]: with eps >= 0.1 the human tie is matched, the
    # two other pairs agree in sign -> 3/3. With eps = 0 only 2/3.
    r = H.tie_calibrated_pairwise_accuracy([0.1, 0.2, 0.9], [1, 1, 5])
    assert r.accuracy == pytest.approx(1.0)
    assert r.epsilon == pytest.approx(0.1)
    assert r.n_pairs == 3
    # A reversed metric: every non-tied pair is wrong; best is tying everything? ties only help
    # the human-tied pair (1 of 3) -> eps = 0.1 gives 1/3, eps = 0.8 (all tied) also 1/3: smallest wins.
    r = H.tie_calibrated_pairwise_accuracy([0.9, 0.8, 0.1], [1, 1, 5])
    assert r.accuracy == pytest.approx(1 / 3)
    assert r.epsilon == pytest.approx(0.1)


def test_pairwise_accuracy_exact_metric_ties_are_always_ties():
    # Two metric-tied items with different human ratings: no threshold makes that pair right.
    r = H.tie_calibrated_pairwise_accuracy([0.5, 0.5], [1, 2])
    assert r.accuracy == 0.0 and r.epsilon == 0.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tie_heavy_pairs(min_n=2, max_n=12))
def test_tie_calibration_matches_brute_force(pair):
    x, y = pair
    acc, eps = ref_tie_calibrated(list(x), list(y))
    r = H.tie_calibrated_pairwise_accuracy(x, y)
    assert r.accuracy == pytest.approx(acc, abs=1e-12)
    assert r.epsilon == pytest.approx(eps, abs=1e-12)
    assert H.pairwise_accuracy(x, y) == r.accuracy


def test_tie_calibration_matches_brute_force_continuous():
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=25).round(2), rng.integers(1, 6, size=25).astype(float)
    acc, eps = ref_tie_calibrated(list(x), list(y))
    r = H.tie_calibrated_pairwise_accuracy(x, y)
    assert (r.accuracy, r.epsilon) == pytest.approx((acc, eps), abs=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tie_heavy_pairs(min_n=4, max_n=14), st.integers(1, 4))
def test_grouped_tie_calibration_matches_brute_force(pair, n_groups):
    x, y = pair
    groups = [f"p{k % n_groups}" for k in range(len(x))]
    r = H.grouped_pairwise_accuracy(x, y, groups)
    if len(x) <= n_groups:  # every prompt has one image: no pair to compare
        assert math.isnan(r.accuracy) and r.n_pairs == 0
        return
    acc, eps = ref_grouped_tie_calibrated(list(x), list(y), groups)
    assert r.accuracy == pytest.approx(acc, abs=1e-9)
    # Equal averages at different thresholds can differ in the last bits; compare the accuracy
    # the reference gets at our epsilon instead of the epsilons themselves.
    by = {}
    for k, g in enumerate(groups):
        by.setdefault(g, []).append(k)
    gp = [list(combinations(ix, 2)) for ix in by.values() if len(ix) >= 2]
    at_ours = sum(ref_acc_eq(list(x), list(y), r.epsilon, ps) for ps in gp) / len(gp)
    assert at_ours == pytest.approx(acc, abs=1e-9)


def test_grouped_pairwise_only_compares_within_groups():
    # Across groups the metric is perfectly wrong, within groups perfectly right.
    x = [10, 11, 0, 1]
    y = [1, 2, 4, 5]
    g = ["a", "a", "b", "b"]
    assert H.grouped_pairwise_accuracy(x, y, g).accuracy == 1.0
    assert H.tie_calibrated_pairwise_accuracy(x, y).accuracy == pytest.approx(2 / 6)


# -- grouped correlations ------------------------------------------------------------------------
@pytest.mark.parametrize("statistic", ["spearman", "kendall_b", "kendall_c", "pearson"])
def test_grouped_correlation_matches_loop(statistic):
    rng = np.random.default_rng(5)
    groups = np.repeat([f"p{i}" for i in range(12)], 5)
    y = rng.integers(1, 6, size=60).astype(float)
    y[:5] = 3  # a prompt with all images rated alike: undefined, skipped
    x = y + rng.normal(scale=1.5, size=60)
    fn = {"spearman": lambda a, b: ss.spearmanr(a, b).statistic,
          "kendall_b": lambda a, b: ss.kendalltau(a, b).statistic,
          "kendall_c": lambda a, b: ss.kendalltau(a, b, variant="c").statistic,
          "pearson": lambda a, b: ss.pearsonr(a, b).statistic}[statistic]
    vals = []
    for g in dict.fromkeys(groups):
        m = groups == g
        if len(set(y[m])) > 1:
            vals.append(fn(x[m], y[m]))
    r = H.grouped_correlation(x, y, groups, statistic)
    assert r.n_groups == 12 and r.n_used == 11
    assert math.isnan(r.per_group[0])
    assert r.value == pytest.approx(np.mean(vals), abs=1e-12)
    assert H.human_statistic(x, y, groups, statistic, "prompt") == pytest.approx(r.value)
    assert H.human_statistic(x, y, groups, statistic, "global") == pytest.approx(fn(x, y))


def test_grouped_correlation_rejects_pairwise_and_bad_grouping():
    with pytest.raises(ValueError, match="grouped_pairwise_accuracy"):
        H.grouped_correlation([1, 2], [1, 2], ["a", "a"], "pairwise_acc")
    with pytest.raises(ValueError, match="grouping"):
        H.human_statistic([1, 2], [1, 2], ["a", "a"], "spearman", "seg")
    with pytest.raises(ValueError, match="group id"):
        H.grouped_correlation([1, 2], [1, 2], ["a", None], "spearman")


# -- Krippendorff's alpha --------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["interval", "ordinal"])
def test_krippendorff_matches_definition(level):
    rng = np.random.default_rng(8)
    true = rng.integers(1, 6, size=30)
    data = np.clip(true + rng.integers(-1, 2, size=(3, 30)), 1, 5).astype(float)
    data[0, :4] = np.nan  # missing ratings
    data[1:, 5] = np.nan  # a unit rated once: not pairable
    assert H.krippendorff_alpha(data, level) == pytest.approx(ref_alpha(data, level), abs=1e-10)


def test_krippendorff_hand_example_and_errors():
    # values 1,1,2,2,3,3,4,5: D_o = 2/8, D_e = 222/56
    assert H.krippendorff_alpha([[1, 2, 3, 4], [1, 2, 3, 5]]) == pytest.approx(1 - (2 / 8) / (222 / 56))
    with pytest.raises(ValueError, match="undefined"):
        H.krippendorff_alpha([[3, 3, 3], [3, 3, 3]])
    with pytest.raises(ValueError, match="raters >= 2"):
        H.krippendorff_alpha([[1, 2, 3]])
    with pytest.raises(ValueError, match="level"):
        H.krippendorff_alpha([[1, 2], [1, 2]], "cardinal")


# -- bootstrap -------------------------------------------------------------------------------------
def _toy(seed=0, n_prompts=15, per=4):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"p{i}" for i in range(n_prompts)], per)
    q = rng.normal(size=n_prompts * per)
    y = np.clip(np.round(3 + 1.2 * q + rng.normal(scale=0.7, size=q.size)), 1, 5)
    x = np.round(q + rng.normal(scale=0.8, size=q.size), 1)
    return x, y, groups


@pytest.mark.parametrize("statistic,grouping", [("pairwise_acc", "global"), ("pairwise_acc", "prompt"),
                                                ("kendall_b", "prompt"), ("spearman", "global")])
def test_fast_bootstrap_equals_explicit_resampling(statistic, grouping):
    """The shortcuts (pair re-weighting, per-prompt means) give the replicates of copying data."""
    x, y, groups = _toy()

    def explicit(idx, lab):
        if grouping == "global":
            return H.get_statistic(statistic)(x[idx], y[idx])
        if statistic == "pairwise_acc":
            return H.grouped_pairwise_accuracy(x[idx], y[idx], lab).accuracy
        return H.grouped_correlation(x[idx], y[idx], lab, statistic).value

    ref = H.cluster_bootstrap(explicit, groups, n_boot=40, seed=4)
    fast = H.bootstrap_human_statistic(x, y, groups, statistic, grouping, n_boot=40, seed=4)
    assert fast.value == pytest.approx(ref.value, abs=1e-12)
    assert (fast.low, fast.high) == pytest.approx((ref.low, ref.high), abs=1e-9)
    assert fast.low <= fast.value <= fast.high
    assert fast.low < fast.high


def test_bootstrap_resamples_prompts_not_images():
    # Perfect agreement within each prompt, so any resampling of whole prompts keeps the
    # within-prompt tau at 1; resampling images independently would not.
    groups = np.repeat(["a", "b", "c", "d"], 3)
    x = np.tile([1.0, 2.0, 3.0], 4)
    y = np.tile([2.0, 3.0, 5.0], 4)
    r = H.bootstrap_human_statistic(x, y, groups, "kendall_b", "prompt", n_boot=50, seed=1)
    assert r.value == r.low == r.high == 1.0
    assert r.n_invalid == 0


def test_bootstrap_off_and_invalid_replicates():
    x, y, groups = _toy()
    r = H.bootstrap_human_statistic(x, y, groups, "kendall_b", "global", n_boot=0)
    assert math.isnan(r.low) and math.isnan(r.high) and r.n_boot == 0
    assert r.value == pytest.approx(ss.kendalltau(x, y).statistic)
    # Only one prompt has variation: most replicates miss it and are reported invalid.
    groups = np.repeat(["a", "b", "c", "d", "e", "f"], 2)
    yy = np.array([1, 2] + [3, 3] * 5, dtype=float)
    xx = np.arange(12, dtype=float)
    r = H.bootstrap_human_statistic(xx, yy, groups, "spearman", "prompt", n_boot=200, seed=0)
    assert 0 < r.n_invalid < 200


def test_bootstrap_alpha_interval_contains_value():
    rng = np.random.default_rng(2)
    true = rng.integers(1, 6, size=40)
    data = np.clip(true + rng.integers(-1, 2, size=(2, 40)), 1, 5).astype(float)
    groups = np.repeat(np.arange(10), 4)
    r = H.bootstrap_krippendorff_alpha(data, groups, "interval", n_boot=60, seed=0)
    assert r.value == pytest.approx(ref_alpha(data, "interval"))
    assert r.low <= r.value <= r.high


# -- paired tests ----------------------------------------------------------------------------------
def test_williams_matches_published_example():
    # psych::r.test(n = 103, r12 = .4, r13 = .5, r23 = .1): t = -0.89, p = 0.37. By hand:
    # |R| = 0.62, t = -0.1 * sqrt(102 * 1.1) / sqrt(2 * 0.62 * 102/100 + 0.45^2 * 0.9^3)
    t, p, df = astuple(williams_test(0.4, 0.5, 0.1, 103))
    assert df == 100
    assert t == pytest.approx(-0.1 * math.sqrt(102 * 1.1) / math.sqrt(2 * 0.62 * 1.02 + 0.2025 * 0.729), abs=1e-9)
    assert round(t, 2) == -0.89
    assert p == pytest.approx(2 * ss.t.sf(abs(t), 100))
    assert round(p, 2) == 0.37
    assert williams_test(0.5, 0.5, 0.3, 50) == WilliamsResult(0.0, 1.0, 47)
    with pytest.raises(ValueError, match="n > 3"):
        williams_test(0.4, 0.5, 0.1, 3)


def test_williams_on_metrics_uses_the_three_correlations():
    x, y, groups = _toy(seed=1, n_prompts=50)
    rng = np.random.default_rng(0)
    b = x + rng.normal(scale=3, size=x.size)
    r = H.williams_test_metrics(x, b, y, "spearman")
    w = williams_test(ss.spearmanr(x, y).statistic, ss.spearmanr(b, y).statistic, ss.spearmanr(x, b).statistic, len(x))
    assert (r.test_statistic, r.p_value) == pytest.approx((w.t, w.p))
    assert r.value_a > r.value_b and r.p_value < 0.05
    with pytest.raises(ValueError, match="Kendall|method"):
        H.williams_test_metrics(x, b, y, "kendall_b")


def test_grouped_permutation_equals_explicit_prompt_swaps():
    x, y, groups = _toy(seed=2)
    rng = np.random.default_rng(1)
    b = x + rng.normal(scale=1.5, size=x.size)
    n_perm, seed = 60, 9
    r = H.permutation_test(x, b, y, groups, "kendall_b", "prompt", n_perm=n_perm, seed=seed)
    # Explicit: swap whole prompts' scores between the metrics and recompute.
    codes, uniq = pd.factorize(groups)
    pa = H.grouped_correlation(x, y, groups, "kendall_b").per_group
    pb = H.grouped_correlation(b, y, groups, "kendall_b").per_group
    keep_g = np.isfinite(pa) & np.isfinite(pb)
    keep = keep_g[codes]
    # The sign vectors the shared sign-flip test draws (random here: 2**n_kept > n_perm), one
    # entry per kept prompt; -1 swaps that prompt's scores between the metrics.
    n_kept = int(keep_g.sum())
    assert 2 ** n_kept > n_perm
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n_perm, n_kept))
    flips = np.zeros((n_perm, len(uniq)), dtype=bool)
    flips[:, keep_g] = signs < 0
    obs = H.grouped_correlation(x[keep], y[keep], groups[keep], "kendall_b").value - \
        H.grouped_correlation(b[keep], y[keep], groups[keep], "kendall_b").value
    perm = []
    for f in flips:
        s = f[codes]
        a2, b2 = np.where(s, b, x), np.where(s, x, b)
        perm.append(H.grouped_correlation(a2[keep], y[keep], groups[keep], "kendall_b").value
                    - H.grouped_correlation(b2[keep], y[keep], groups[keep], "kendall_b").value)
    p = (1 + sum(abs(v) >= abs(obs) - 1e-12 for v in perm)) / (1 + n_perm)
    assert r.diff == pytest.approx(obs, abs=1e-12)
    assert r.p_value == pytest.approx(p)
    assert r.n == int(keep_g.sum())


def test_permutation_test_detects_a_better_metric_and_not_a_copy():
    x, y, groups = _toy(seed=3, n_prompts=30)
    noise = np.random.default_rng(7).normal(size=x.size)
    r = H.permutation_test(x, noise, y, groups, "kendall_b", "global", n_perm=99, seed=0)
    assert r.value_a > r.value_b and r.p_value == pytest.approx(1 / 100)
    same = H.permutation_test(x, x.copy(), y, groups, "kendall_b", "global", n_perm=20, seed=0)
    assert same.diff == 0 and same.p_value == 1.0
    # Grouped pairwise accuracy (shared epsilon) goes through the recompute path.
    pa = H.permutation_test(x, x.copy(), y, groups, "pairwise_acc", "prompt", n_perm=10, seed=0)
    assert pa.diff == 0 and pa.p_value == 1.0 and pa.value_a == pytest.approx(
        H.grouped_pairwise_accuracy(x, y, groups).accuracy)
    better = H.permutation_test(x, noise, y, groups, "pairwise_acc", "prompt", n_perm=30, seed=0)
    assert better.diff > 0 and better.p_value < 0.1
    # A rescaled copy is the same metric for rank statistics: no difference either.
    scaled = H.permutation_test(x, 30 + 5 * x, y, groups, "spearman", "global", n_perm=20, seed=0)
    assert scaled.diff == pytest.approx(0) and scaled.p_value == 1.0


# -- metric-metric matrix, tables, views --------------------------------------------------------
def test_metric_correlation_matrix_matches_scipy_pairwise_complete():
    rng = np.random.default_rng(4)
    df = pd.DataFrame(rng.normal(size=(50, 3)), columns=["a", "b", "c"])
    df["b"] = df["a"] + rng.normal(scale=0.5, size=50)
    df.loc[:4, "c"] = np.nan
    m = H.metric_correlation_matrix(df)
    ok = df["c"].notna()
    assert m.loc["a", "c"] == pytest.approx(ss.spearmanr(df["a"][ok], df["c"][ok]).statistic)
    assert m.loc["a", "b"] == pytest.approx(ss.spearmanr(df["a"], df["b"]).statistic)
    assert m.loc["b", "b"] == 1.0
    p = H.metric_correlation_pvalues(df)
    assert p.loc["c", "a"] == pytest.approx(ss.spearmanr(df["a"][ok], df["c"][ok]).pvalue)
    with pytest.raises(ValueError, match="non-numeric"):
        H.metric_correlation_matrix(df.assign(d="x"))


def test_table_writer(tmp_path):
    res = pd.DataFrame({
        "metric": ["m1", "m1", "m2", "m2", "m1"],
        "statistic": ["spearman", "kendall_b", "spearman", "kendall_b", "kendall_b"],
        "grouping": ["global"] * 4 + ["prompt"],
        "value": [0.183, 0.1879, 0.597, 0.4717, 0.2], "ci_low": 0.0, "ci_high": 1.0})
    t = H.human_table(res, "global", labels={"m1": "BLEU-4"})
    assert list(t.index) == ["BLEU-4", "m2"]
    assert t.loc["BLEU-4", "Kendall's τ_b"] == pytest.approx(18.79)
    md = H.write_human_table(res, tmp_path / "t.md", statistics=("spearman", "kendall_b"),
                             labels={"m1": "BLEU-4"}, with_ci=False).read_text()
    assert "| BLEU-4 | 18.3 | 18.8 |" in md
    assert "| m2 | 59.7 | 47.2 |" in md
    assert "| BLEU-4 | – | 20.0 |" in md  # the prompt table has no Spearman row
    md = H.write_human_table(res.assign(ci_low=[0.1, 0.15, 0.5, 0.4, np.nan]), tmp_path / "t.md",
                             statistics=("spearman", "kendall_b"), labels={"m1": "BLEU-4"}, confidence=0.9).read_text()
    assert "| BLEU-4 | 18.3 [10.0, 100.0] | 18.8 [15.0, 100.0] |" in md and "90% prompt-bootstrap" in md
    assert "| BLEU-4 | – | 20.0 |" in md  # no interval where a bound is missing
    csv = pd.read_csv(H.write_human_table(res, tmp_path / "t.csv", statistics=("spearman", "kendall_b")))
    assert set(csv["grouping"]) == {"global", "prompt"}
    with pytest.raises(ValueError, match="format"):
        H.write_human_table(res, tmp_path / "t.txt")


def test_compare_views():
    seg = {"a": 0.9, "b": 0.5, "c": 0.7, "d": 0.1, "z": np.nan}
    hum = {"a": 0.40, "b": 0.30, "c": 0.45, "d": 0.20, "e": 0.9}
    v = compare_views(seg, hum)
    assert v.seg_order == ("a", "c", "b", "d")
    assert v.human_order == ("c", "a", "b", "d")
    # one discordant pair (a, c) of 6 -> tau = (5 - 1) / 6
    assert v.tau == pytest.approx(4 / 6)
    assert v.tau == pytest.approx(ss.kendalltau([0.9, 0.5, 0.7, 0.1], [0.4, 0.3, 0.45, 0.2]).statistic)
    assert v.only_human == ("e",) and v.only_seg == () and v.n == 4
    assert v.table["rank_shift"].tolist() == [1, -1, 0, 0]
    # A SEG statistic where lower is better reverses the SEG order.
    w = compare_views(seg, hum, seg_higher_is_better=False)
    assert w.seg_order == ("d", "b", "c", "a") and w.tau == pytest.approx(-4 / 6)
    assert math.isnan(compare_views({"a": 1}, {"a": 2}).tau)
    with pytest.raises(ValueError, match="expected a number"):
        compare_views({"a": "high"}, hum)


def test_view_values():
    res = pd.DataFrame({"metric": ["human", "a", "b", "a"], "statistic": ["kendall_b"] * 3 + ["spearman"],
                        "grouping": ["global"] * 4, "value": [0.7, 0.3, 0.5, 0.1]})
    assert view_values(res) == {"a": 0.3, "b": 0.5}
    with pytest.raises(ValueError, match="found none"):
        view_values(res, grouping="prompt")


@pytest.mark.parametrize("grouping", ["global", "prompt"])
def test_permutation_test_with_a_metric_without_scores_is_undefined_not_a_crash(grouping):
    # A metric that scored nothing (all NaN) used to raise IndexError deep in the vectorised
    # Kendall counts; with nan_policy="omit" nothing is left to compare: NaN p, n = 0.
    x, y, groups = _toy(seed=3)
    r = H.permutation_test(np.full_like(x, np.nan), x, y, groups, "kendall_b", grouping, n_perm=20,
                           nan_policy="omit")
    assert np.isnan(r.p_value) and r.n == 0
