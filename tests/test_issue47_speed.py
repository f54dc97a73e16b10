"""Issue 47 (speed of ``ts2 analyze`` at 100k images): each loop turned into array operations
gives what the loop gave, on random and tie-heavy inputs.

The loops kept here are the implementations the vectorised code replaced, verbatim but for names.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from analysis.pipeline import missing_notes
from analysis.scores_io import prepare_inputs, read_scores
from analysis.walks import build_walk_table


def random_table(seed: int, n_segs: int = 40, missing: float = 0.1) -> pd.DataFrame:
    """SEGs of 1-4 levels (1-3 variants past level 0) and 0-3 images per node; three metrics, one
    of them on a coarse grid (ties), each with about ``missing`` of its cells blank."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_segs):
        for lev in range(int(rng.integers(1, 5))):
            for v in range(1 if lev == 0 else int(rng.integers(1, 4))):
                label = str(lev) if lev == 0 else f"{lev}{'abc'[v]}"
                for k in range(int(rng.integers(0, 4)) or 1):
                    rows.append({"seg_id": f"s{s}", "node": label, "file_name": f"{s}-{label}-{k}",
                                 "smooth": rng.normal(), "tied": float(rng.integers(0, 3)), "sparse": rng.random()})
    df = pd.DataFrame(rows)
    for m in ("smooth", "tied"):
        df.loc[rng.random(len(df)) < missing, m] = np.nan
    df.loc[rng.random(len(df)) < 4 * missing, "sparse"] = np.nan  # whole SEGs and walks lost
    return df


def missing_notes_loop(scores, structure, wt, protocol, metrics):
    """:func:`analysis.pipeline.missing_notes` as it was: two array operations per SEG and metric."""
    kept = set(wt.seg_ids)
    segs = [s for s in structure.segs if s.seg_id in kept]
    seg_rows = [np.concatenate(s.rows) if s.rows else np.zeros(0, dtype=int) for s in segs]
    n_cells = sum(len(r) for r in seg_rows)
    out = []
    for j, m in enumerate(metrics):
        miss = np.isnan(scores[:, j])
        n_miss = sum(int(miss[r].sum()) for r in seg_rows)
        if not n_miss:
            continue
        n_segs = sum(bool(miss[r].any()) for r in seg_rows)
        walks = sum(int((miss[np.where(b.rows >= 0, b.rows, 0)] & (b.rows >= 0)).any(axis=1).sum())
                    for b in wt.buckets)
        out.append(f"protocol {protocol}: metric {m!r} has {n_miss} of {n_cells} cells missing (blank, NaN or a "
                   f"failure code read as missing), in {n_segs} of {len(segs)} SEGs; {walks} of {wt.n_walks} "
                   "walks pass through one")
    return tuple(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("missing", [0.0, 0.05, 0.3])
def test_missing_notes_equal_the_per_seg_loop(seed, missing):
    inputs = prepare_inputs(read_scores(random_table(seed, missing=missing)), subsets="none")
    for walks, dup in (("levels", True), ("dag", False)):
        # every SEG, and a selection (SEGs left out of a protocol are not counted)
        for ids in (None, inputs.structure.seg_ids[::3]):
            wt = build_walk_table(inputs.structure, walks, dup, ids)
            got = missing_notes(inputs.scores, inputs.structure, wt, "p", inputs.metrics)
            assert got == missing_notes_loop(inputs.scores, inputs.structure, wt, "p", inputs.metrics)
            assert (len(got) > 0) == (missing > 0)


def seg_image_rows_loop(segs):
    """:func:`analysis.walks.seg_image_rows` as :func:`analysis.chance.linear_null_variance` built
    it: three arrays per node."""
    rows, seg, node = [], [], []
    for j, s in enumerate(segs):
        for q, r in enumerate(s.rows):
            rows.append(r)
            seg.append(np.full(len(r), j))
            node.append(np.full(len(r), q))
    if not rows:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(3))
    return np.concatenate(rows), np.concatenate(seg), np.concatenate(node)


@pytest.mark.parametrize("seed", [0, 3])
def test_seg_image_rows_equal_the_per_node_loop(seed):
    from analysis.walks import seg_image_rows

    # nodes without a scored image (a table without some of the dataset's rows), SEGs without any
    df = random_table(seed)
    inputs = prepare_inputs(read_scores(df), subsets="none")
    segs = list(inputs.structure.segs)
    rng = np.random.default_rng(seed)
    emptied = [type(s)(s.seg_id, s.subset, s.labels, s.levels, tuple(r[rng.random(len(r)) < 0.5] for r in s.rows), s.seg)
               for s in segs]
    for sel in (segs, segs[::-1][:7], emptied, [emptied[0]] * 3, []):
        got, want = seg_image_rows(sel), seg_image_rows_loop(sel)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, w)


def _moments_loop(z):
    """``analysis.aggregate._moments`` of one SEG's rows, as it was (called once per SEG)."""
    ok = ~np.isnan(z)
    n = ok.sum(axis=0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, np.where(ok, z, 0.0).sum(axis=0) / n, 0.0)
    m2 = np.where(ok, (z - mean) ** 2, 0.0).sum(axis=0)
    return n, mean, m2


def normaliser_moments_loop(scores, structure, seg_ids, how):
    """:func:`analysis.aggregate.normaliser_moments` as it was: the moments SEG by SEG."""
    from analysis.aggregate import NormaliserMoments, _pow2_scale

    keep = None if seg_ids is None else set(seg_ids)
    per_seg = [np.concatenate(s.rows) if s.rows else np.zeros(0, dtype=np.int64)
               for s in structure.segs if keep is None or s.seg_id in keep]
    inside = np.zeros(structure.n_rows, dtype=bool)
    for r in per_seg:
        inside[r.astype(np.int64)] = True
    outside = np.flatnonzero(~inside) if how == "std_all" else np.zeros(0, dtype=np.int64)
    if seg_ids is not None:
        by_id = {s.seg_id: np.concatenate(s.rows) if s.rows else np.zeros(0, np.int64) for s in structure.segs}
        per_seg = [by_id[i] for i in seg_ids]
    scale = _pow2_scale(scores)
    y = scores / scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        center = np.nan_to_num(np.nanmean(y, axis=0))
    z = y - center
    parts = [_moments_loop(z[r.astype(np.int64)]) for r in per_seg]
    n_m = scores.shape[1]
    n, mean, m2 = (np.stack([p[i] for p in parts]) if parts else np.zeros((0, n_m)) for i in range(3))
    fn, fmean, fm2 = _moments_loop(z[outside])
    return NormaliserMoments(n, mean, m2, fn, fmean, fm2, scale)


@pytest.mark.parametrize("seed", [0, 4])
@pytest.mark.parametrize("how", ["std_all", "std_included"])
def test_normaliser_moments_and_std_equal_the_per_seg_loop(seed, how):
    """The same bits: each SEG's rows are summed one after the other in both (np.bincount), on
    smooth, tied (a coarse grid) and sparse columns, large magnitudes, and with SEGs left out."""
    from analysis.aggregate import _pow2_scale, normaliser_moments, score_std

    df = random_table(seed, n_segs=60)
    df["huge"] = df["smooth"] * 1e150 + 3e151  # scaled by a power of two first: no overflow
    inputs = prepare_inputs(read_scores(df), subsets="none")
    ids = inputs.structure.seg_ids
    rng = np.random.default_rng(seed)
    for sel in (None, list(rng.permutation(ids)[:25]), [], ids[:1]):
        got = normaliser_moments(inputs.scores, inputs.structure, sel, how)
        want = normaliser_moments_loop(inputs.scores, inputs.structure, sel, how)
        for f in ("n", "mean", "m2", "fixed_n", "fixed_mean", "fixed_m2", "scale"):
            np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f)
        counts = rng.integers(0, 3, (50, len(got.n)))
        np.testing.assert_array_equal(got.std(counts), want.std(counts))
        keep = None if sel is None else set(sel)
        per_seg = [np.concatenate(s.rows) for s in inputs.structure.segs if keep is None or s.seg_id in keep]
        x = inputs.scores if how == "std_all" else inputs.scores[np.concatenate(per_seg).astype(np.int64)] \
            if per_seg else inputs.scores[:0]
        want_sd = [np.nan if (~np.isnan(c)).sum() < 2 else
                   (c[~np.isnan(c)] / s).std(ddof=1) * s for c, s in zip(x.T, _pow2_scale(x), strict=True)]
        np.testing.assert_array_equal(score_std(inputs.scores, inputs.structure, sel, how), want_sd)


def walks_networkx(g):
    """:func:`seg_data.graph.walks` as it was: networkx's DAG check and simple paths."""
    import networkx as nx

    from seg_data.model import label_sort_key

    if not nx.is_directed_acyclic_graph(g):
        raise nx.NetworkXUnfeasible("cycle")
    roots = [n for n in g if g.in_degree(n) == 0 and g.out_degree(n) > 0]
    sinks = {n for n in g if g.out_degree(n) == 0 and g.in_degree(n) > 0}
    out = []
    for r in roots:
        out.extend(tuple(p) for p in nx.all_simple_paths(g, r, sinks))
    out.sort(key=lambda p: [label_sort_key(n) for n in p])
    return out


def count_walks_networkx(g):
    """:func:`seg_data.graph.count_walks` as it was: over networkx's topological order."""
    import networkx as nx

    paths = {}
    for n in reversed(list(nx.topological_sort(g))):
        children = list(g.successors(n))
        paths[n] = sum(paths[c] for c in children) if children else 1
    return sum(paths[n] for n in g if g.in_degree(n) == 0 and g.out_degree(n) > 0)


@pytest.mark.parametrize("seed", range(30))
def test_walks_and_count_equal_networkx(seed):
    """Random DAGs (several roots, skipped levels, isolated nodes, edges added in shuffled order)
    and the same with a cycle (refused by both)."""
    import random

    import networkx as nx

    from seg_data.graph import build_graph, count_walks, walks

    rng = random.Random(seed)
    n = 1 + seed % 12
    labels = [f"{i // 3}{'abc'[i % 3]}" for i in range(n)]
    edges = [(labels[i], labels[j]) for i in range(n) for j in range(i + 1, n)
             if labels[j][0] > labels[i][0] and rng.random() < 0.35]
    rng.shuffle(edges)
    g = build_graph({lbl: [] for lbl in rng.sample(labels, n)}, edges=edges)
    got = walks(g, max_walks=None)
    assert got == walks_networkx(g)
    assert count_walks(g) == count_walks_networkx(g) == len(got)
    if edges:
        u, v = edges[0]
        g.add_edge(v, u)
        for f, more in ((walks, (None,)), (count_walks, ()), (walks_networkx, ()), (count_walks_networkx, ())):
            with pytest.raises(nx.NetworkXUnfeasible):
                f(g, *more)


def test_gc_frozen_sets_aside_what_is_alive_for_the_block_only():
    import gc

    from seg_data.gcpause import gc_frozen

    alive = [[i] for i in range(1000)]
    assert gc.get_freeze_count() == 0
    with gc_frozen():
        assert gc.get_freeze_count() >= len(alive)
        made = [[i] for i in range(10)]  # objects made inside are collected as usual
        assert gc.is_tracked(made[0])
    assert gc.get_freeze_count() == 0
    with pytest.raises(KeyError), gc_frozen():
        raise KeyError("x")
    assert gc.get_freeze_count() == 0


def seg_layout_numpy(seg, walks: np.ndarray, walk_nodes) -> tuple:
    """:func:`analysis.compute._seg_layout` as it was: numpy on every walk's row of visits."""
    index = {lbl: i for i, lbl in enumerate(seg.labels)}
    levels = sorted(set(seg.levels))
    node_level = np.array([levels.index(v) for v in seg.levels], dtype=np.int64)
    mult = np.zeros((len(walks), len(seg.labels)))
    pools: dict[tuple[int, tuple[tuple[int, int], ...]], int] = {}
    walk_pool = []
    for i, w in enumerate(walks):
        for lbl in walk_nodes[w]:
            mult[i, index[lbl]] += 1
        on = np.flatnonzero(mult[i])
        mine = []
        for lev in sorted({int(node_level[p]) for p in on}):
            at = [int(p) for p in on if node_level[p] == lev]
            # One node (repeated or not) has its own ECDF; several pool with their multiplicities.
            key = (lev, ((at[0], 1),) if len(at) == 1 else tuple((p, int(mult[i, p])) for p in at))
            mine.append(pools.setdefault(key, len(pools)))
        walk_pool.append(mine)
    pool_mix = np.zeros((len(pools), len(seg.labels)))
    pool_level = np.zeros(len(pools), dtype=np.int64)
    for (lev, members), q in pools.items():
        pool_level[q] = lev
        for p, c in members:
            pool_mix[q, p] = c
    wp = np.full((len(walks), len(levels)), -1, dtype=np.int64)
    for i, mine in enumerate(walk_pool):
        wp[i, pool_level[mine]] = mine
    rows = np.concatenate(seg.rows) if seg.rows else np.zeros(0, np.int64)
    node = np.repeat(np.arange(len(seg.rows)), [len(r) for r in seg.rows])
    return walks, rows, node, node_level, mult, len(levels), pool_mix, pool_level, wp


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("walks, dup", [("levels", True), ("levels", False), ("dag", False), ("dag", True)])
def test_seg_layout_equals_the_numpy_loop(seed, walks, dup):
    """Node multiplicities, level pools and each walk's pools: the same arrays (dtype included),
    with root duplication (a node visited twice) and levels with one to three variants."""
    from analysis.compute import _seg_layout

    inputs = prepare_inputs(read_scores(random_table(seed)), subsets="none")
    wt = build_walk_table(inputs.structure, walks, dup)
    by_id = {s.seg_id: s for s in inputs.structure.segs}
    checked = 0
    for j, sid in enumerate(wt.seg_ids):
        w = np.flatnonzero(wt.walk_seg == j)
        if not len(w):
            continue
        got, want = _seg_layout(by_id[sid], w, wt.walk_nodes), seg_layout_numpy(by_id[sid], w, wt.walk_nodes)
        for g, x in zip(got, want, strict=True):
            if isinstance(x, np.ndarray):
                assert g.dtype == x.dtype
            np.testing.assert_array_equal(g, x)
        checked += 1
    assert checked > 20


@pytest.mark.parametrize("seed", [0, 1])
def test_join_keeps_the_rows_whose_file_name_the_dataset_has(seed, tmp_path):
    """The dataset's image ids looked up through an index (``get_indexer``), as ``isin`` did:
    rows of unknown images (and a blank name) dropped and counted, the others joined in order."""
    from seg_data import load_path
    from seg_data.synthetic import make_synthetic

    ds = load_path(make_synthetic(tmp_path / "ds", n_segs=12, seed=seed, images=False))
    table = ds.image_table()[["seg_id", "node", "file_name"]].copy()
    rng = np.random.default_rng(seed)
    table["m"] = rng.random(len(table))
    extra = pd.DataFrame({"seg_id": ["900", "901"], "node": ["0", "0"], "file_name": ["nowhere.png", None], "m": [0.5, 0.5]})
    table = pd.concat([table.sample(frac=0.8, random_state=seed), extra], ignore_index=True).sample(frac=1, random_state=1)
    want = table["file_name"].isin({im.image_id for s in ds for _, im in s.iter_images()}).to_numpy()
    inputs = prepare_inputs(read_scores(table.reset_index(drop=True)), ds)
    assert inputs.scores.shape[0] == want.sum()
    np.testing.assert_array_equal(inputs.scores[:, 0], table["m"].to_numpy()[want])
    assert any("2 row(s)" in n and "not in dataset" in n for n in inputs.notes)
