"""build_walk_table gathers every walk's rows by array indexing: it must give exactly the table of
the plain loop it replaced (one concatenation per walk), on SEGs of every shape."""

from __future__ import annotations

import random

import numpy as np
import pytest

from analysis.walks import (
    LEVEL_PAD,
    SegNodes,
    Structure,
    WalkBucket,
    WalkTable,
    _bucket_edges,
    build_walk_table,
    protocol_walks,
    walk_count,
)
from seg_data import SEG, build_graph


def _reference_walk_table(structure, walks, root_duplication, seg_ids=None, max_walks=None) -> WalkTable:
    """The loop build_walk_table used before it was vectorised (log lines left out)."""
    wanted = None if seg_ids is None else set(map(str, seg_ids))
    segs = [s for s in structure.segs if wanted is None or s.seg_id in wanted]
    walk_seg, walk_nodes, walk_rows, walk_levels, walk_slots = [], [], [], [], []
    for si, s in enumerate(segs):
        node_index = {lbl: i for i, lbl in enumerate(s.labels)}
        node_levels = [np.full(len(r), lev, dtype=np.int64) for r, lev in zip(s.rows, s.levels, strict=True)]
        n_walks = walk_count(s, walks, root_duplication)
        ws = [] if max_walks is not None and n_walks > max_walks else protocol_walks(s, walks, root_duplication)
        for w in ws:
            idx = [node_index[n] for n in w]
            walk_seg.append(si)
            walk_nodes.append(tuple(w))
            walk_rows.append(np.concatenate([s.rows[i] for i in idx]))
            walk_levels.append(np.concatenate([node_levels[i] for i in idx]))
            walk_slots.append(len({s.levels[i] for i in idx}))
    lengths = np.array([len(r) for r in walk_rows], dtype=np.int64)
    slots = np.array(walk_slots, dtype=np.int64)
    buckets = []
    if len(lengths):
        edges = _bucket_edges(int(lengths.max()))
        which = np.searchsorted(edges, lengths)
        for b in np.unique(which):
            members = np.flatnonzero(which == b)
            width = max(int(lengths[members].max()), 1)
            rows = np.full((len(members), width), -1, dtype=np.int64)
            levs = np.full((len(members), width), LEVEL_PAD, dtype=np.int64)
            for k, w in enumerate(members):
                rows[k, :lengths[w]] = walk_rows[w]
                levs[k, :lengths[w]] = walk_levels[w]
            buckets.append(WalkBucket(members, rows, levs, int(slots[members].max())))
    return WalkTable(tuple(s.seg_id for s in segs), tuple(s.subset for s in segs),
                     np.asarray(walk_seg, dtype=np.int64), tuple(walk_nodes), tuple(buckets))


def _random_structure(rng: random.Random) -> Structure:
    """SEGs with 1-5 levels (some skipped), 1-3 nodes a level, 0-4 images a node (nodes without a
    scored image included), TS2-convention or random DAG edges; rows shuffled over the matrix."""
    segs, n_rows = [], 0
    for k in range(rng.randint(0, 12)):
        levels = sorted(rng.sample(range(6), rng.randint(1, 4)))
        if rng.random() < 0.8:
            levels = sorted({0, *levels})
        labels = [f"{lv}{chr(97 + j)}" if rng.random() < 0.7 else f"{lv}" for lv in levels
                  for j in range(rng.randint(1, 3))]
        labels = list(dict.fromkeys(labels))
        edges = None
        if rng.random() < 0.5:
            by = {lb: int("".join(c for c in lb if c.isdigit())) for lb in labels}
            edges = [(u, v) for u in labels for v in labels if by[u] < by[v] and rng.random() < 0.5]
        g = build_graph({lb: [] for lb in labels}, edges=edges)
        seg = SEG(seg_id=str(k), prompt="p", graph=g, subset=rng.choice([None, "A", "B"]))
        labs = tuple(seg.nodes)
        rows = []
        for _ in labs:
            n = rng.choice([0, 1, 1, 2, 3, 4])
            rows.append(np.arange(n_rows, n_rows + n, dtype=np.int64))
            n_rows += n
        segs.append(SegNodes(seg.seg_id, seg.subset, labs, tuple(seg.level(n) for n in labs), tuple(rows), seg))
    perm = np.random.default_rng(rng.randint(0, 10**6)).permutation(max(n_rows, 1))
    segs = [SegNodes(s.seg_id, s.subset, s.labels, s.levels, tuple(perm[r] for r in s.rows), s.seg) for s in segs]
    return Structure(tuple(segs), n_rows)


def _assert_same(a: WalkTable, b: WalkTable) -> None:
    assert a.seg_ids == b.seg_ids and a.subsets == b.subsets and a.walk_nodes == b.walk_nodes
    assert a.walk_seg.dtype == b.walk_seg.dtype and np.array_equal(a.walk_seg, b.walk_seg)
    assert len(a.buckets) == len(b.buckets)
    for x, y in zip(a.buckets, b.buckets, strict=True):
        for f in ("walk", "rows", "levels"):
            u, v = getattr(x, f), getattr(y, f)
            assert u.dtype == v.dtype and u.shape == v.shape and np.array_equal(u, v), f
        assert x.max_slots == y.max_slots and type(x.max_slots) is int


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("walks,root_duplication", [("levels", False), ("levels", True), ("dag", False), ("dag", True)])
def test_walk_table_equals_the_plain_loop(seed, walks, root_duplication):
    rng = random.Random(seed)
    st = _random_structure(rng)
    ids = None if rng.random() < 0.5 else [s.seg_id for s in st.segs if rng.random() < 0.6]
    max_walks = rng.choice([None, 3, 1000])
    _assert_same(build_walk_table(st, walks, root_duplication, ids, max_walks=max_walks),
                 _reference_walk_table(st, walks, root_duplication, ids, max_walks=max_walks))


def test_walk_table_of_no_seg_is_empty():
    t = build_walk_table(Structure((), 0), "levels", False)
    assert t.n_walks == 0 and t.buckets == () and t.walk_seg.dtype == np.int64
