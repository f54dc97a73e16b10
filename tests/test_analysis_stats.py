"""Bootstrap CIs, paired comparisons, permutation p-values, Holm, ranking groups, Pareto frontier."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.compare import compare_metrics, rank_metrics
from analysis.pareto import pareto_front, pareto_mask, parse_flops
from analysis.pipeline import analyze
from analysis.stats import (
    bca_ci,
    bootstrap_group_means,
    group_means,
    holm,
    percentile_ci,
    sign_flip_pvalues,
    stratified_counts,
)


def synthetic_scores(n_segs: int = 40, seed: int = 0) -> pd.DataFrame:
    """Random TS2-like SEGs; 'good' follows the error count, 'copy' is a monotone transform of it,
    'noise' ignores it."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        for lev in range(int(rng.integers(2, 5))):
            for v in range(int(rng.integers(1, 3))):
                label = f"{lev}{'ab'[v]}"
                for k in range(int(rng.integers(1, 4))):
                    good = 1 - 0.2 * lev + rng.normal(0, 0.15)
                    rows.append({"seg_id": str(s), "node": label, "file_name": f"{s}-{label}-{k}", "good": good,
                                 "copy": np.exp(3 * good), "noise": rng.random(),
                                 "subset": "A" if s < n_segs // 2 else "B"})
    return pd.DataFrame(rows)


# -- bootstrap ---------------------------------------------------------------------------------------

def test_stratified_counts_keep_stratum_sizes():
    strata = ["A"] * 5 + ["B"] * 3 + [None] * 2
    c = stratified_counts(strata, 200, np.random.default_rng(1))
    assert c.shape == (200, 10)
    assert (c[:, :5].sum(axis=1) == 5).all() and (c[:, 5:8].sum(axis=1) == 3).all() and (c[:, 8:].sum(axis=1) == 2).all()
    assert c[:, :5].std() > 0  # really resampled


def test_bootstrap_group_means_equal_a_plain_loop():
    rng = np.random.default_rng(2)
    values = rng.random((3, 9))
    values[1, 4] = np.nan  # a SEG without a value for one cell is left out of its means
    groups = [("Avg", np.arange(9)), ("A", np.arange(5)), ("B", np.arange(5, 9))]
    counts = stratified_counts(["A"] * 5 + ["B"] * 4, 50, np.random.default_rng(3))
    got = bootstrap_group_means(values, counts, groups)
    for b in range(50):
        drawn = np.repeat(np.arange(9), counts[b].astype(int))
        for g, (_, idx) in enumerate(groups):
            members = [i for i in drawn if i in set(idx)]
            for c in range(3):
                want = np.nanmean(values[c, members]) if not np.all(np.isnan(values[c, members])) else np.nan
                assert got[b, c, g] == pytest.approx(want, nan_ok=True)


def test_group_means_point_estimate_and_weights():
    # Unit weights: each group's nanmean and its number of SEGs with a value; weights: the weighted
    # mean of a loop; the bootstrap is the weighted call.
    rng = np.random.default_rng(5)
    values = rng.random((2, 3, 7))
    values[0, 1, [0, 2]] = np.nan
    values[1, 2, :3] = np.nan  # group "A" empty for this cell
    groups = [("Avg", np.arange(7)), ("A", np.arange(3)), ("B", np.arange(3, 7))]
    means, counts = group_means(values, groups)
    assert means.shape == counts.shape == (2, 3, 3) and counts.dtype.kind == "i"
    for g, (_, idx) in enumerate(groups):
        for i, k in np.ndindex(2, 3):
            v = values[i, k, idx]
            assert counts[i, k, g] == int((~np.isnan(v)).sum())
            want = np.nanmean(v) if counts[i, k, g] else np.nan
            assert means[i, k, g] == pytest.approx(want, nan_ok=True)
    w = np.array([[1.0, 2.0, 0.0, 3.0, 0.5, 0.0, 1.0], np.ones(7)])
    wm, wt = group_means(values, groups, w)
    assert wm.shape == wt.shape == (2, 2, 3, 3)
    np.testing.assert_allclose(wm[1], means)  # weight 1 each: the point estimate
    np.testing.assert_array_equal(wt[1], counts)
    for g, (_, idx) in enumerate(groups):
        for i, k in np.ndindex(2, 3):
            v, ww = values[i, k, idx], w[0, idx]
            ok = ~np.isnan(v) & (ww > 0)
            want = (ww[ok] * v[ok]).sum() / ww[ok].sum() if ok.any() else np.nan
            assert wm[0, i, k, g] == pytest.approx(want, nan_ok=True)
    flat = values.reshape(6, 7)
    np.testing.assert_array_equal(bootstrap_group_means(flat, w, groups), group_means(flat, groups, w)[0])
    with pytest.raises(ValueError, match=r"weights of shape \(n_w, 7\)"):
        group_means(values, groups, np.ones(7))


def test_percentile_ci_is_the_quantile_pair():
    reps = np.random.default_rng(4).normal(size=(1000, 2))
    ci = percentile_ci(reps, 0.9)
    np.testing.assert_allclose(ci.low, np.quantile(reps, 0.05, axis=0))
    np.testing.assert_allclose(ci.high, np.quantile(reps, 0.95, axis=0))
    # non-finite replicates are left out per cell and counted; an all-invalid cell is NaN
    reps[:10, 0] = np.nan
    reps[10, 0] = np.inf
    reps[:, 1] = np.nan
    ci = percentile_ci(reps, 0.9)
    assert ci.low[0] == pytest.approx(np.quantile(reps[11:, 0], 0.05)) and ci.n_invalid.tolist() == [11, 1000]
    assert math.isnan(ci.low[1]) and math.isnan(ci.high[1])
    one = percentile_ci([np.nan, *range(101)], 0.9)
    assert (one.low, one.high, one.n_invalid) == (pytest.approx(5.0), pytest.approx(95.0), 1)
    with pytest.raises(ValueError, match="confidence"):
        percentile_ci(reps, 95)


def test_analysis_cis_are_seeded_and_cover_the_estimate():
    df = synthetic_scores()
    a = analyze(df, protocols=["paper"], bootstrap=300, seed=5).metametrics_frame()
    b = analyze(df, protocols=["paper"], bootstrap=300, seed=5).metametrics_frame()
    c = analyze(df, protocols=["paper"], bootstrap=300, seed=6).metametrics_frame()
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a["ci_low"], c["ci_low"])
    ok = a.dropna(subset=["value"])
    assert ((ok["ci_low"] <= ok["value"] + 1e-12) & (ok["value"] <= ok["ci_high"] + 1e-12)).all()
    none = analyze(df, protocols=["paper"], bootstrap=0).metametrics_frame()
    assert none["ci_low"].isna().all() and none["ci_high"].isna().all()
    np.testing.assert_allclose(none["value"], a["value"])  # the point estimates do not depend on the bootstrap


def test_ci_width_matches_the_standard_error_of_the_mean():
    # for a plain mean over SEGs the bootstrap SE approaches sd / sqrt(n)
    df = synthetic_scores(n_segs=80, seed=9).assign(subset="A")
    r = analyze(df, protocols=["graph"], bootstrap=2000, seed=1)
    pr = r.get()
    k = r.meta_metrics.index("rank")
    seg = pr.seg_values.values[0, k]
    se = np.nanstd(seg, ddof=1) / math.sqrt(np.sum(~np.isnan(seg)))
    width = pr.ci_high[0, k, 0] - pr.ci_low[0, k, 0]
    assert width == pytest.approx(2 * 1.96 * se, rel=0.15)


# -- comparisons -------------------------------------------------------------------------------------

def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, np.nan, 0.01]).tolist()[::2] == pytest.approx([0.5, 0.02])
    assert np.isnan(holm([0.5, np.nan, 0.01])[1])
    assert holm([0.9, 0.8]).tolist() == [1.0, 1.0]  # 2 x 0.8 capped at 1; the step-down keeps it monotone
    assert holm([0.9, 0.02]).tolist() == pytest.approx([0.9, 0.04])


def test_sign_flip_matches_scipy_exact_permutation_test():
    rng = np.random.default_rng(0)
    a, b = rng.random(9), rng.random(9) + 0.2
    want = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
                                  vectorized=True, n_resamples=10**6).pvalue
    assert sign_flip_pvalues((a - b)[:, None], n_permutations=9999)[0] == pytest.approx(want)


def test_sign_flip_random_is_close_to_exact_and_handles_nan():
    rng = np.random.default_rng(1)
    d = rng.normal(0.3, 1, 14)
    exact = sign_flip_pvalues(d[:, None], n_permutations=2**14)[0]
    rand = sign_flip_pvalues(d[:, None], n_permutations=20000, rng=np.random.default_rng(2))[0]
    assert rand == pytest.approx(exact, abs=0.01)
    col = np.concatenate([d, [np.nan, np.nan]])  # NaN rows are left out: same test
    both = sign_flip_pvalues(np.stack([col, np.full(16, np.nan)], axis=1), n_permutations=20000,
                             rng=np.random.default_rng(2))
    assert both[0] == pytest.approx(exact, abs=0.01) and np.isnan(both[1])


def _sign_flip_one_shot(diffs: np.ndarray, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    """The sign-flip test as first written: the whole random sign matrix from one ``choice`` call."""
    ok = ~np.isnan(diffs)
    n = ok.sum(axis=0)
    d0 = np.where(ok, diffs, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.abs(d0.sum(axis=0)) / n
        signs = rng.choice(np.array([-1.0, 1.0]), size=(n_permutations, diffs.shape[0]))
        stat = np.abs(signs @ d0) / n
    hits = (stat >= observed * (1 - 1e-12) - 1e-15).sum(axis=0)
    p = (hits + 1) / (n_permutations + 1)
    p[n == 0] = np.nan
    return p


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.MT19937, np.random.Philox])
def test_sign_flip_in_blocks_equals_the_one_shot_sign_matrix(bit_generator):
    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 1, (37, 6)).round(1)  # odd SEG count; ties: flips of equal values give equal sums
    d[rng.random(d.shape) < 0.2] = np.nan
    d[:, 4] = np.nan  # a test without any value
    d[:, 5] = 0.0  # no difference at all: every flip ties, p = 1
    want = _sign_flip_one_shot(d, 999, np.random.Generator(bit_generator(7)))
    for chunk in (1, 37 * 5 + 3, 1000, 1 << 23):  # one row, odd-sized blocks, one block
        g = np.random.Generator(bit_generator(7))
        got = sign_flip_pvalues(d, 999, g, chunk_elements=chunk)
        np.testing.assert_array_equal(got, want)
        # the generator is left where the one-shot draw leaves it: a later draw is unchanged
        after = np.random.Generator(bit_generator(7))
        after.choice(np.array([-1.0, 1.0]), size=(999, 37))
        assert g.random() == after.random()
    assert np.isnan(want[4]) and want[5] == 1.0
    # an exact test enumerated in blocks counts every sign vector once
    np.testing.assert_array_equal(sign_flip_pvalues(d[:9], 999, chunk_elements=7), sign_flip_pvalues(d[:9], 999))
    with pytest.raises(ValueError, match="expected chunk_elements >= 1, got 0"):
        sign_flip_pvalues(d, 99, chunk_elements=0)


def _pair_diffs(values: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    return values[:, ia] - values[:, ib]


@pytest.mark.parametrize("kind", ["continuous", "ties", "offset", "nan"])
def test_sign_flip_pairs_equal_the_tests_of_the_differences(kind):
    """``pairs=`` (the column products with the signs, differences taken after) gives the p-values
    of the differences themselves: on continuous values; on a coarse lattice, where permuted sums
    tie the observed one exactly; on columns sharing a large offset, where the products' rounding
    swamps the differences (their sums are then taken from the differences); and where two
    columns lack different SEGs."""
    rng = np.random.default_rng(5)
    v = rng.normal(0, 1, (61, 7))
    if kind == "ties":
        v = rng.integers(-2, 3, v.shape) / 4.0
    elif kind == "offset":
        v = 1e9 + rng.integers(-3, 4, v.shape) / 10.0
    elif kind == "nan":
        v[rng.random(v.shape) < 0.15] = np.nan
        v[:, 6] = np.nan  # tests with a column without any value
    v[:, 5] = v[:, 4]  # no difference at all: every flip ties, p = 1
    ia, ib = np.triu_indices(7, 1)
    ia, ib = np.concatenate([ia, [2]]), np.concatenate([ib, [2]])  # and a column against itself
    d = _pair_diffs(v, ia, ib)
    want = _sign_flip_one_shot(d, 999, np.random.default_rng(8))
    for chunk in (61 * 3 + 5, 1 << 23):  # blocks of three rows, one block
        got = sign_flip_pvalues(v, 999, np.random.default_rng(8), chunk_elements=chunk, pairs=(ia, ib))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, sign_flip_pvalues(d, 999, np.random.default_rng(8), chunk_elements=chunk))
    assert want[-1] == 1.0 and want[list(zip(ia, ib, strict=True)).index((4, 5))] == 1.0
    if kind == "ties":  # exact ties with the observed sum are counted: p-values on a coarse grid
        assert len(np.unique(want)) < len(want)
    # an exact test (2**12 sign vectors enumerated) of the same pairs
    np.testing.assert_array_equal(sign_flip_pvalues(v[:12], 4096, pairs=(ia, ib)),
                                  sign_flip_pvalues(_pair_diffs(v[:12], ia, ib), 4096))

def test_rank_cells_equal_one_rank_metrics_call_per_cell():
    from analysis.compare import rank_cells

    r = analyze(synthetic_scores(), protocols=["paper", "graph"], bootstrap=100, seed=2)
    # subsets A and B have fewer SEGs than Avg: cells of different SEG counts draw different signs
    cells = [(mm, sub, p) for p in ("paper", "graph") for mm in ("rank", "sep", "delta") for sub in ("Avg", "A", "B")]
    got = rank_cells(r, cells, n_permutations=499, seed=4)
    for (mm, sub, p), (ranking, tests) in zip(cells, got, strict=True):
        want_ranking, want_tests = rank_metrics(r, mm, sub, protocol=p, n_permutations=499, seed=4)
        pd.testing.assert_frame_equal(ranking, want_ranking)
        pd.testing.assert_frame_equal(tests, want_tests)
    assert rank_cells(r, []) == []


def test_pairwise_cis_equal_one_percentile_interval_per_pair():
    from analysis.compare import pairwise_comparisons

    r = analyze(synthetic_scores(), protocols=["paper"], bootstrap=200, seed=2)
    reps = r.get("paper").replicates
    reps[:17, 0] = np.nan  # replicates where one metric is undefined: left out of those pairs only
    reps[:, 1, 1] = np.inf
    pairs = [("good", "noise"), ("noise", "copy"), ("copy", "good")]
    t = pairwise_comparisons(r, pairs, n_permutations=99)
    mi = {m: i for i, m in enumerate(r.metrics)}
    pr = r.get("paper")
    for row in t.itertuples(index=False):
        k, g = r.meta_metrics.index(row.meta_metric), list(pr.group_names).index(row.subset)
        ci = percentile_ci(reps[:, mi[row.metric_a], k, g] - reps[:, mi[row.metric_b], k, g], r.confidence)
        assert (row.ci_low, row.ci_high) == (ci.low, ci.high) or (np.isnan(ci.low) and np.isnan(row.ci_low))


def test_compare_metrics():
    r = analyze(synthetic_scores(), protocols=["paper"], bootstrap=400, seed=2)
    c = compare_metrics(r, "good", "noise", n_permutations=2000)
    row = c[(c.meta_metric == "rank") & (c.subset == "Avg")].iloc[0]
    assert row["diff"] == pytest.approx(r.value("good", "rank") - r.value("noise", "rank"))
    assert row["diff"] > 0.3 and row.ci_low > 0 and row.p_value < 0.01 and row.n_segs == 40
    same = compare_metrics(r, "good", "copy", n_permutations=2000)
    ordering = same[same.meta_metric.isin(["rank", "sep", "kendall", "pair_acc"])]
    assert np.allclose(ordering["diff"], 0) and (ordering["p_value"] == 1.0).all()  # a monotone copy orders the same
    with pytest.raises(ValueError, match="two different metrics"):
        compare_metrics(r, "good", "good")
    with pytest.raises(ValueError, match="expected metrics among"):
        compare_metrics(r, "good", "clip")


def test_ranking_groups_metrics_that_do_not_differ():
    r = analyze(synthetic_scores(), protocols=["paper"], bootstrap=0)
    ranking, pairs = rank_metrics(r, "rank", "Avg", n_permutations=2000)
    grp = dict(zip(ranking.metric, ranking.group, strict=True))
    assert grp["good"] == grp["copy"] == 1 and grp["noise"] == 2
    assert ranking.position.tolist() == [1, 2, 3] and ranking.metric.iloc[-1] == "noise"
    assert set(ranking.set_index("metric").loc["good", "tied_with"].split(";")) == {"copy"}
    assert (pairs["p_holm"] >= pairs["p_value"]).all() and pairs["significant"].sum() == 2


# -- Pareto --------------------------------------------------------------------------------------------

def test_pareto_hand_made_points_with_ties():
    pts = {"cheap": (0.70, 1.0), "mid": (0.80, 10.0), "dominated": (0.60, 5.0), "twin": (0.80, 10.0),
           "same_cost_worse": (0.75, 10.0), "best": (0.90, 100.0), "same_value_dearer": (0.90, 200.0)}
    assert pareto_front(pts) == ["cheap", "mid", "twin", "best"]
    assert pareto_mask([0.5], [3.0]).tolist() == [True]
    assert pareto_mask([], []).tolist() == []
    with pytest.raises(ValueError, match="NaN at position 1"):
        pareto_mask([0.5, np.nan], [1.0, 2.0])


def test_parse_flops():
    assert parse_flops("224T") == 224e12 and parse_flops("7.01T") == pytest.approx(7.01e12)
    assert parse_flops("604M FLOPs") == 604e6
    with pytest.raises(ValueError, match="expected a FLOP count"):
        parse_flops("lots")


@pytest.mark.parametrize("scheme", ["plain", "rescaled"])
def test_delta_bootstrap_resamples_its_normaliser(scheme):
    # A plain-loop reference: each replicate pools the drawn SEGs' rows, each row weighing its
    # SEG's count, and recomputes the std over them (graph protocol: std of the analysed SEGs'
    # scores; paper: of every row, all inside analysed SEGs here). With integer counts this is
    # the std of the concatenated rows; rescaled counts weigh n/(n-1) per draw.
    df = synthetic_scores(n_segs=12, seed=5)
    r = analyze(df, protocols=["graph", "paper"], bootstrap=30, seed=3, subsets="none", bootstrap_scheme=scheme)
    for pname in ("graph", "paper"):
        pr = r.get(pname)
        sv = pr.seg_values
        k = r.meta_metrics.index("delta")
        raw = sv.values[:, k, :] * sv.sigma[:, None]  # per-SEG un-normalised delta
        draws = stratified_counts([None] * len(sv.seg_ids), 30, np.random.default_rng(3), scheme)
        if scheme == "plain":
            assert np.array_equal(draws, np.round(draws))
        rows_of = {sid: g for sid, g in df.groupby("seg_id")}
        for b in range(30):
            w_seg = draws[b]
            for i, m in enumerate(r.metrics):
                x = np.concatenate([rows_of[sid][m].to_numpy() for sid in sv.seg_ids])
                w = np.concatenate([np.full(len(rows_of[sid]), w_seg[s]) for s, sid in enumerate(sv.seg_ids)])
                mu = (w * x).sum() / w.sum()
                sd = np.sqrt((w * (x - mu) ** 2).sum() / (w.sum() - 1))
                want = (w_seg * raw[i]).sum() / w_seg.sum() / sd
                assert pr.replicates[b, i, k, 0] == pytest.approx(want, rel=1e-9)


def test_rescaled_counts_draw_n_minus_one_per_stratum():
    strata = ["A"] * 5 + ["B"] * 3 + ["C"] + [None] * 2
    c = stratified_counts(strata, 300, np.random.default_rng(1), "rescaled")
    for idx, n in ((slice(0, 5), 5), (slice(5, 8), 3), (slice(9, 11), 2)):
        block = c[:, idx]
        assert np.allclose(block.sum(axis=1), n)  # the stratum keeps its weight
        draws = block / (n / (n - 1))
        assert np.allclose(draws, np.round(draws)) and np.allclose(draws.sum(axis=1), n - 1)
    assert (c[:, 8] == 1).all()  # a one-SEG stratum has nothing to resample
    with pytest.raises(ValueError, match=r"expected a bootstrap scheme among \['rescaled', 'plain'\], got 'wild'"):
        stratified_counts(strata, 3, np.random.default_rng(0), "wild")


def test_rescaled_bootstrap_variance_of_a_mean_is_unbiased():
    """Var of the bootstrap mean: plain ~ sum (v - mean)^2 / n^2 (the plug-in variance / n), rescaled ~
    s^2 / n with ddof=1 (the unbiased one); checked on 40000 replicates within 3%."""
    v = np.array([0.0, 1.0, 4.0, 2.0, 7.0])
    n = len(v)
    for scheme, want in (("plain", v.var(ddof=0) / n), ("rescaled", v.var(ddof=1) / n)):
        c = stratified_counts(["A"] * n, 40000, np.random.default_rng(7), scheme)
        means = bootstrap_group_means(v[None, :], c, [("Avg", np.arange(n))])[:, 0, 0]
        assert means.var() == pytest.approx(want, rel=0.03)
        assert means.mean() == pytest.approx(v.mean(), abs=0.05)


def test_delta_of_huge_scores_is_not_zero():
    df = synthetic_scores(n_segs=8, seed=6)
    big = df.assign(**{c: df[c] * 1e200 for c in ("good", "noise")})
    a = analyze(df, protocols=["paper", "graph"], bootstrap=20, seed=1)
    b = analyze(big, protocols=["paper", "graph"], bootstrap=20, seed=1)
    for p in ("paper", "graph"):
        for m in ("good", "noise"):
            assert b.value(m, "delta", protocol=p) == pytest.approx(a.value(m, "delta", protocol=p), rel=1e-9)
            assert a.value(m, "delta", protocol=p) != 0.0
        np.testing.assert_allclose(b.get(p).ci_low, a.get(p).ci_low, rtol=1e-9)


# -- BCa -----------------------------------------------------------------------------------------------

def _bca_loop(reps, est, jack, confidence):
    """Plain per-cell BCa (Efron & Tibshirani 1993, 14.3) with scipy's normal cdf/ppf."""
    r = reps[np.isfinite(reps)]
    z0 = stats.norm.ppf((np.sum(r < est) + 0.5 * np.sum(r == est)) / len(r))
    d = jack.mean() - jack
    a = np.sum(d ** 3) / (6 * np.sum(d ** 2) ** 1.5)
    out = []
    for z in stats.norm.ppf([(1 - confidence) / 2, (1 + confidence) / 2]):
        out.append(np.quantile(r, stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))))
    return out


def test_bca_equals_a_plain_loop_per_cell_with_ties_and_nan():
    rng = np.random.default_rng(3)
    reps = rng.gamma(2.0, size=(500, 3, 2))
    reps[:, 1, 0] = np.round(reps[:, 1, 0])  # tie-heavy cell, some replicates equal the estimate
    reps[::7, 2, 1] = np.nan
    est = np.array([[2.0, 1.5], [2.0, 1.0], [1.8, 2.2]])
    jack = rng.normal(size=(30, 3, 2)) ** 3  # skewed: non-zero acceleration
    ci = bca_ci(reps, est, jack, 0.9)
    for i in range(3):
        for g in range(2):
            lo, hi = _bca_loop(reps[:, i, g], est[i, g], jack[:, i, g], 0.9)
            assert ci.low[i, g] == pytest.approx(lo, abs=1e-12) and ci.high[i, g] == pytest.approx(hi, abs=1e-12)
    assert ci.n_invalid[2, 1] == np.isnan(reps[:, 2, 1]).sum() and ci.n_invalid[0, 0] == 0


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    sym = np.concatenate([np.linspace(-1, 1, 201), [0.0]])  # symmetric about the estimate 0
    ci = bca_ci(sym, 0.0, np.ones(10), 0.8)  # constant jackknife: no acceleration
    pc = percentile_ci(sym, 0.8)
    assert ci.low == pytest.approx(pc.low, abs=1e-12) and ci.high == pytest.approx(pc.high, abs=1e-12)


def test_bca_is_close_to_scipy_bootstrap_bca():
    rng = np.random.default_rng(0)
    x = rng.exponential(size=60)
    ref = stats.bootstrap((x,), np.mean, method="BCa", n_resamples=20000, confidence_level=0.95,
                          random_state=np.random.default_rng(1)).confidence_interval
    reps = rng.choice(x, (20000, x.size)).mean(axis=1)
    jack = (x.sum() - x) / (x.size - 1)
    ci = bca_ci(reps, x.mean(), jack, 0.95)
    width = ref.high - ref.low
    assert abs(ci.low - ref.low) < 0.03 * width and abs(ci.high - ref.high) < 0.03 * width
    # skewed data: BCa moves the interval up relative to the percentile interval
    assert ci.high > percentile_ci(reps, 0.95).high


def test_bca_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="expected replicates"):
        bca_ci(np.zeros((10, 2)), np.zeros(3), np.zeros((5, 2)))


def test_analyze_ci_methods():
    df = synthetic_scores(n_segs=30, seed=2)
    bca = analyze(df, protocols=["paper"], bootstrap=400, seed=4, ci_method="bca")
    pct = analyze(df, protocols=["paper"], bootstrap=400, seed=4)  # the default
    assert bca.ci_method == "bca" and pct.ci_method == "percentile"
    pb, pp = bca.get(), pct.get()
    np.testing.assert_array_equal(pb.replicates, pp.replicates)  # same draws, another interval
    ref = percentile_ci(pp.replicates, 0.95)
    np.testing.assert_array_equal(pp.ci_low, ref.low)
    assert not np.allclose(pb.ci_low, pp.ci_low, equal_nan=True)
    # the BCa interval of one cell by hand: jackknife = the analysis without each SEG in turn
    k, i, g = bca.meta_metrics.index("rank"), 0, list(pb.group_names).index("Avg")
    ids = pb.seg_values.seg_ids
    jack = [analyze(df[df["seg_id"] != s], protocols=["paper"], bootstrap=0, chance=0).get().estimates[i, k, g]
            for s in ids]
    lo, hi = _bca_loop(pb.replicates[:, i, k, g], pb.estimates[i, k, g], np.array(jack), 0.95)
    assert pb.ci_low[i, k, g] == pytest.approx(lo, abs=1e-12) and pb.ci_high[i, k, g] == pytest.approx(hi, abs=1e-12)
    with pytest.raises(ValueError, match="ci_method: expected one of"):
        analyze(df, protocols=["paper"], bootstrap=10, ci_method="student")
    with pytest.raises(ValueError, match=r"bootstrap_scheme: expected one of rescaled, plain, got 'wild'"):
        analyze(df, protocols=["paper"], bootstrap=10, bootstrap_scheme="wild")
