"""Meta-metric kernels: hand-computed walks, scipy on random and tie-heavy walks, vectorised vs plain loops."""

from __future__ import annotations

import doctest
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_impl import reference_seg_values, reference_walk
from scipy import stats

from analysis import compare, pareto, pipeline, scores_io, walks
from analysis.aggregate import seg_means
from analysis.compute import walk_values
from analysis.metametrics import META_METRICS, WalkStats, delta, get_meta_metric, kendall, pair_acc, rank, sep
from analysis.metametrics.delta import walk_delta
from analysis.metametrics.kendall import walk_kendall
from analysis.metametrics.pair_acc import walk_pair_acc
from analysis.metametrics.rank import walk_rank
from analysis.metametrics.sep import walk_sep
from analysis.protocols import PROTOCOLS
from analysis.scores_io import prepare_inputs, read_scores
from analysis.stats import intervals, resampling, significance
from analysis.walks import build_walk_table

pytestmark = pytest.mark.light  # torch-free: .ci/run also runs it on the light install

ALL = tuple(META_METRICS)


# -- hand-computed walks ---------------------------------------------------------------------------

# Walk (0, 1a, 2) of a SEG with root images 0.9, 0.7, node 1a 0.6, node 2 0.1.
W1 = ([0, 0, 1, 2], [0.9, 0.7, 0.6, 0.1])
# Walk (0, 1b, 2): node 1b scores 0.8, above one root image.
W2 = ([0, 0, 1, 2], [0.9, 0.7, 0.8, 0.1])


def test_rank_by_hand():
    # average ranks: levels (1.5, 1.5, 3, 4), scores (4, 3, 2, 1): cov -4.5, var 4.5 and 5
    assert walk_rank(*W1) == pytest.approx(4.5 / math.sqrt(22.5))
    # W2 scores ranks (4, 2, 3, 1): cov -3
    assert walk_rank(*W2) == pytest.approx(3 / math.sqrt(22.5))
    # eq. 1 ranks (min): levels (1, 1, 3, 4): cov -5.5, var 6.75
    assert walk_rank(*W1, tie_method="min") == pytest.approx(5.5 / math.sqrt(6.75 * 5))


def test_rank_section_6_4_tie_example():
    # A tie at level 1 mirrored by a tie in scores is perfect; breaking it is penalised.
    assert walk_rank([0, 1, 1, 2], [1.0, 0.5, 0.5, 0.0]) == pytest.approx(1.0)
    assert walk_rank([0, 1, 1, 2], [1.0, 0.51, 0.49, 0.0]) == pytest.approx(0.9 / math.sqrt(0.9))  # 0.9487
    # the tie-aware pairwise accuracy does not care: both order every cross-level pair right
    assert walk_pair_acc([0, 1, 1, 2], [1.0, 0.5, 0.5, 0.0]) == 1.0
    assert walk_pair_acc([0, 1, 1, 2], [1.0, 0.51, 0.49, 0.0]) == 1.0


def test_sep_by_hand():
    assert walk_sep(*W1) == 1.0
    # W2: level 0 {0.7, 0.9} vs level 1 {0.8}: KS 0.5; both vs level 2: 1
    assert walk_sep(*W2, pairs="all") == pytest.approx((0.5 + 1 + 1) / 3)
    assert walk_sep(*W2, pairs="adjacent") == pytest.approx((0.5 + 1) / 2)


def test_delta_by_hand():
    assert walk_delta(*W1) == pytest.approx(((0.8 - 0.6) + (0.6 - 0.1)) / 2)
    assert walk_delta(*W2) == pytest.approx(((0.8 - 0.8) + (0.8 - 0.1)) / 2)


def test_kendall_and_pair_acc_by_hand():
    # 5 cross-level pairs, all right; n0 = 6, one tie in level
    assert walk_kendall(*W1) == pytest.approx(5 / math.sqrt(5 * 6))
    assert walk_pair_acc(*W1) == 1.0
    # W2: 0.7 < 0.8 is the one wrong pair
    assert walk_kendall(*W2) == pytest.approx(3 / math.sqrt(5 * 6))
    assert walk_pair_acc(*W2) == pytest.approx(4 / 5)
    # a tie across levels counts half
    assert walk_pair_acc([0, 1, 1], [0.5, 0.5, 0.1]) == pytest.approx(0.75)


def test_constant_scores_and_degenerate_walks():
    lv, sc = [0, 1, 2], [0.5, 0.5, 0.5]
    assert walk_rank(lv, sc) == 0.0 and walk_kendall(lv, sc) == 0.0  # scipy: NaN; eq. 2: 0
    assert walk_sep(lv, sc) == 0.0 and walk_delta(lv, sc) == 0.0 and walk_pair_acc(lv, sc) == 0.5
    one = ([0, 0, 0], [0.1, 0.5, 0.9])  # a single level: nothing to order
    assert [walk_rank(*one), walk_sep(*one), walk_delta(*one), walk_kendall(*one)] == [0.0] * 4
    assert all(math.isnan(f(*one, degenerate="skip")) for f in (walk_rank, walk_sep, walk_delta, walk_kendall))
    assert math.isnan(walk_pair_acc(*one))
    assert math.isnan(walk_rank([0], [0.3]))  # one sample: no correlation
    assert walk_sep([0], [0.3]) == 0.0  # ...but the paper's KS code returns 0 for it


def test_nan_scores_are_dropped_and_empty_levels_vanish():
    lv, sc = [0, 1, 2], [0.9, np.nan, 0.1]
    assert walk_rank(lv, sc) == 1.0
    assert walk_sep(lv, sc, pairs="adjacent") == 1.0
    assert walk_delta(lv, sc) == pytest.approx(0.8)  # one gap: level 0 to level 2
    assert walk_pair_acc(lv, sc) == 1.0
    assert math.isnan(walk_rank([0, 1], [np.nan, np.nan])) and math.isnan(walk_sep([0, 1], [np.nan, np.nan]))


def test_bad_walk_input_is_a_clear_error():
    with pytest.raises(ValueError, match="equal length"):
        walk_rank([0, 1], [0.1])
    with pytest.raises(ValueError, match="finite scores"):
        walk_sep([0, 1], [0.1, np.inf])
    with pytest.raises(ValueError, match="tie method"):
        walk_rank([0, 1], [0.1, 0.2], tie_method="first")
    with pytest.raises(ValueError, match="KS pairs"):
        walk_sep([0, 1], [0.1, 0.2], pairs="some")


def test_registry_lists_valid_names_and_rejects_duplicates():
    assert set(ALL) == {"rank", "sep", "delta", "kendall", "pair_acc"}
    with pytest.raises(ValueError, match=r"\['rank', 'sep', 'delta', 'kendall', 'pair_acc'\]"):
        get_meta_metric("ndcg")
    from analysis.metametrics import MetaMetricSpec, register_meta_metric

    with pytest.raises(ValueError, match="already registered"):
        register_meta_metric(MetaMetricSpec("rank", lambda stats: stats))


# -- against scipy, one walk at a time -------------------------------------------------------------

def _random_walk(rng, tie_heavy: bool):
    n_levels = int(rng.integers(2, 6))
    sizes = rng.integers(1, 6, n_levels)
    levels = np.repeat(np.sort(rng.choice(8, n_levels, replace=False)), sizes)
    scores = rng.integers(0, 4, len(levels)) / 4 if tie_heavy else rng.random(len(levels))
    return levels, scores


@pytest.mark.parametrize("tie_heavy", [False, True])
def test_walk_functions_match_scipy(tie_heavy):
    rng = np.random.default_rng(7 + tie_heavy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(60):
            lv, sc = _random_walk(rng, tie_heavy)
            if len(set(sc)) == 1:
                continue
            assert walk_rank(lv, sc) == pytest.approx(-stats.spearmanr(lv, sc).statistic, abs=1e-12)
            for method in ("min", "max", "dense"):
                want = -stats.pearsonr(stats.rankdata(lv, method=method), stats.rankdata(sc, method=method)).statistic
                assert walk_rank(lv, sc, tie_method=method) == pytest.approx(want, abs=1e-12)
            assert walk_kendall(lv, sc) == pytest.approx(-stats.kendalltau(lv, sc).statistic, abs=1e-12)
            pools = [sc[lv == v] for v in np.unique(lv)]
            ks_all = np.mean([stats.ks_2samp(a, b).statistic for i, a in enumerate(pools) for b in pools[i + 1:]])
            # neighbouring pairs: the [1:] slice is one shorter by design
            ks_adj = np.mean([stats.ks_2samp(a, b).statistic for a, b in zip(pools, pools[1:], strict=False)])
            assert walk_sep(lv, sc) == pytest.approx(ks_all, abs=1e-12)
            assert walk_sep(lv, sc, pairs="adjacent") == pytest.approx(ks_adj, abs=1e-12)
            # neighbouring pairs: the [1:] slice is one shorter by design
            assert walk_delta(lv, sc) == pytest.approx(np.mean([a.mean() - b.mean() for a, b in zip(pools, pools[1:], strict=False)]))
            # pair_acc is the pooled Mann-Whitney U of lower-level-beats-higher-level pairs
            u = sum(stats.mannwhitneyu(a, b).statistic for i, a in enumerate(pools) for b in pools[i + 1:])
            n = sum(len(a) * len(b) for i, a in enumerate(pools) for b in pools[i + 1:])
            assert walk_pair_acc(lv, sc) == pytest.approx(u / n, abs=1e-12)


def test_batch_rows_are_independent_and_order_free():
    rng = np.random.default_rng(3)
    rows = [_random_walk(rng, bool(i % 2)) for i in range(12)]
    width = max(len(r[0]) for r in rows)
    lv = np.zeros((12, width))
    sc = np.full((12, width), np.nan)
    for i, (l_, s_) in enumerate(rows):
        perm = rng.permutation(len(l_))  # the kernel must not rely on the order within a row
        lv[i, :len(l_)], sc[i, :len(l_)] = l_[perm], s_[perm]
    st_ = WalkStats(lv, sc)
    got = {name: get_meta_metric(name)(st_, PROTOCOLS["paper"]) for name in ALL}
    for i, (l_, s_) in enumerate(rows):
        want = reference_walk(l_, s_, PROTOCOLS["paper"])
        for name in ALL:
            assert got[name][i] == pytest.approx(want[name], abs=1e-12, nan_ok=True), (name, i)


# -- vectorised engine vs the plain-loop reference on random SEGs ---------------------------------

@st.composite
def seg_tables(draw):
    """A random score table: a few SEGs, 1-3 nodes per level, ties, NaNs, a lower-is-better column."""
    rows = []
    n_segs = draw(st.integers(1, 4))
    for s in range(n_segs):
        n_levels = draw(st.integers(1, 4))
        levels = sorted(draw(st.sets(st.integers(1, 5), min_size=n_levels - 1, max_size=n_levels - 1)))
        for lev in [0, *levels]:
            for v in range(draw(st.integers(1, 3))):
                label = f"{lev}{'abc'[v]}" if v or draw(st.booleans()) else str(lev)
                for k in range(draw(st.integers(1, 3))):
                    rows.append({"seg_id": str(s), "node": label, "file_name": f"{s}/{label}/{k}"})
    df = pd.DataFrame(rows).drop_duplicates("file_name")
    n = len(df)
    cont = draw(st.lists(st.floats(0, 1, allow_nan=False, width=32), min_size=n, max_size=n))
    tied = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, np.nan]), min_size=n, max_size=n))
    df["cont"] = cont
    df["tied"] = tied
    df["errs"] = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return df


OPTION_SETS = [
    {},
    {"tie_method": "min", "ks_pairs": "adjacent", "walk_weighting": "uniform"},
    {"root_duplication": False, "degenerate_walk": "skip", "tie_method": "dense"},
    {"walks": "dag", "root_duplication": True, "tie_method": "max"},
]


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=seg_tables(), opts=st.sampled_from(OPTION_SETS), base=st.sampled_from(["paper", "graph"]))
def test_vectorised_equals_plain_loops(df, opts, base):
    protocol = PROTOCOLS[base].replace(**opts)
    inputs = prepare_inputs(read_scores(df, lower_is_better=["errs"]), subsets="none")
    wt = build_walk_table(inputs.structure, protocol.walks, protocol.root_duplication)
    wv, nv = walk_values(wt, inputs.scores, protocol, ALL, max_elements=200)  # tiny chunks: exercise chunking
    got = seg_means(wv, nv, wt.walk_seg, wt.n_segs, protocol.walk_weighting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = reference_seg_values(list(inputs.structure.segs), inputs.scores, protocol, ALL)
    np.testing.assert_allclose(got, want, atol=1e-12, equal_nan=True)


def test_doctests_of_the_analysis_modules():
    for mod in (rank, sep, delta, kendall, pair_acc, walks, intervals, resampling, significance, compare, pareto,
                pipeline, scores_io):
        res = doctest.testmod(mod)
        assert res.failed == 0, mod.__name__


@pytest.mark.parametrize("fn", [walk_rank, walk_sep, walk_delta, walk_kendall])
def test_degenerate_option_is_validated_by_every_kernel(fn):
    with pytest.raises(ValueError, match=r"degenerate to be one of \['zero', 'skip'\], got 'zreo'"):
        fn([0, 1], [0.2, 0.1], degenerate="zreo")
    assert fn([0, 0], [0.2, 0.1], degenerate="zero") == 0.0
    assert math.isnan(fn([0, 0], [0.2, 0.1], degenerate="skip"))
