"""The node-pair engine (analysis.compute.NodeLayout, analysis.metametrics.nodestats) against the
walk kernels (analysis.compute.walk_values), which sort every walk: the same walk values."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from analysis.chance import permute_within_segs
from analysis.compute import NodeLayout, walk_values
from analysis.metametrics import META_METRICS, NodeFormUnavailable, NodeStats, get_meta_metric
from analysis.protocols import get_protocol
from analysis.scores_io import prepare_inputs, read_scores
from analysis.walks import build_walk_table


def hostile_table(seed: int, n_segs: int = 14) -> pd.DataFrame:
    """SEGs with several level-0 nodes (duplicated-root walks pool two of them), empty and
    one-image nodes, skipped levels, heavy and light ties, and missing cells."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        n_levels = int(rng.integers(1, 5))
        for lev in range(n_levels):
            if lev and rng.random() < 0.15:
                continue  # a level with no node
            n_nodes = int(rng.integers(1, 4))
            for v in range(n_nodes):
                label = f"{lev}{'abc'[v]}" if n_nodes > 1 else str(lev)
                for k in range(int(rng.integers(1, 5))):
                    rows.append({"seg_id": f"s{s}", "node": label, "file_name": f"{s}-{label}-{k}",
                                 "smooth": 1 - 0.2 * lev + rng.normal(0, 0.3),
                                 "coarse": float(rng.integers(0, 3)),  # heavy ties
                                 "rounded": round(float(rng.normal(0.5 - 0.1 * lev, 0.2)), 1),
                                 "holes": rng.random() if rng.random() > 0.3 else np.nan,
                                 "constant": 1.0})
    return pd.DataFrame(rows)


PROTOCOLS = {
    "paper": get_protocol("paper"),
    "graph": get_protocol("graph"),
    "paper-adjacent-skip": dataclasses.replace(get_protocol("paper"), ks_pairs="adjacent", degenerate_walk="skip"),
    "graph-all-zero": dataclasses.replace(get_protocol("graph"), ks_pairs="all", degenerate_walk="zero"),
    "paper-min-ranks": dataclasses.replace(get_protocol("paper"), tie_method="min"),  # rank: walk kernel
}


@pytest.mark.parametrize("name", list(PROTOCOLS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_node_engine_equals_the_walk_kernels(name, seed):
    proto = PROTOCOLS[name]
    inputs = prepare_inputs(read_scores(hostile_table(seed)), subsets="none")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    # the columns as they are and 6 within-SEG permutations of them (the chance levels' use)
    perm = permute_within_segs(inputs.scores, [np.concatenate(by_id[i].rows) for i in table.seg_ids], 6,
                               np.random.default_rng(seed))
    scores = np.hstack([inputs.scores, perm])
    mms = list(META_METRICS)
    want, want_n = walk_values(table, scores, proto, mms)
    # a tiny memory bound forces the SEG and column chunking
    for bound in (4_000_000, 500):
        got, got_n = NodeLayout(table, inputs.structure).walk_values(scores, proto, mms, max_elements=bound)
        np.testing.assert_array_equal(got_n, want_n)
        for k, m in enumerate(mms):
            np.testing.assert_array_equal(np.isnan(got[:, k]), np.isnan(want[:, k]), err_msg=m)
            np.testing.assert_allclose(got[:, k], want[:, k], rtol=0, atol=1e-12, err_msg=m)
    assert np.isfinite(want).sum() > 1000  # the comparison is not over NaNs


@pytest.mark.parametrize("name", ["paper", "graph", "paper-adjacent-skip"])
def test_delta_linear_weights_give_delta(name):
    # delta as a linear form of the node sums (the exact chance band rests on it): the weights
    # applied to each node's sum of valid scores give the walk kernels' delta, NaN walks included.
    proto = PROTOCOLS[name]
    inputs = prepare_inputs(read_scores(hostile_table(3)), subsets="none")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    w = NodeLayout(table, inputs.structure).linear_weights(inputs.scores, proto, "delta")  # (M, P, W)
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    sums = np.zeros(w.shape)
    for j, sid in enumerate(table.seg_ids):
        for p, rows in enumerate(by_id[sid].rows):
            sums[:, p, table.walk_seg == j] = np.nansum(inputs.scores[rows], axis=0)[:, None]
    got = np.where(np.isnan(w).all(axis=1), np.nan, np.nansum(w * sums, axis=1))
    want = walk_values(table, inputs.scores, proto, ["delta"])[0][:, 0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.isfinite(want).sum() > 100 and np.abs(want[np.isfinite(want)]).max() > 0.1
    with pytest.raises(NodeFormUnavailable, match="not linear"):
        get_meta_metric("sep").linear_from_nodes(None, proto)


def test_composite_level_pools_are_met():
    # The hostile tables do hold walks with two different level-0 nodes (a pooled level), so the
    # pooled KS is what the equality above checks.
    proto = PROTOCOLS["paper"]
    inputs = prepare_inputs(read_scores(hostile_table(0)), subsets="none")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    lay = NodeLayout(table, inputs.structure)
    assert any((b.pool_mix.sum(axis=-1) > 1).any() for b in lay.batches)


def test_rank_without_a_node_form_says_so():
    stats = NodeStats(np.zeros((1, 2, 1)), np.zeros((1, 2), int), np.zeros((1, 1), int), np.ones((1, 1, 1)), 1,
                      np.ones((1, 1, 1)), np.zeros((1, 1), int), np.ones((1, 1, 1)))
    with pytest.raises(NodeFormUnavailable, match="tie_method='min'"):
        get_meta_metric("rank").from_nodes(stats, PROTOCOLS["paper-min-ranks"])
    no_form = dataclasses.replace(get_meta_metric("sep"), nodes=None)
    with pytest.raises(NodeFormUnavailable, match="no node-pair form"):
        no_form.from_nodes(stats, PROTOCOLS["paper"])


def test_hand_made_walk():
    # One SEG: root (two images, 0.9 and 0.5), level 1 (0.5 and 0.1); paper protocol duplicates the root.
    # Walk samples (level, score): (0, .9) x2, (0, .5) x2, (1, .5), (1, .1). Kendall pairs across levels:
    # right: .9>.5 (x2), .9>.1 (x2), .5>.1 (x2) = 6; tied: .5=.5 (x2) = 2; wrong: 0. pair_acc = (6 + 1) / 8.
    df = pd.DataFrame({"seg_id": ["a"] * 4, "node": ["0", "0", "1", "1"], "file_name": list("wxyz"),
                       "m": [0.9, 0.5, 0.5, 0.1]})
    inputs = prepare_inputs(read_scores(df), subsets="none")
    proto = get_protocol("paper")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    got, n = NodeLayout(table, inputs.structure).walk_values(inputs.scores, proto, ["pair_acc", "sep", "delta"])
    assert n.tolist() == [[6]]
    assert got[0, 0, 0] == pytest.approx(7 / 8)
    assert got[0, 1, 0] == pytest.approx(0.5)  # ECDFs {.5,.9} vs {.1,.5}: 1/2 apart at 0.1 and at 0.5
    assert got[0, 2, 0] == pytest.approx(0.7 - 0.3)  # level means 0.7 and 0.3


def _ks_by_enumeration(groups, m, n):
    """Mean two-sample KS statistic over every way to draw m, then n, of the scores."""
    from scipy.stats import ks_2samp

    vals = np.repeat(np.arange(len(groups)), groups).astype(float)
    total, count = 0.0, 0
    for a in itertools.combinations(range(len(vals)), m):
        rest = [i for i in range(len(vals)) if i not in a]
        for b in itertools.combinations(rest, n):
            total += ks_2samp(vals[list(a)], vals[list(b)]).statistic
            count += 1
    return total / count


def test_ks_null_means_equal_enumeration():
    # Random tie patterns and sample sizes, in one call (cases of different lengths share a
    # batch, sizes in either order), against every draw; untied cases against ks_null_mean.
    from analysis.metametrics.sep import ks_null_mean, ks_null_means

    rng = np.random.default_rng(5)
    groups, ms, ns = [], [], []
    while len(groups) < 40:
        total = int(rng.integers(2, 9))
        cuts = np.sort(rng.choice(np.arange(1, total), size=int(rng.integers(0, total - 1)), replace=False))
        g = tuple(np.diff(np.concatenate([[0], cuts, [total]])).tolist())
        m = int(rng.integers(1, total))
        groups.append(g)
        ms.append(m)
        ns.append(int(rng.integers(1, total - m + 1)))
    groups += [(2, 2, 1, 1, 3), (3, 1, 1, 2, 2)]  # one pattern and its reverse: the same null
    ms += [3, 2]
    ns += [2, 3]
    got = ks_null_means(groups, np.array(ms), np.array(ns))
    want = [_ks_by_enumeration(g, m, n) for g, m, n in zip(groups, ms, ns, strict=True)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[-1] == got[-2]
    assert len(set(np.round(got, 9))) > 15  # not a constant
    np.testing.assert_allclose(ks_null_means([(1,) * 30, (1,) * 9], np.array([12, 4]), np.array([7, 5])),
                               [ks_null_mean(7, 12), ks_null_mean(4, 5)], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="within the 4 scores, got 2 and 3"):
        ks_null_means([(2, 2)], np.array([2]), np.array([3]))


def tiny_table(seed: int) -> pd.DataFrame:
    """SEGs of at most 7 images (every permutation enumerable), with ties, a missing cell and a
    level-0 node pair (paper pools them)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, layout in enumerate(([("0a", 1), ("0b", 2), ("1", 2), ("2", 2)], [("0", 2), ("1", 3), ("3", 1)],
                                [("0", 1), ("1", 1), ("2", 2), ("3", 2)])):
        for label, size in layout:
            for k in range(size):
                rows.append({"seg_id": f"s{s}", "node": label, "file_name": f"{s}-{label}-{k}",
                             "coarse": float(rng.integers(0, 3)), "smooth": rng.random(),
                             "holes": np.nan if (s, label, k) == (1, "1", 0) else float(rng.integers(0, 2))})
    return pd.DataFrame(rows)


def every_permutation(inputs, table):
    """For each column ``j`` and SEG of ``table``: ``(j, the SEG's walks as a mask, x)``, ``x`` the
    score matrix repeated once per permutation of the SEG's valid scores in column ``j`` (every
    one, each a column; other rows as they are)."""
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    for j in range(inputs.scores.shape[1]):
        for s, sid in enumerate(table.seg_ids):
            rows = np.concatenate(by_id[sid].rows)
            rows = rows[~np.isnan(inputs.scores[rows, j])]
            perms = list(itertools.permutations(rows))
            x = np.repeat(inputs.scores[:, j:j + 1], len(perms), axis=1)
            for q, p in enumerate(perms):
                x[rows, q] = inputs.scores[list(p), j]
            yield j, table.walk_seg == s, x


@pytest.mark.parametrize("name", ["paper", "graph", "paper-adjacent-skip"])
@pytest.mark.parametrize("seed", [0, 1])
def test_null_means_equal_the_mean_over_every_permutation(name, seed):
    # Each walk's exact null expectation (every meta-metric that has one) against the mean of its
    # value over every within-SEG permutation of the valid scores, through the walk kernels.
    proto = PROTOCOLS[name]
    inputs = prepare_inputs(read_scores(tiny_table(seed)), subsets="none")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    mms = list(META_METRICS)
    got = NodeLayout(table, inputs.structure).null_means(inputs.scores, proto, mms)
    want = np.zeros_like(got)
    for j, walks, x in every_permutation(inputs, table):
        want[j][:, walks] = walk_values(table, x, proto, mms)[0][:, :, walks].mean(axis=0)
    sep = mms.index("sep")
    assert np.isfinite(got[:, sep]).all()  # sep is exact everywhere here, ties included
    known = ~np.isnan(got)
    assert known.sum() > 0.7 * got.size
    np.testing.assert_allclose(got[known], want[known], rtol=0, atol=1e-12)
    # and the tied column's sep null is not the untied one
    from analysis.metametrics.sep import ks_null_mean

    assert not np.isclose(got[0, sep], ks_null_mean(1, 1)).all()


@pytest.mark.parametrize("name", ["paper", "paper-adjacent-skip", "dag-duplicated-root"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_null_stand_ins_have_the_walk_values_mean_over_every_permutation(name, seed):
    # rank's and kendall's stand-ins for walks with a duplicated root (conditional expectations
    # minus control variates of mean 0): over EVERY within-SEG permutation of the valid scores
    # their mean equals the walk values' mean (the walk kernels'), so the chance level they give
    # is the same; and they vary far less. Ties, a missing cell and two level-0 nodes included.
    proto = dataclasses.replace(get_protocol("graph"), root_duplication=True) if name == "dag-duplicated-root" \
        else PROTOCOLS[name]
    inputs = prepare_inputs(read_scores(tiny_table(seed)), subsets="none")
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    layout = NodeLayout(table, inputs.structure)
    mms = ["rank", "kendall"]
    checked, var_value, var_stand_in = 0, 0.0, 0.0
    for _, walks, x in every_permutation(inputs, table):
        _, _, est = layout.walk_values(x, proto, mms, estimates=mms)
        value = walk_values(table, x, proto, mms)[0][:, :, walks]
        est = est[:, :, walks]
        has = ~np.isnan(est[0])
        assert np.array_equal(has, ~np.isnan(est).any(axis=0))  # a walk has one under every permutation
        # only walks that repeat a node (and whose value can move)
        dup = np.array([nodes[0] == nodes[1] for nodes in np.array(table.walk_nodes, dtype=object)[walks]])
        assert (has <= dup[None, :]).all() and has.any()
        np.testing.assert_allclose(est.mean(axis=0)[has], value.mean(axis=0)[has], rtol=0, atol=1e-13)
        checked += int(has.sum())
        var_value += float(value.var(axis=0)[has].sum())
        var_stand_in += float(est.var(axis=0)[has].sum())
    assert checked >= 20
    assert var_stand_in < 0.05 * var_value, (var_stand_in, var_value)


def test_null_stand_ins_need_average_ranks():
    inputs = prepare_inputs(read_scores(tiny_table(0)), subsets="none")
    proto = PROTOCOLS["paper-min-ranks"]
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    _, _, est = NodeLayout(table, inputs.structure).walk_values(inputs.scores, proto, ["rank", "kendall"],
                                                                estimates=["rank", "kendall"])
    assert np.isnan(est[:, 0]).all() and not np.isnan(est[:, 1]).all()  # kendall has no tie method


def test_sep_null_means_leave_out_pools_too_large_for_the_exact_computation():
    # Pool pairs beyond KS_NULL_MAX_WORK get no exact expectation (NaN: estimated by
    # permutation), the others theirs.
    from analysis.metametrics.sep import KS_NULL_MAX_WORK, ks_null_means

    rng = np.random.default_rng(0)
    rows = []
    for seg, sizes in (("big", (60, 50)), ("small", (3, 4))):
        for lev, size in enumerate(sizes):
            for k in range(size):
                rows.append({"seg_id": seg, "node": str(lev), "file_name": f"{seg}-{lev}-{k}",
                             "m": round(float(rng.random()), 1)})
    inputs = prepare_inputs(read_scores(pd.DataFrame(rows)), subsets="none")
    proto = PROTOCOLS["graph"]
    table = build_walk_table(inputs.structure, proto.walks, proto.root_duplication)
    mean = NodeLayout(table, inputs.structure).null_means(inputs.scores, proto, ["sep"])
    assert 110 * 300 * 61 * 51 > KS_NULL_MAX_WORK
    big = table.seg_ids.index("big")
    small = np.sort(inputs.scores[np.concatenate(inputs.structure.segs[1].rows), 0])
    groups = tuple(np.unique(small, return_counts=True)[1].tolist())
    for w, s in enumerate(table.walk_seg):
        if s == big:
            assert np.isnan(mean[0, 0, w])
        else:
            assert mean[0, 0, w] == pytest.approx(ks_null_means([groups], np.array([3]), np.array([4]))[0])
