"""Chance levels: within-SEG permutations of the scores, against a loop over permuted tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.chance import (
    chance_adjusted,
    chance_levels,
    chance_steps,
    column_streams,
    null_patterns,
    permutation_keys,
    permute_within_segs,
    sorted_within_segs,
)
from analysis.pipeline import analyze
from analysis.protocols import get_protocol
from analysis.scores_io import prepare_inputs, read_scores
from analysis.walks import build_walk_table
from seg_data.results import METAMETRICS_COLUMNS

MINI = Path(__file__).parent / "data" / "mini_run_scores.csv"


def small_table(seed: int = 0, n_segs: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        for lev in range(int(rng.integers(2, 4))):
            for v in range(1 if lev == 0 else 2):
                label = str(lev) if lev == 0 else f"{lev}{'ab'[v]}"
                for k in range(int(rng.integers(1, 3))):
                    rows.append({"seg_id": f"s{s}", "node": label, "file_name": f"{s}-{label}-{k}",
                                 "good": 1 - 0.3 * lev + rng.normal(0, 0.1),
                                 "tied": float(rng.integers(0, 3)),  # heavy ties
                                 "holes": rng.random() if rng.random() > 0.2 else np.nan})
    return pd.DataFrame(rows)


def test_permutations_move_scores_only_within_segs_and_keep_nans():
    x = np.array([[1.0, 5.0], [2.0, np.nan], [3.0, 6.0], [4.0, 7.0], [9.0, 8.0]])
    segs = [np.array([0, 1, 2]), np.array([3, 4])]
    y = permute_within_segs(x, segs, 50, np.random.default_rng(1)).reshape(5, 50, 2)
    for p in range(50):
        for rows in segs:
            for j in range(2):
                assert sorted(y[rows, p, j][~np.isnan(y[rows, p, j])]) == sorted(x[rows, j][~np.isnan(x[rows, j])])
        assert np.isnan(y[1, p, 1]) and not np.isnan(y[[0, 2, 3, 4], p, 1]).any()
    # every arrangement of SEG 0's first column shows up (6 of them), so it is a real shuffle
    assert len({tuple(y[[0, 1, 2], p, 0]) for p in range(50)}) == 6


# Cells whose every walk has an exact null expectation (see the next test for why), in small_table.
def exact_cells(protocol: str) -> dict[tuple[str, str], float]:
    out = {(m, "pair_acc"): 0.5 for m in ("good", "tied", "holes")}
    out.update({(m, "delta"): 0.0 for m in ("good", "holes")})
    out.update({(m, k): 0.0 for m in ("good", "holes") for k in ("rank", "kendall")})
    if protocol == "graph":  # no image counted twice: ties do not matter; delta signed
        out.update({("tied", "delta"): 0.0, ("tied", "rank"): 0.0, ("tied", "kendall"): 0.0})
    return out


@pytest.mark.parametrize("protocol", ["paper", "graph"])
def test_chance_levels_equal_a_loop_over_permuted_tables(protocol):
    df = small_table()
    metrics = ["good", "tied", "holes"]
    inputs = prepare_inputs(read_scores(df, lower_is_better=["tied"]), subsets="none")
    pr = analyze(inputs, protocols=[protocol], bootstrap=0).get()
    proto = get_protocol(protocol)
    wt = build_walk_table(inputs.structure, proto.walks, proto.root_duplication, list(pr.seg_values.seg_ids))
    mms = list(pr.seg_values.meta_metrics)
    n_perm = 30
    got = chance_levels(inputs.scores, inputs.structure, wt, pr.seg_values.sigma, proto, inputs.metrics,
                        mms, ["tied"], n_perm=n_perm, seed=4, max_columns=7)
    # the same permutations (each column's own stream, 7 columns at a time: 3 metrics x 1 permutation per
    # step), one table at a time, through the whole pipeline
    seg_rows = [np.concatenate(s.rows) for s in inputs.structure.segs]
    streams = column_streams(null_patterns(inputs.scores, seg_rows), 4)
    width, steps = chance_steps(n_perm, wt.n_walks, len(mms), max_columns=7)
    assert width == 7 and steps == [1] * n_perm
    vals, per_seg = [], []
    for p in steps:
        keys = permutation_keys(streams, len(df), p)
        start = sorted_within_segs(inputs.scores, seg_rows)  # what is permuted: the same multiset per SEG
        perm = permute_within_segs(start, seg_rows, p, keys=keys).reshape(len(df), p, len(metrics))
        for q in range(p):
            # read_scores negates lower-is-better columns; undo it so the loop sees raw scores
            raw = perm[:, q, :] * np.where(np.isin(metrics, ["tied"]), -1.0, 1.0)
            t = df.copy()
            t[metrics] = raw  # rows of the score matrix are the table rows, in order
            r = analyze(t, protocols=[protocol], bootstrap=0, subsets="none", lower_is_better=["tied"])
            # delta's normaliser does not move under a within-SEG permutation
            assert np.allclose(r.get().seg_values.sigma, pr.seg_values.sigma)
            vals.append(r.get().estimates)
            per_seg.append(r.get().seg_values.values)
    vals, per_seg = np.array(vals)[..., 0], np.array(per_seg)  # (P, M, K) Avg only; (P, M, K, S)
    n = (~np.isnan(per_seg[0])).sum(axis=-1)
    # The band: the normal interval from the SEGs' null variances (SEGs permute independently).
    sd = np.sqrt(np.nansum(np.var(per_seg, axis=0, ddof=1), axis=-1)) / n
    z = 1.959963984540054
    lo_b = np.array([-1.0 if k in ("rank", "kendall") else (-np.inf if k == "delta" else 0.0) for k in mms])
    hi_b = np.array([np.inf if k == "delta" else 1.0 for k in mms])
    exact = exact_cells(protocol)
    magnitude = ("tied", "delta") if protocol == "paper" else None  # lower-is-better delta as |delta|
    checked = 0
    for i, m in enumerate(metrics):
        for k, mm in enumerate(mms):
            level, err = got.mean[i, k, 0], got.mc_error[i, k, 0]
            if mm == "delta":
                # linear in the scores: its null variance is exact (test_linear_null_variance_...),
                # here within the sampling error of the loop's 30 permutations
                got_sd = (got.high[i, k, 0] - got.low[i, k, 0]) / (2 * z)
                if (m, mm) == magnitude:  # |N(0, sd)|: mean sd sqrt(2/pi), quantiles sd * Phi^-1((1 + q) / 2)
                    got_sd = got.high[i, k, 0] / 2.241402727604947
                    assert level == pytest.approx(got_sd * np.sqrt(2 / np.pi), rel=1e-9)
                    assert err == 0.0
                    assert abs(level - np.mean(vals[:, i, k])) < 4.5 * np.std(vals[:, i, k]) / np.sqrt(n_perm)
                else:
                    assert (level, err) == (0.0, 0.0)
                assert got_sd == pytest.approx(sd[i, k], rel=0.35)
                checked += (m, mm) != magnitude
                continue
            want_lo = np.clip(level - z * sd[i, k], lo_b[k], hi_b[k])
            want_hi = np.clip(level + z * sd[i, k], lo_b[k], hi_b[k])
            np.testing.assert_allclose([got.low[i, k, 0], got.high[i, k, 0]], [want_lo, want_hi], rtol=1e-9, atol=1e-12)
            checked += 1
            if (m, mm) in exact:  # exact: no Monte-Carlo error at all
                assert (level, err) == (exact[(m, mm)], 0.0), (m, mm)
                continue
            plain_err = sd[i, k] / np.sqrt(n_perm)  # the pooled error of the plain permutation mean
            if mm == "sep":  # exact, ties included (the KS null of each pool pair): no Monte-Carlo error
                assert err == 0.0
                assert abs(level - np.mean(vals[:, i, k])) < 4.5 * plain_err
            else:  # estimated walks (exact ones enter at their expectation): the same mean, no noisier
                assert 0 < err <= plain_err * (1 + 1e-9), (m, mm)
                assert abs(level - np.mean(vals[:, i, k])) < 4.5 * plain_err
    assert checked == len(metrics) * len(mms) - (magnitude is not None)


def test_chance_of_a_two_image_seg_by_hand():
    # One SEG, images at levels 0 and 1: a permutation keeps or swaps them. KS between two single
    # images is always 1 (chance 1, so no adjusted value); rank/kendall/pair_acc are +-1/+-1/1|0.
    df = pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "m": [0.9, 0.1]})
    r = analyze(df, protocols=["graph"], bootstrap=0, chance=400)
    f = r.metametrics_frame().set_index("meta_metric")
    assert f.loc["sep", "chance"] == 1.0 and (f.loc["sep", "chance_low"], f.loc["sep", "chance_high"]) == (1.0, 1.0)
    assert np.isnan(f.loc["sep", "adjusted"])
    keep = (f.loc["pair_acc", "chance"])  # share of permutations that keep the order
    assert 0.4 < keep < 0.6
    assert f.loc["rank", "chance"] == pytest.approx(2 * keep - 1)
    assert f.loc["kendall", "chance"] == pytest.approx(2 * keep - 1)
    assert (f.loc["rank", "chance_low"], f.loc["rank", "chance_high"]) == (-1.0, 1.0)
    assert f.loc["rank", "adjusted"] == pytest.approx((1 - (2 * keep - 1)) / (1 - (2 * keep - 1)))
    assert np.isnan(f.loc["delta", "adjusted"])  # delta has no maximum


@pytest.mark.parametrize("protocol", ["paper", "graph", "paper-min-ranks"])
def test_closed_forms_match_the_plain_permutation_means(protocol):
    # The closed forms the chance levels use, checked against brute force (every permutation
    # through every walk, no closed form used) on SEGs with ties and missing cells:
    # - pair_acc: two distinct images of different levels are exchangeable under a within-SEG
    #   permutation, so P(right) + P(tie)/2 = 1/2 for every pair: 0.5 exactly.
    # - delta: linear in the scores, and every image's expected score is its SEG's mean: 0
    #   (not for a lower-is-better column under "magnitude", which takes |delta|).
    # - rank and kendall: 0 where the walk's tie pattern cannot move: no score ties in the SEG
    #   (columns "good" and "holes"), or no image counted twice (graph), where, given the values
    #   a walk receives, their order along it is uniform. With min ranks a duplicated root's twin
    #   never ranks below it, so rank has no closed form there, even without ties.
    proto = get_protocol("paper").replace(name="min", tie_method="min") if protocol == "paper-min-ranks" \
        else get_protocol(protocol)
    inputs = prepare_inputs(read_scores(small_table(3, n_segs=8), lower_is_better=["tied"]), subsets="none")
    mean, err, _ = plain_permutation_chance(inputs, proto, 600, seed=2)
    r = analyze(inputs, protocols=[proto], bootstrap=0, chance=5)
    f = r.metametrics_frame().set_index(["metric", "meta_metric"])
    mms = list(r.get().seg_values.meta_metrics)
    exact = exact_cells("graph" if protocol == "graph" else "paper")
    if protocol == "paper-min-ranks":
        exact = {key: v for key, v in exact.items() if key[1] != "rank"}
    for i, m in enumerate(inputs.metrics):
        for k, mm in enumerate(mms):
            got, got_err = f.loc[(m, mm), "chance"], f.loc[(m, mm), "chance_mc_error"]
            if (m, mm) in exact:
                assert (got, got_err) == (exact[(m, mm)], 0.0), (m, mm)
                assert abs(mean[i, k, 0] - exact[(m, mm)]) <= 4.5 * err[i, k, 0] + 1e-12, (m, mm, mean[i, k, 0])
            elif mm == "delta":
                # a lower-is-better |delta| (paper): the folded normal of an exact variance
                assert got_err == 0.0, (m, mm)
                assert abs(mean[i, k, 0] - got) <= 4.5 * err[i, k, 0] + 0.1 * got, (m, mm, mean[i, k, 0], got)
            elif mm == "sep":
                # exact, tied or not (each pool pair's KS null, analysis.metametrics.sep.ks_null_means),
                # and brute force agrees
                assert got_err == 0.0, (m, mm)
                assert abs(mean[i, k, 0] - got) <= 4.5 * err[i, k, 0], (m, mm, mean[i, k, 0], got)
            else:
                assert got_err > 0, (m, mm)  # estimated, and so it says
    # the min-rank rule is needed: brute force puts rank's level for an untied column off 0
    if protocol == "paper-min-ranks":
        j = list(inputs.metrics).index("good")
        assert abs(mean[j, mms.index("rank"), 0]) > 4.5 * err[j, mms.index("rank"), 0]
    # and the test can fail: the discrete column's sep floor is far from any of these values
    assert f.loc[("tied", "sep"), "chance"] > 0.3


def test_metametrics_columns_and_adjusted_formula():
    assert METAMETRICS_COLUMNS[-5:] == ("chance", "chance_low", "chance_high", "chance_mc_error", "adjusted")
    r = analyze(small_table(1), protocols=["paper"], bootstrap=0, chance=20)
    f = r.metametrics_frame()
    assert tuple(f.columns) == METAMETRICS_COLUMNS
    bounded = f[f["meta_metric"] != "delta"]
    want = (bounded["value"] - bounded["chance"]) / (1 - bounded["chance"])
    np.testing.assert_allclose(bounded["adjusted"], want)
    assert f[f["meta_metric"] == "delta"]["adjusted"].isna().all()
    assert (f["chance_low"] <= f["chance"] + 1e-12).all() and (f["chance"] <= f["chance_high"] + 1e-12).all()
    off = analyze(small_table(1), protocols=["paper"], bootstrap=0, chance=0).metametrics_frame()
    assert off[["chance", "chance_low", "chance_high", "chance_mc_error", "adjusted"]].isna().all().all()
    assert (f["chance_mc_error"] >= 0).all() and (f["chance_mc_error"] <= f["chance_high"] - f["chance_low"] + 1e-12).all()
    assert float(chance_adjusted(0.5, 0.5, 1.0)) == 0.0


@pytest.mark.parametrize("protocol", ["paper", "graph"])
def test_mini_controls_sit_at_chance_and_the_real_metric_far_above(protocol):
    # tests/data/mini_run_scores.csv: the scores of `ts2 run` (dataset=mini, 30 SEGs). `random`
    # reads sep_m ~0.6 raw, which is its chance level; geneval_shapes is near perfect.
    r = analyze(read_scores(MINI), protocols=[protocol], bootstrap=0, chance=100, seed=0)
    f = r.metametrics_frame().set_index(["metric", "meta_metric", "subset"])
    assert f.loc[("random", "sep", "Avg"), "value"] > 0.5
    assert abs(f.loc[("random", "sep", "Avg"), "adjusted"]) < 0.1
    assert f.loc[("geneval_shapes", "sep", "Avg"), "adjusted"] > 0.8


def test_summary_and_report_name_the_null_and_show_the_error_and_the_random_control():
    from analysis.chance import NULL_DESCRIPTION
    from analysis.report import page as rp
    from analysis.report.outputs import summary_text

    r = analyze(read_scores(MINI), protocols=["paper"], bootstrap=0, chance=30, seed=0)
    assert NULL_DESCRIPTION in summary_text(r)
    mm = r.metametrics_frame()
    page = rp.metametrics_html(mm, "paper", roles={"random": "control"})
    cell = mm.set_index(["metric", "meta_metric", "subset"]).loc[("geneval_shapes", "sep", "Avg")]
    rv = mm.set_index(["metric", "meta_metric", "subset"]).loc[("random", "sep", "Avg"), "value"]
    # geneval_shapes' sep cell: its chance level, that level's Monte-Carlo error, the random control beside it
    assert (f"{rp._fmt_pct(cell['chance'])} &plusmn;{100 * cell['chance_mc_error']:.2f}; "
            f"random {rp._fmt_pct(rv)}; adj.") in page
    assert "permuted within each SEG" in page and "Monte-Carlo error" in page
    without = rp.metametrics_html(mm[mm["metric"] != "random"], "paper")
    assert "; random " not in without and "&plusmn;" in without


def plain_permutation_chance(inputs, protocol: str, n_perm: int, seed: int):
    """The chance levels as computed before exact expectations: every permutation through every walk,
    the plain mean, its std / sqrt(n) and the percentile band of the dataset values."""
    from analysis.aggregate import compute_seg_values, group_means
    from analysis.compute import walk_values

    proto = get_protocol(protocol)
    pr = analyze(inputs, protocols=[proto], bootstrap=0).get()
    sv0 = pr.seg_values
    wt = build_walk_table(inputs.structure, proto.walks, proto.root_duplication, list(sv0.seg_ids))
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    perm = permute_within_segs(inputs.scores, [np.concatenate(by_id[i].rows) for i in wt.seg_ids], n_perm,
                               np.random.default_rng(seed))
    wv, nv = walk_values(wt, perm, proto, sv0.meta_metrics)
    n_m = len(inputs.metrics)
    sv = compute_seg_values(wt, wv, nv, np.tile(sv0.sigma, n_perm), proto, list(inputs.metrics) * n_perm, sv0.meta_metrics)
    est = group_means(sv.values, sv.groups())[0].reshape(n_perm, n_m, len(sv0.meta_metrics), -1)
    if proto.lower_is_better_delta == "magnitude":
        k = sv0.meta_metrics.index("delta")
        for i, m in enumerate(inputs.metrics):
            if m in inputs.lower_is_better:
                est[:, i, k] = np.abs(est[:, i, k])
    return est.mean(0), est.std(0, ddof=1) / np.sqrt(n_perm), np.quantile(est, [0.025, 0.975], axis=0)


@pytest.mark.parametrize("protocol", ["paper", "graph"])
@pytest.mark.parametrize("data", ["random-segs", "mini"])
def test_chance_levels_agree_with_the_plain_permutation_estimate(protocol, data):
    # Before (every permutation through every walk, 400 of them) and after (exact expectations,
    # lower-variance stand-ins, pooled SEG variances, 20 permutations): the same chance levels
    # within their Monte-Carlo errors, and bands of the same width.
    if data == "mini":
        inputs = prepare_inputs(read_scores(MINI), subsets="none")
    else:
        inputs = prepare_inputs(read_scores(small_table(7, n_segs=12), lower_is_better=["tied"]), subsets="none")
    old_mean, old_err, (old_lo, old_hi) = plain_permutation_chance(inputs, protocol, 400, seed=11)
    new = analyze(inputs, protocols=[protocol], bootstrap=0, chance=20, seed=5).get().chance
    ok = ~np.isnan(old_mean)
    assert ok.sum() > 10 and np.array_equal(ok, ~np.isnan(new.mean))
    tol = 4.5 * np.sqrt(old_err ** 2 + new.mc_error ** 2) + 1e-9
    bad = np.abs(new.mean - old_mean) > tol
    assert not bad[ok].any(), (np.abs(new.mean - old_mean)[bad], tol[bad])
    # widths: a normal band from pooled SEG variances against 400 permutations' percentiles
    wide = ok & (old_hi - old_lo > 1e-9)
    ratio = (new.high - new.low)[wide] / (old_hi - old_lo)[wide]
    assert np.median(ratio) == pytest.approx(1.0, abs=0.12), np.median(ratio)
    assert 0.6 < ratio.min() and ratio.max() < 1.6, (ratio.min(), ratio.max())
    # and the new errors are smaller at a twentieth of the permutations where a closed form helps
    assert (new.mc_error[ok] == 0).mean() > 0.3


def test_metrics_with_one_tie_pattern_share_the_order_null():
    # "good" and exp(3 * good) order every SEG alike (no ties, no holes), so rank/sep/kendall/pair_acc
    # have one permutation null for both and are computed once; "other" (independent, also untied and
    # complete) has the same null too. delta reads values, so each keeps its own.
    df = small_table(5, n_segs=12)
    df["stretched"] = np.exp(3 * df["good"])
    df["other"] = np.random.default_rng(9).random(len(df))
    inputs = prepare_inputs(read_scores(df[["seg_id", "node", "file_name", "good", "stretched", "other", "tied"]]),
                            subsets="none")
    from analysis.chance import null_classes

    by_id = {s.seg_id: s for s in inputs.structure.segs}
    cls = null_classes(inputs.scores, [np.concatenate(by_id[i].rows) for i in inputs.structure.seg_ids])
    assert cls.tolist() == [0, 0, 0, 3]
    r = analyze(inputs, protocols=["paper"], bootstrap=0, chance=40, seed=1).get().chance
    mms = list(analyze(inputs, protocols=["paper"], bootstrap=0).get().seg_values.meta_metrics)
    sep, delta = mms.index("sep"), mms.index("delta")
    assert r.mean[0, sep, 0] == r.mean[1, sep, 0] == r.mean[2, sep, 0] != r.mean[3, sep, 0]
    order = [k for k, mm in enumerate(mms) if mm != "delta"]
    for a in (r.mean, r.low, r.high, r.mc_error):  # one null, one set of SEG values: every column alike
        np.testing.assert_array_equal(a[1, order], a[0, order])
        np.testing.assert_array_equal(a[2, order], a[0, order])
    assert r.high[0, delta, 0] != r.high[1, delta, 0]  # delta's band scales with the values
    # and the shared null is the right one: brute force on "other" alone agrees
    mean, err, _ = plain_permutation_chance(inputs, "paper", 400, seed=3)
    assert abs(r.mean[2, sep, 0] - mean[2, sep, 0]) < 4.5 * np.hypot(err[2, sep, 0], r.mc_error[2, sep, 0])


def test_a_seg_left_out_for_too_many_walks_stays_out_of_the_chance_levels():
    # SEG "s0" (the first) has more walks than max_walks: it is left out of the walk table (no
    # walk of it is enumerated for the chance levels either: a walk bomb once hung there), and the
    # others keep their own ties (a shifted SEG index would give "tied" the closed form of an
    # untied SEG).
    df = small_table(4, n_segs=8)
    big = df[df.seg_id == "s0"]
    extra = pd.concat([big.assign(node=f"1{chr(99 + k)}", file_name=big.file_name + f"-x{k}") for k in range(6)])
    df = pd.concat([df, extra[extra.node.str.len() > 0]], ignore_index=True)
    inputs = prepare_inputs(read_scores(df, lower_is_better=["tied"]), subsets="none", max_walks=12)
    r = analyze(inputs, protocols=["paper"], bootstrap=0, chance=20, seed=3).get()
    assert "s0" in r.seg_values.seg_ids and np.isnan(r.seg_values.values[:, :, r.seg_values.seg_ids.index("s0")]).all()
    kept = prepare_inputs(read_scores(df[df.seg_id != "s0"], lower_is_better=["tied"]), subsets="none")
    want = analyze(kept, protocols=["paper"], bootstrap=0, chance=20, seed=3).get()
    mms = list(r.seg_values.meta_metrics)
    order = [k for k, mm in enumerate(mms) if mm != "delta"]  # delta's normaliser sees s0's scores too
    np.testing.assert_allclose(r.estimates[:, order], want.estimates[:, order])
    for i, m in enumerate(inputs.metrics):
        for k in order:
            mm = mms[k]
            a, b = r.chance.mean[i, k, 0], want.chance.mean[i, k, 0]
            tol = 4.5 * np.hypot(r.chance.mc_error[i, k, 0], want.chance.mc_error[i, k, 0]) + 1e-12
            assert abs(a - b) <= tol, (m, mm, a, b)
            assert (r.chance.mc_error[i, k, 0] == 0) == (want.chance.mc_error[i, k, 0] == 0), (m, mm)


@pytest.mark.parametrize("protocol", ["paper", "graph"])
def test_linear_null_variance_equals_the_variance_over_every_permutation(protocol):
    # delta is linear in the scores, so each SEG value's null variance is exact: against the
    # variance over every within-SEG permutation of the valid scores (SEGs of at most 7 images,
    # ties and a missing cell), through the walk kernels and the SEG aggregation, delta divided by
    # an arbitrary normaliser.
    import itertools

    from analysis.aggregate import compute_seg_values
    from analysis.chance import linear_null_variance
    from analysis.compute import NodeLayout, walk_values

    proto = get_protocol(protocol)
    df = small_table(7, n_segs=5)
    df.loc[3, "holes"] = np.nan
    inputs = prepare_inputs(read_scores(df), subsets="none")
    wt = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    sigma = np.array([0.5, 2.0, 1.5])
    wv0, nv0 = walk_values(wt, inputs.scores, proto, ["delta"])
    got = linear_null_variance(NodeLayout(wt, inputs.structure), inputs.scores, inputs.structure, nv0, sigma, proto,
                               inputs.metrics, "delta")
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    want = np.full(got.shape, np.nan)
    for j in range(inputs.scores.shape[1]):
        for s, sid in enumerate(wt.seg_ids):
            rows = np.concatenate(by_id[sid].rows)
            rows = rows[~np.isnan(inputs.scores[rows, j])]
            perms = list(itertools.permutations(rows))
            assert len(perms) <= 5040
            x = np.repeat(inputs.scores[:, j:j + 1], len(perms), axis=1)
            for q, p in enumerate(perms):
                x[rows, q] = inputs.scores[list(p), j]
            wv, nv = walk_values(wt, x, proto, ["delta"])
            sv = compute_seg_values(wt, wv, nv, np.full(len(perms), sigma[j]), proto, ["m"] * len(perms), ["delta"])
            want[j, s] = np.var(sv.values[:, 0, s])  # the whole null distribution: ddof 0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
    assert (want > 1e-3).sum() > 8  # not zeros


@pytest.mark.parametrize("progress", ["true", "false"])
def test_progress_false_silences_the_chance_level_bars(capsys, tmp_path, monkeypatch, progress):
    # `ts2 analyze progress=false` prints no progress bar; the chance levels' permutation bar
    # used to show whatever the option said. Bars show only on a terminal (seg_data.progress):
    # stderr is one here.
    import seg_data.progress
    from ts2.cli import main

    monkeypatch.setattr(seg_data.progress, "interactive", lambda stream=None: True)
    rc = main(["analyze", f"scores={MINI}", "dataset=mini", "bootstrap=0", "chance=3", "ranking.enabled=false",
               "protocol=paper", f"progress={progress}", f"output_dir={tmp_path / 'out'}"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert ("chance levels (paper)" in err) == (progress == "true")
    mm = pd.read_csv(tmp_path / "out" / "metametrics.csv")
    assert mm["chance"].notna().any()  # computed either way
