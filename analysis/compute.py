"""Per-walk meta-metric values for many metrics at once (the vectorised engine).

Every walk bucket of a :class:`~analysis.walks.WalkTable` is gathered for all metric columns in
one fancy-indexing step, stacked as rows ``(metric, walk)``, and handed in memory-bounded chunks
to :class:`~analysis.metametrics.walkstats.WalkStats`; each registered meta-metric then reads
what it needs from the shared sorted statistics (:func:`walk_values`: the reference, used for
the observed values).

:class:`NodeLayout` gives the same walk values from node-pair statistics
(:class:`~analysis.metametrics.nodestats.NodeStats`): each SEG ranked once, each walk a few small
products over its nodes. It serves the chance levels, which need hundreds of permuted columns
(:class:`SegPermutation`: permuted where used, batch by batch), and falls back to the walk
kernels for a meta-metric or option without a node-pair form.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .metametrics import NodeFormUnavailable, NodeStats, WalkStats, get_meta_metric
from .metametrics.nodestats import size_class
from .protocols import Protocol
from .walks import Structure, WalkBucket, WalkTable

__all__ = ["walk_values", "NodeLayout", "SegPermutation", "permute_by_keys"]


def walk_values(table: WalkTable, scores: np.ndarray, protocol: Protocol, meta_metrics: Sequence[str],
                max_elements: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Meta-metric values and valid-sample counts of every walk for every metric column.

    Parameters
    ----------
    table : WalkTable
        Walks (rows into ``scores``) of the analysed SEGs.
    scores : ndarray, shape (n_rows, n_metrics)
        Oriented scores (higher is better), NaN where missing.
    protocol : Protocol
        Supplies each meta-metric's options.
    meta_metrics : sequence of str
        Registered meta-metric names.
    max_elements : int
        Bound on the largest temporary array (``rows x width x slot pairs``), for memory.

    Returns
    -------
    values : ndarray, shape (n_metrics, n_meta_metrics, n_walks)
    n_valid : ndarray, shape (n_metrics, n_walks)
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 2:
        raise ValueError(f"expected a 2-D score matrix (rows x metrics), got shape {scores.shape}")
    specs = [get_meta_metric(k) for k in meta_metrics]
    n_m = scores.shape[1]
    values = np.full((n_m, len(specs), table.n_walks), np.nan)
    n_valid = np.zeros((n_m, table.n_walks), dtype=np.int64)
    padded = np.vstack([scores, np.full((1, n_m), np.nan)])  # row -1 -> the NaN row
    for b in table.buckets:
        n_b, width = b.rows.shape
        s = b.max_slots + 1
        per_row = width * max(s * s, 1)
        step = max(1, int(max_elements // per_row))
        # Gather the scores of a slice of the bucket's walks at a time: all of them for every
        # column at once is n_walks x width x n_metrics (gigabytes for permuted copies of a
        # 100k-image table).
        w_step = max(1, int(max_elements // max(width * n_m, 1)))
        for w_lo in range(0, n_b, w_step):
            rows = b.rows[w_lo:w_lo + w_step]
            walk = b.walk[w_lo:w_lo + w_step]
            wb = len(rows)
            y = padded[rows]  # (wb, width, n_m)
            y = np.ascontiguousarray(y.transpose(2, 0, 1)).reshape(n_m * wb, width)
            lev = np.broadcast_to(b.levels[w_lo:w_lo + w_step], (n_m, wb, width)).reshape(n_m * wb, width)
            for lo in range(0, n_m * wb, step):
                hi = min(lo + step, n_m * wb)
                stats = WalkStats(lev[lo:hi], y[lo:hi], levels_sorted=True)
                r = np.arange(lo, hi)
                m_idx, w_idx = r // wb, walk[r % wb]
                n_valid[m_idx, w_idx] = stats.n
                for k, spec in enumerate(specs):
                    values[m_idx, k, w_idx] = spec(stats, protocol)
    return values, n_valid


def permute_by_keys(values: np.ndarray, keys: np.ndarray, axis: int = 0) -> np.ndarray:
    """Each column's valid (non-NaN) values, in ascending order of ``keys``, put back into the
    column's valid positions in their order; NaN positions stay.

    With uniform random ``keys`` this is a uniform random permutation of the valid values (the
    chance levels' null); one key per position makes it independent of how positions are batched.

    Examples
    --------
    >>> permute_by_keys(np.array([1.0, np.nan, 2.0, 3.0]), np.array([0.5, 0.1, 0.9, 0.2])).tolist()  # keys .5 .9 .2
    [3.0, nan, 1.0, 2.0]
    """
    v = np.asarray(values, dtype=float)
    valid = ~np.isnan(v)
    src = np.argsort(np.where(valid, keys, np.inf), axis=axis, kind="stable")  # valid by key, then NaN
    dst = np.argsort(~valid, axis=axis, kind="stable")  # valid positions in order, then NaN ones
    out = np.empty_like(v)
    np.put_along_axis(out, dst, np.take_along_axis(v, src, axis=axis), axis=axis)
    return out


@dataclass(frozen=True)
class SegPermutation:
    """Permuted columns, made where they are used: column ``j`` is ``scores[:, source[j]]`` with
    each SEG's valid scores reordered by ``keys[:, j]`` (:func:`permute_by_keys`, a SEG's rows in
    structure order), so no permuted copy of the whole table is ever held."""

    keys: np.ndarray  # (n_rows, n_columns)
    source: np.ndarray  # (n_columns,) column of the score matrix


@dataclass(frozen=True)
class _SegBatch:
    """SEGs of one padded shape: their walks as node multiplicities (see :class:`NodeLayout`)."""

    walk: np.ndarray  # (S, W) global walk index, -1 on padding
    rows: np.ndarray  # (S, R) score-matrix rows, -1 on padding (the NaN row)
    node: np.ndarray  # (S, R) node of each row
    node_level: np.ndarray  # (S, P) dense level index, -1 on padded nodes
    mult: np.ndarray  # (S, W, P) visits of each node by each walk
    n_levels: int
    pool_mix: np.ndarray  # (S, Q, P) node counts of each level pool
    pool_level: np.ndarray  # (S, Q) dense level of each pool, -1 on padding
    walk_pool: np.ndarray  # (S, W, L) the walk's pool on each level, -1: none

    def steps(self, n_columns: int, max_elements: int) -> tuple[int, int]:
        """SEGs and columns of this batch per :class:`NodeStats`, so its largest temporaries stay
        near ``max_elements``."""
        S, R = self.rows.shape
        _, W, P = self.mult.shape
        Q = self.pool_mix.shape[1]
        # Largest temporaries per SEG and column: pool-pair KS (Q^2 / 2, R), tie sizes (W, R),
        # adjacent-pair masks (W, Q, Q), node-pair counts (P, P, R) in the products.
        per = max(Q * Q * R // 2, W * R, W * Q * Q, W * P, P * P, 1)
        s_step = max(1, max_elements // (per * n_columns))
        return s_step, (n_columns if s_step > 1 or per * n_columns <= max_elements else max(1, max_elements // per))

    def stats(self, values: np.ndarray, segs: slice) -> NodeStats:
        return NodeStats(values, self.node[segs], self.node_level[segs], self.mult[segs], self.n_levels,
                         self.pool_mix[segs], self.pool_level[segs], self.walk_pool[segs])


def _seg_layout(seg, walks: np.ndarray, walk_nodes) -> tuple:
    """One SEG's arrays for :class:`_SegBatch` (unpadded).

    Plain Python over the few nodes of each walk: numpy calls on rows of a handful of elements
    cost more than they compute (thousands of SEGs per analysis).
    """
    index = {lbl: i for i, lbl in enumerate(seg.labels)}
    dense = {v: k for k, v in enumerate(sorted(set(seg.levels)))}
    lev_of = [dense[v] for v in seg.levels]
    n_p = len(seg.labels)
    pools: dict[tuple[int, tuple[tuple[int, int], ...]], int] = {}
    visits: list[int] = []  # walk * n_p + node, once per visit
    walk_pool = []
    for i, w in enumerate(walks):
        count: dict[int, int] = {}
        for lbl in walk_nodes[w]:
            p = index[lbl]
            count[p] = count.get(p, 0) + 1
            visits.append(i * n_p + p)
        on_level: dict[int, list[int]] = {}
        for p in sorted(count):
            on_level.setdefault(lev_of[p], []).append(p)
        mine = []
        for lev in sorted(on_level):
            at = on_level[lev]
            # One node (repeated or not) has its own ECDF; several pool with their multiplicities.
            key = (lev, ((at[0], 1),) if len(at) == 1 else tuple((p, count[p]) for p in at))
            mine.append(pools.setdefault(key, len(pools)))
        walk_pool.append(mine)
    mult = np.bincount(np.asarray(visits, dtype=np.int64), minlength=len(walks) * n_p).reshape(len(walks), n_p) \
        .astype(float)
    pool_mix = np.zeros((len(pools), n_p))
    pool_level = np.zeros(len(pools), dtype=np.int64)
    for (lev, members), q in pools.items():
        pool_level[q] = lev
        for p, c in members:
            pool_mix[q, p] = c
    wp = np.full((len(walks), len(dense)), -1, dtype=np.int64)
    for i, mine in enumerate(walk_pool):
        wp[i, pool_level[mine]] = mine
    rows = np.concatenate(seg.rows) if seg.rows else np.zeros(0, np.int64)
    node = np.repeat(np.arange(len(seg.rows)), [len(r) for r in seg.rows])
    return walks, rows, node, np.array(lev_of, dtype=np.int64), mult, len(dense), pool_mix, pool_level, wp


class NodeLayout:
    """The walks of a :class:`~analysis.walks.WalkTable` as node multiplicities and level pools,
    for :class:`~analysis.metametrics.NodeStats` (independent of the scores: build once, use for
    many score matrices).

    SEGs are grouped by padded shape (nodes, rows, walks, levels, pools), so one batch of array
    operations serves many SEGs.
    """

    def __init__(self, table: WalkTable, structure: Structure) -> None:
        self.table = table
        by_id = {s.seg_id: s for s in structure.segs}
        order = np.argsort(table.walk_seg, kind="stable")
        bounds = np.searchsorted(table.walk_seg[order], np.arange(table.n_segs + 1))
        groups: dict[tuple[int, ...], list[tuple]] = {}
        for j, sid in enumerate(table.seg_ids):
            walks = order[bounds[j]:bounds[j + 1]]
            if len(walks):
                lay = _seg_layout(by_id[sid], walks, table.walk_nodes)
                key = tuple(size_class(n) for n in (lay[4].shape[1], len(lay[1]), len(walks), lay[5], len(lay[7])))
                groups.setdefault(key, []).append(lay)
        self.seg_rows = [m[1] for members in groups.values() for m in members]
        self.batches: list[_SegBatch] = []
        for (P, R, W, L, Q), members in groups.items():
            S = len(members)
            b = _SegBatch(np.full((S, W), -1, np.int64), np.full((S, R), -1, np.int64), np.zeros((S, R), np.int64),
                          np.full((S, P), -1, np.int64), np.zeros((S, W, P)), L, np.zeros((S, Q, P)),
                          np.full((S, Q), -1, np.int64), np.full((S, W, L), -1, np.int64))
            for i, (walks, rows, node, node_level, mult, _, pool_mix, pool_level, wp) in enumerate(members):
                b.walk[i, :len(walks)] = walks
                b.rows[i, :len(rows)] = rows
                b.node[i, :len(node)] = node
                b.node_level[i, :len(node_level)] = node_level
                b.mult[i, :mult.shape[0], :mult.shape[1]] = mult
                b.pool_mix[i, :pool_mix.shape[0], :pool_mix.shape[1]] = pool_mix
                b.pool_level[i, :len(pool_level)] = pool_level
                b.walk_pool[i, :wp.shape[0], :wp.shape[1]] = wp
            self.batches.append(b)

    def walk_values(self, scores: np.ndarray, protocol: Protocol, meta_metrics: Sequence[str],
                    max_elements: int = 4_000_000, *, permutation: SegPermutation | None = None,
                    estimates: Sequence[str] | None = None) -> tuple[np.ndarray, ...]:
        """:func:`walk_values` of ``scores`` (or of its ``permutation``) from node-pair statistics
        (equal to rounding).

        Walks (or meta-metric options) without a node-pair form go through :func:`walk_values`.
        With ``estimates`` (meta-metric names), a third array of the same shape as the values:
        those meta-metrics' lower-variance stand-ins with the same null expectation
        (:meth:`~analysis.metametrics.MetaMetricSpec.null_estimate_from_nodes`), NaN where none
        and for the other meta-metrics.
        """
        return self._run(scores, protocol, meta_metrics, max_elements, permutation, estimates)

    def null_means(self, scores: np.ndarray, protocol: Protocol, meta_metrics: Sequence[str],
                   max_elements: int = 4_000_000) -> np.ndarray:
        """``(n_metrics, n_meta_metrics, n_walks)`` exact expected walk values of ``scores`` under
        the within-SEG permutation null (:meth:`~analysis.metametrics.MetaMetricSpec.null_from_nodes`),
        NaN where a meta-metric has no closed form."""
        scores = np.asarray(scores, dtype=float)
        out = np.full((scores.shape[1], len(meta_metrics), self.table.n_walks), np.nan)
        parts, batches = self._unpermuted(scores, max_elements)
        for k, name in enumerate(meta_metrics):
            for (b, sl, cl), v in zip(parts, get_meta_metric(name).null_from_nodes(batches, protocol), strict=True):
                walk = b.walk[sl]
                ok = walk >= 0
                out[cl, k, walk[ok]] = v.transpose(1, 0, 2)[:, ok]
        return out

    def linear_weights(self, scores: np.ndarray, protocol: Protocol, meta_metric: str,
                       max_elements: int = 4_000_000) -> np.ndarray:
        """``(n_metrics, n_nodes, n_walks)``: the weight of each walk's value on the sum of the valid
        scores of its SEG's node ``p`` (``p`` indexes the SEG's nodes, as ``Seg.rows``), for a
        meta-metric linear in the scores (:meth:`~analysis.metametrics.MetaMetricSpec.linear_from_nodes`);
        NaN on walks whose value is NaN."""
        scores = np.asarray(scores, dtype=float)
        spec = get_meta_metric(meta_metric)
        n_nodes = max((b.mult.shape[2] for b in self.batches), default=0)
        out = np.full((scores.shape[1], n_nodes, self.table.n_walks), np.nan)
        parts, batches = self._unpermuted(scores, max_elements)
        for (b, sl, cl), st in zip(parts, batches, strict=True):
            walk = b.walk[sl]
            ok = walk >= 0
            w = spec.linear_from_nodes(st, protocol)  # (S, B, W, P)
            out[cl, :w.shape[-1], walk[ok]] = w.transpose(1, 0, 2, 3)[:, ok].transpose(0, 2, 1)
        return out

    def _unpermuted(self, scores: np.ndarray, max_elements: int) -> tuple[list, Sequence[NodeStats]]:
        """The ``(batch, SEG slice, column slice)`` parts of memory-bounded size, and their node
        statistics, built on access (a closed form may read them twice), so they are never all
        held at once."""
        n_m = scores.shape[1]
        padded = np.vstack([scores, np.full((1, n_m), np.nan)])  # row -1 -> the NaN row
        parts = list(self._parts(n_m, max_elements))
        return parts, _Lazy(lambda k: parts[k][0].stats(padded[parts[k][0].rows[parts[k][1]]][:, :, parts[k][2]],
                                                        parts[k][1]), len(parts))

    def permuted(self, scores: np.ndarray, permutation: SegPermutation) -> np.ndarray:
        """The ``(n_rows, n_columns)`` matrix of ``permutation`` (rows of no SEG as they are)."""
        out = np.asarray(scores, dtype=float)[:, permutation.source].copy()
        for rows in self.seg_rows:
            out[rows] = permute_by_keys(out[rows], permutation.keys[rows], axis=0)
        return out

    def _parts(self, n_m: int, max_elements: int):
        """The ``(batch, SEG slice, column slice)`` parts of memory-bounded size over ``n_m`` columns,
        batch by batch, SEGs outer."""
        for b in self.batches:
            S = b.rows.shape[0]
            s_step, c_step = b.steps(n_m, max_elements)
            for s0 in range(0, S, s_step):
                for c0 in range(0, n_m, c_step):
                    yield b, slice(s0, s0 + s_step), slice(c0, c0 + c_step)

    def _run(self, scores, protocol, meta_metrics, max_elements, permutation, estimates=None):
        scores = np.asarray(scores, dtype=float)
        if scores.ndim != 2:
            raise ValueError(f"expected a 2-D score matrix (rows x metrics), got shape {scores.shape}")
        specs = [get_meta_metric(k) for k in meta_metrics]
        source = _ScoreBlocks(scores, permutation)
        out = _NodeFormValues(source.n_columns, specs, self.table.n_walks, meta_metrics, estimates)
        for b, sl, cl in self._parts(source.n_columns, max_elements):
            out.add(b.walk[sl], cl, b.stats(source.block(b.rows[sl], cl), sl), protocol)
        table = scores if permutation is None or not out.kernel else self.permuted(scores, permutation)
        for k, walks in out.kernel.items():
            idx = np.concatenate(walks)
            sub = walk_values(_sub_table(self.table, idx), table, protocol, [meta_metrics[k]], max_elements)[0]
            out.values[:, k, idx] = sub[:, 0, idx]
        return out.result()


class _ScoreBlocks:
    """The score columns a pass of :class:`NodeLayout` reads, a block of SEG rows at a time: as they are,
    or (with ``permutation``) its columns permuted within each SEG, one batch of SEGs at a time."""

    def __init__(self, scores: np.ndarray, permutation: SegPermutation | None) -> None:
        self.permutation = permutation
        self.n_columns = scores.shape[1] if permutation is None else len(permutation.source)
        self.padded = np.vstack([scores, np.full((1, scores.shape[1]), np.nan)])  # row -1 -> the NaN row
        if permutation is not None:
            self.keys = np.vstack([permutation.keys, np.zeros((1, self.n_columns))])

    def block(self, rows: np.ndarray, cl: slice) -> np.ndarray:
        """``(S, P, columns)`` scores of the padded node rows ``rows``, columns ``cl``."""
        if self.permutation is None:
            return self.padded[rows][:, :, cl]
        return permute_by_keys(self.padded[rows][:, :, self.permutation.source[cl]], self.keys[rows][:, :, cl],
                               axis=1)


class _NodeFormValues:
    """What one pass of :class:`NodeLayout` fills from node statistics: each walk's value per
    meta-metric and its number of valid scores, the null estimates of the meta-metrics named in
    ``estimates`` (when given), and the walks of meta-metrics without a node form, left to the walk
    kernel (``kernel``: meta-metric index -> walk indices)."""

    def __init__(self, n_m: int, specs: Sequence, n_walks: int, meta_metrics: Sequence[str],
                 estimates: Sequence[str] | None) -> None:
        self.specs = specs
        self.values = np.full((n_m, len(specs), n_walks), np.nan)
        self.n_valid = np.zeros((n_m, n_walks), dtype=np.int64)
        self.est = np.full(self.values.shape, np.nan) if estimates is not None else None
        self.stand_in = {k for k, name in enumerate(meta_metrics) if estimates is not None and name in estimates}
        self.kernel: dict[int, list[np.ndarray]] = {}

    def add(self, walk: np.ndarray, cl: slice, ns: NodeStats, protocol: Protocol) -> None:
        """The values of one part: walks ``walk`` (-1: padding), columns ``cl``, node statistics ``ns``."""
        ok = walk >= 0
        self.n_valid[cl, walk[ok]] = ns.n.transpose(1, 0, 2)[:, ok]
        for k, spec in enumerate(self.specs):
            try:
                v = spec.from_nodes(ns, protocol)
            except NodeFormUnavailable:
                if cl.start == 0:
                    self.kernel.setdefault(k, []).append(walk[ok])
                continue
            self.values[cl, k, walk[ok]] = v.transpose(1, 0, 2)[:, ok]
            if k in self.stand_in:
                e = spec.null_estimate_from_nodes(ns, protocol)
                self.est[cl, k, walk[ok]] = e.transpose(1, 0, 2)[:, ok]

    def result(self) -> tuple:
        return (self.values, self.n_valid) if self.est is None else (self.values, self.n_valid, self.est)


class _Lazy(Sequence):
    """A read-only sequence whose items are built on each access."""

    def __init__(self, make, n: int) -> None:
        self._make, self._n = make, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._n))]
        if not -self._n <= k < self._n:
            raise IndexError(k)
        return self._make(k % self._n)


def _sub_table(table: WalkTable, walks: np.ndarray) -> WalkTable:
    """``table`` restricted to the walks ``walks`` (global indices kept; the others get NaN)."""
    keep = []
    for b in table.buckets:
        m = np.isin(b.walk, walks)
        if m.any():
            keep.append(WalkBucket(b.walk[m], b.rows[m], b.levels[m], b.max_slots))
    return WalkTable(table.seg_ids, table.subsets, table.walk_seg, table.walk_nodes, tuple(keep))
