"""The vectorised human-view statistics against scipy / the scalar functions, call by call."""

import warnings

import numpy as np
import pytest
from scipy import stats as ss

from analysis.human.bootstrap import bootstrap_human_statistic, draw_clusters
from analysis.human.paired import permutation_test
from analysis.human.pairwise import grouped_pairwise_accuracy, tie_calibrated_pairwise_accuracy
from analysis.human.vectorized import bootstrap_statistics, grouped_statistics, swapped_kendall_b_diffs
from analysis.stats import draw_counts

STATS = ["spearman", "pearson", "kendall_b", "kendall_c"]


def _scipy(st, x, y):
    if len(x) < 2:
        return np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if st == "spearman":
            return ss.spearmanr(x, y).statistic
        if st == "pearson":
            return ss.pearsonr(x, y).statistic
        return ss.kendalltau(x, y, variant=st[-1]).statistic


def _data(seed, ties, n=48, G=10):
    rng = np.random.default_rng(seed)
    codes = np.r_[np.arange(G), rng.integers(0, G, n - G)]
    x = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
    y = rng.integers(1, 4, n).astype(float)  # Likert-like: many ties, constant prompts happen
    b = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
    return rng, codes, x, y, b, G


def _resample(codes, draws_row):
    return np.concatenate([np.flatnonzero(codes == k) for k in draws_row])


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("st", STATS)
def test_grouped_statistics_match_scipy_per_group(st, ties):
    for seed in range(4):
        _, codes, x, y, _, G = _data(seed, ties)
        got = grouped_statistics(x, y, codes, G, st)
        ref = np.array([_scipy(st, x[codes == g], y[codes == g]) for g in range(G)])
        np.testing.assert_allclose(got, ref, atol=1e-12)


def test_grouped_statistics_constant_and_singleton_groups_are_nan():
    x = np.array([1.0, 1.0, 1.0, 2.0, 5.0])
    y = np.array([1.0, 2.0, 3.0, 2.0, 4.0])
    codes = np.array([0, 0, 0, 1, 2])
    for st in STATS:
        assert np.isnan(grouped_statistics(x, y, codes, 3, st)).all()


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("st", STATS)
def test_bootstrap_statistics_match_scipy_on_resampled_items(st, ties):
    rng, codes, x, y, _, G = _data(7, ties)
    draws = rng.integers(0, G, (25, G))
    got = bootstrap_statistics(x, y, codes, G, draw_counts(draws, G), st)
    ref = np.array([_scipy(st, x[_resample(codes, d)], y[_resample(codes, d)]) for d in draws])
    if st.startswith("kendall"):
        np.testing.assert_array_equal(got, ref)  # same integer counts, same formula: bit-exact
    else:
        np.testing.assert_allclose(got, ref, atol=1e-12)


@pytest.mark.parametrize("ties", [False, True])
def test_swapped_kendall_matches_scipy_per_permutation(ties):
    rng, codes, x, y, b, G = _data(3, ties)
    flips = rng.random((30, G)) < 0.5
    got = swapped_kendall_b_diffs(x, b, y, codes, G, flips)
    ref = [_scipy("kendall_b", np.where(f[codes], b, x), y) - _scipy("kendall_b", np.where(f[codes], x, b), y)
           for f in flips]
    np.testing.assert_array_equal(got, ref)


def test_permutation_test_global_kendall_equals_loop_p_value():
    rng, codes, x, y, b, G = _data(5, False)
    t = permutation_test(x, b, y, codes, "kendall_b", "global", n_perm=200, seed=1)
    za, zb = (x - x.mean()) / x.std(), (b - b.mean()) / b.std()
    flips = np.random.default_rng(1).random((200, G)) < 0.5
    obs = _scipy("kendall_b", za, y) - _scipy("kendall_b", zb, y)
    perm = np.array([_scipy("kendall_b", np.where(f[codes], zb, za), y)
                     - _scipy("kendall_b", np.where(f[codes], za, zb), y) for f in flips])
    assert t.p_value == (1 + int((np.abs(perm) >= abs(obs) - 1e-12).sum())) / 201


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("grouping", ["global", "prompt"])
def test_pairwise_bootstrap_matches_materialized_resamples(grouping, ties):
    _, codes, x, y, _, G = _data(11, ties, n=40, G=8)
    n_boot = 30
    r = bootstrap_human_statistic(x, y, codes, "pairwise_acc", grouping, n_boot=n_boot, seed=4, confidence=0.9)
    reps = []
    for d in draw_clusters(G, n_boot, 4):
        idx = _resample(codes, d)
        lab = np.repeat(np.arange(G), [int((codes == k).sum()) for k in d])  # copies are distinct prompts
        if grouping == "global":
            reps.append(tie_calibrated_pairwise_accuracy(x[idx], y[idx]).accuracy)
        else:
            reps.append(grouped_pairwise_accuracy(x[idx], y[idx], lab).accuracy)
    lo, hi = np.quantile(reps, [0.05, 0.95])
    assert r.low == pytest.approx(lo, abs=1e-12) and r.high == pytest.approx(hi, abs=1e-12)


def test_csv_table_carries_the_intervals(tmp_path):
    import pandas as pd

    from analysis.human.tables import write_human_table

    res = pd.DataFrame({"metric": ["m", "m"], "statistic": ["kendall_b", "kendall_b"],
                        "grouping": ["global", "prompt"], "value": [0.25, 0.5],
                        "ci_low": [0.125, 0.375], "ci_high": [0.375, 0.625]})
    t = pd.read_csv(write_human_table(res, tmp_path / "t.csv", statistics=["kendall_b"]))
    assert t["Kendall's τ_b low"].tolist() == [12.5, 37.5]
    assert t["Kendall's τ_b high"].tolist() == [37.5, 62.5]
