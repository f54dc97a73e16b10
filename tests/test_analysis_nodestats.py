"""The node-pair engine (analysis.compute.NodeLayout, analysis.metametrics.nodestats) against the
walk kernels (analysis.compute.walk_values), which sort every walk: the same walk values."""

from __future__ import annotations

import dataclasses

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


def test_sep_control_leaves_out_pools_too_large_for_the_exact_null():
    # ks_null_mean costs (m n)^2: pool pairs over KS_NULL_MAX_CELLS get no control (NaN), the
    # others theirs, and the values themselves stay the kernels'.
    from analysis.metametrics.sep import KS_NULL_MAX_CELLS, ks_null_mean

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
    values, _, control, mean = NodeLayout(table, inputs.structure).null_values(
        inputs.scores, proto, ["sep"], np.random.default_rng(1))
    assert 60 * 50 > KS_NULL_MAX_CELLS
    big = table.seg_ids.index("big")
    for w, s in enumerate(table.walk_seg):
        if s == big:
            assert np.isnan(mean[0, 0, w]) and np.isfinite(values[0, 0, w])
        else:
            assert mean[0, 0, w] == pytest.approx(ks_null_mean(3, 4))
            assert 0 <= control[0, 0, w] <= 1
    np.testing.assert_allclose(values, walk_values(table, inputs.scores, proto, ["sep"])[0], atol=1e-12)
