"""Walk construction for the protocols, precomputed once per dataset and shared by all metrics.

A :class:`Structure` says which rows of the score matrix belong to which node of which SEG. A
:class:`WalkTable` lists every walk of every analysed SEG as the score-matrix rows it visits
(with repeats when a node is visited twice) and the error level of each, packed into a few
padded integer matrices ("buckets" of walks of similar length), so that the meta-metric kernels
work on all walks of all SEGs with array operations.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from seg_data import SEG, SEGDataset
from seg_data import walks as dag_walks
from seg_data.graph import MAX_WALKS, WalkLimitError, count_walks

__all__ = ["SegNodes", "Structure", "WalkBucket", "WalkTable", "level_walks", "protocol_walks", "walk_count",
           "build_walk_table", "seg_image_rows"]

log = logging.getLogger(__name__)

# Pad value of the level matrix: larger than any real error count, so padded slots sort last.
LEVEL_PAD = np.iinfo(np.int32).max


@dataclass(frozen=True)
class SegNodes:
    """One SEG as the analysis sees it: node labels, levels, score-matrix rows, graph."""

    seg_id: str
    subset: str | None
    labels: tuple[str, ...]
    levels: tuple[int, ...]
    rows: tuple[np.ndarray, ...]  # per node: rows of the score matrix holding its images
    seg: SEG

    @property
    def n_images(self) -> int:
        return int(sum(len(r) for r in self.rows))


@dataclass(frozen=True)
class Structure:
    """All SEGs of a dataset with their nodes mapped to rows of an ``(n_rows, n_metrics)`` matrix."""

    segs: tuple[SegNodes, ...]
    n_rows: int

    @classmethod
    def from_dataset(cls, dataset: SEGDataset, row_of: Mapping[str, int], n_rows: int,
                     subset_of: Mapping[str, str | None] | None = None) -> "Structure":
        """Map each image of ``dataset`` (by ``image_id``) to its row; unscored images are left out.

        ``subset_of`` overrides the dataset's subset of each SEG.
        """
        segs = []
        for s in dataset:
            subset = s.subset if subset_of is None else subset_of.get(s.seg_id)
            labels = tuple(s.nodes)
            rows = tuple(np.asarray([row_of[im.image_id] for im in s.images(n) if im.image_id in row_of], dtype=np.int64)
                         for n in labels)
            segs.append(SegNodes(s.seg_id, subset, labels, tuple(s.level(n) for n in labels), rows, s))
        return cls(tuple(segs), int(n_rows))

    @property
    def seg_ids(self) -> list[str]:
        return [s.seg_id for s in self.segs]


def seg_image_rows(segs: Sequence[SegNodes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every score-matrix row of ``segs``, SEG after SEG and node after node, with its SEG and node.

    What concatenating ``s.rows`` over the SEGs gives, each row's labels repeated by array (an
    array per node took a second over the 30,000 nodes of a 100k-image dataset).

    Returns
    -------
    rows, seg, node : ndarray of int64, shape (n_images,)
        The row, the position of its SEG in ``segs`` and the index of its node in ``s.rows``.

    Examples
    --------
    >>> s = SegNodes("0", None, ("0", "1"), (0, 1), (np.array([4, 5]), np.array([7])), None)
    >>> [a.tolist() for a in seg_image_rows([s, s])]
    [[4, 5, 7, 4, 5, 7], [0, 0, 0, 1, 1, 1], [0, 0, 1, 0, 0, 1]]
    """
    node_rows = [r for s in segs for r in s.rows]
    if not node_rows:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(3))
    sizes = np.array([len(r) for r in node_rows], dtype=np.int64)
    n_nodes = np.array([len(s.rows) for s in segs], dtype=np.int64)
    first_node = np.cumsum(n_nodes) - n_nodes
    rows = np.concatenate(node_rows).astype(np.int64, copy=False)
    seg = np.repeat(np.repeat(np.arange(len(segs), dtype=np.int64), n_nodes), sizes)
    node = np.repeat(np.arange(len(node_rows), dtype=np.int64) - np.repeat(first_node, n_nodes), sizes)
    return rows, seg, node


def level_walks(labels: Sequence[str], levels: Sequence[int], root_duplication: bool) -> list[tuple[str, ...]]:
    """Walks of the paper's code: one node per present level, every combination.

    With ``root_duplication`` the choice at the lowest present level is made twice (an ordered
    pair, the same node twice included), as in the authors' ``analysis_tree_score``.

    Examples
    --------
    >>> level_walks(["0", "1a", "1b"], [0, 1, 1], root_duplication=False)
    [('0', '1a'), ('0', '1b')]
    >>> level_walks(["0a", "0b", "1"], [0, 0, 1], root_duplication=True)
    [('0a', '0a', '1'), ('0a', '0b', '1'), ('0b', '0a', '1'), ('0b', '0b', '1')]
    """
    by_level: dict[int, list[str]] = {}
    for lbl, lev in zip(labels, levels, strict=True):
        by_level.setdefault(int(lev), []).append(lbl)
    if not by_level:
        return []
    choices = [by_level[lev] for lev in sorted(by_level)]
    if root_duplication:
        choices = [choices[0], *choices]
    return [tuple(w) for w in itertools.product(*choices)]


def _dag_walks(seg: SegNodes, root_duplication: bool) -> list[tuple[str, ...]]:
    paths = dag_walks(seg.seg, max_walks=None)  # counted against max_walks by build_walk_table first
    if not root_duplication:
        return paths
    # Mirror the paper's ordered pair of roots: prepend every walk-starting root of the same level.
    level = dict(zip(seg.labels, seg.levels, strict=True))
    starts: dict[int, list[str]] = {}
    for p in paths:
        lst = starts.setdefault(level[p[0]], [])
        if p[0] not in lst:
            lst.append(p[0])
    return [(r, *p) for p in paths for r in starts[level[p[0]]]]


def protocol_walks(seg: SegNodes, walks: str, root_duplication: bool) -> list[tuple[str, ...]]:
    """The walks of one SEG under a protocol's ``walks``/``root_duplication`` options.

    ``levels`` uses only nodes holding at least one scored image (the paper's code sees nodes
    through the score table); ``dag`` uses the graph as it is.
    """
    if walks == "levels":
        keep = [i for i, r in enumerate(seg.rows) if len(r)]
        return level_walks([seg.labels[i] for i in keep], [seg.levels[i] for i in keep], root_duplication)
    if walks == "dag":
        return _dag_walks(seg, root_duplication)
    raise ValueError(f"expected walks to be 'levels' or 'dag', got {walks!r}")


def walk_count(seg: SegNodes, walks: str, root_duplication: bool) -> int:
    """How many walks :func:`protocol_walks` would return, without enumerating them.

    ``levels``: the product of the node counts of the present levels (times the lowest level's
    count with ``root_duplication``); ``dag``: :func:`seg_data.graph.count_walks` (times the
    largest group of same-level starting roots with ``root_duplication``, exact when every walk
    starts at one level, as in a valid SEG).
    """
    if walks == "levels":
        sizes: dict[int, int] = {}
        for lev, r in zip(seg.levels, seg.rows, strict=True):
            if len(r):
                sizes[int(lev)] = sizes.get(int(lev), 0) + 1
        if not sizes:
            return 0
        n = int(np.prod([sizes[k] for k in sizes], dtype=object))
        return n * sizes[min(sizes)] if root_duplication else n
    if walks == "dag":
        g = seg.seg.graph
        n = count_walks(g)
        if root_duplication and n:
            level = dict(zip(seg.labels, seg.levels, strict=True))
            starts: dict[int, int] = {}
            for r in g:
                if g.in_degree(r) == 0 and g.out_degree(r) > 0:
                    starts[level[r]] = starts.get(level[r], 0) + 1
            n *= max(starts.values())
        return n
    raise ValueError(f"expected walks to be 'levels' or 'dag', got {walks!r}")


@dataclass(frozen=True)
class WalkBucket:
    """Walks of similar length, padded to the longest: ``rows``/``levels`` are ``(n, width)``.

    Padding: row ``-1`` and level :data:`LEVEL_PAD`. ``walk`` holds the walks' global indices.
    """

    walk: np.ndarray
    rows: np.ndarray
    levels: np.ndarray
    max_slots: int  # most distinct levels on one walk of the bucket

    @property
    def width(self) -> int:
        return int(self.rows.shape[1])


@dataclass(frozen=True)
class WalkTable:
    """Every walk of the analysed SEGs, for one walk construction (protocol-dependent).

    ``walk_seg[w]`` is the index (into ``seg_ids``) of walk ``w``'s SEG; ``walk_nodes[w]`` its
    node labels; ``buckets`` the padded row/level matrices the kernels consume.
    """

    seg_ids: tuple[str, ...]
    subsets: tuple[str | None, ...]
    walk_seg: np.ndarray
    walk_nodes: tuple[tuple[str, ...], ...]
    buckets: tuple[WalkBucket, ...]

    @property
    def n_walks(self) -> int:
        return int(len(self.walk_seg))

    @property
    def n_segs(self) -> int:
        return len(self.seg_ids)

    def walks_per_seg(self) -> np.ndarray:
        return np.bincount(self.walk_seg, minlength=self.n_segs)


def _bucket_edges(max_len: int) -> list[int]:
    # Geometric widths (ratio 1.5): padding wastes at most about a third of each bucket.
    edges, w = [], 4
    while w < max_len:
        edges.append(w)
        w = int(np.ceil(w * 1.5))
    edges.append(max(max_len, 1))
    return edges


def _gather_walks(node_rows: Sequence[np.ndarray], node_levels: Sequence[int], seq: Sequence[int],
                  walk_len: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Every walk's samples, walk after walk, node after node: what concatenating each walk's
    nodes' rows gives, by array indexing.

    Parameters
    ----------
    node_rows, node_levels : sequence
        Per global node: its score-matrix rows and its error level.
    seq : sequence of int
        The global nodes of every walk, walk after walk.
    walk_len : sequence of int
        Nodes per walk.

    Returns
    -------
    lengths : ndarray, shape (n_walks,)
        Samples (rows, repeats included) per walk.
    slots : ndarray, shape (n_walks,)
        Distinct levels per walk.
    sample_walk, sample_rows, sample_levels : ndarray, shape (n_samples,)
        Each sample's walk, row and level.
    """
    n_walks = len(walk_len)
    sizes = np.fromiter((len(r) for r in node_rows), dtype=np.int64, count=len(node_rows))
    starts = np.cumsum(sizes) - sizes
    flat_rows = (np.concatenate([np.asarray(r, dtype=np.int64) for r in node_rows]) if node_rows
                 else np.zeros(0, dtype=np.int64))
    levels = np.asarray(node_levels, dtype=np.int64)
    seq_a = np.asarray(seq, dtype=np.int64)
    slot_walk = np.repeat(np.arange(n_walks, dtype=np.int64), np.asarray(walk_len, dtype=np.int64))
    slot_size = sizes[seq_a]
    sample_slot = np.repeat(np.arange(len(seq_a), dtype=np.int64), slot_size)
    offset = np.arange(len(sample_slot), dtype=np.int64) - np.repeat(np.cumsum(slot_size) - slot_size, slot_size)
    sample_rows = flat_rows[starts[seq_a][sample_slot] + offset]
    sample_levels = levels[seq_a][sample_slot]
    sample_walk = slot_walk[sample_slot]
    lengths = np.bincount(slot_walk, weights=slot_size, minlength=n_walks).astype(np.int64)
    # Distinct levels per walk: sort each walk's node levels and count the changes.
    slot_level = levels[seq_a]
    order = np.lexsort((slot_level, slot_walk))
    w, lv = slot_walk[order], slot_level[order]
    first = np.ones(len(w), dtype=bool)
    first[1:] = (w[1:] != w[:-1]) | (lv[1:] != lv[:-1])
    slots = np.bincount(w[first], minlength=n_walks).astype(np.int64)
    return lengths, slots, sample_walk, sample_rows, sample_levels


def build_walk_table(structure: Structure, walks: str, root_duplication: bool,
                     seg_ids: Sequence[str] | None = None, max_walks: int | None = MAX_WALKS) -> WalkTable:
    """Walks of the SEGs ``seg_ids`` (default: all), packed into padded buckets.

    SEGs without any walk stay in ``seg_ids`` (their meta-metrics come out NaN); the number of
    such SEGs is logged. A SEG with more than ``max_walks`` walks (:func:`walk_count`, counted
    before any enumeration) is treated the same way, with a warning naming it and its count.
    """
    segs = _selected_segs(structure, seg_ids)
    # Python only lists each walk's nodes (as global node numbers); the rows and levels of all
    # walks are then gathered in one pass over arrays (a concatenation per walk took seconds at
    # 100k images). Global node g of SEG si is node g - node_base[si] of that SEG.
    walk_seg: list[int] = []
    walk_nodes: list[tuple[str, ...]] = []
    walk_len: list[int] = []  # nodes per walk
    seq: list[int] = []  # every walk's global node numbers, walk after walk
    node_rows: list[np.ndarray] = []
    node_levels: list[int] = []
    no_walk = []
    for si, s in enumerate(segs):
        base = len(node_rows)
        node_index = {lbl: base + i for i, lbl in enumerate(s.labels)}
        node_rows.extend(s.rows)
        node_levels.extend(s.levels)
        ws = _walks_within(s, walks, root_duplication, max_walks)
        if not ws:
            no_walk.append(s.seg_id)
        walk_seg.extend([si] * len(ws))
        walk_nodes.extend(tuple(w) for w in ws)
        walk_len.extend(len(w) for w in ws)
        seq.extend(node_index[n] for w in ws for n in w)
    if no_walk:
        log.info("%d SEG(s) have no walk under walks=%s (their values are NaN): %s", len(no_walk), walks,
                 ", ".join(no_walk[:10]) + (" ..." if len(no_walk) > 10 else ""))
    lengths, slots, sample_walk, sample_rows, sample_levels = _gather_walks(node_rows, node_levels, seq, walk_len)
    buckets = _buckets(lengths, slots, sample_walk, sample_rows, sample_levels)
    return WalkTable(tuple(s.seg_id for s in segs), tuple(s.subset for s in segs),
                     np.asarray(walk_seg, dtype=np.int64), tuple(walk_nodes), tuple(buckets))


def _selected_segs(structure: Structure, seg_ids: Sequence[str] | None) -> list[SegNodes]:
    """The SEGs of ``structure`` whose ids are in ``seg_ids`` (all when None), in the structure's order."""
    if seg_ids is None:
        return list(structure.segs)
    wanted = set(map(str, seg_ids))
    return [s for s in structure.segs if s.seg_id in wanted]


def _walks_within(seg: SegNodes, walks: str, root_duplication: bool, max_walks: int | None) -> list:
    """:func:`protocol_walks` of ``seg``, or none (with a warning naming the SEG and its count) when it
    has more than ``max_walks`` walks, counted before any enumeration."""
    n_walks = walk_count(seg, walks, root_duplication)
    if max_walks is not None and n_walks > max_walks:
        log.warning("%s: its walk-based meta-metrics are left out (NaN)", WalkLimitError(seg.seg_id, n_walks, max_walks))
        return []
    return protocol_walks(seg, walks, root_duplication)


def _buckets(lengths: np.ndarray, slots: np.ndarray, sample_walk: np.ndarray, sample_rows: np.ndarray,
             sample_levels: np.ndarray) -> tuple[WalkBucket, ...]:
    """The walks (as :func:`_gather_walks` lists their samples) in buckets of similar length
    (:func:`_bucket_edges`), each padded to its longest walk."""
    if not len(lengths):
        return ()
    buckets = []
    edges = _bucket_edges(int(lengths.max()))
    which = np.searchsorted(edges, lengths)
    sample_bucket = which[sample_walk]
    for b in np.unique(which):
        members = np.flatnonzero(which == b)
        width = max(int(lengths[members].max()), 1)
        # Scatter every member's samples into its padded row in one step; the samples of the
        # bucket's walks are in walk order, as the members are.
        member_len = lengths[members]
        row_of_pos = np.repeat(np.arange(len(members)), member_len)
        col_of_pos = np.arange(int(member_len.sum())) - np.repeat(np.cumsum(member_len) - member_len, member_len)
        mine = sample_bucket == b
        rows = np.full((len(members), width), -1, dtype=np.int64)
        levs = np.full((len(members), width), LEVEL_PAD, dtype=np.int64)
        rows[row_of_pos, col_of_pos] = sample_rows[mine]
        levs[row_of_pos, col_of_pos] = sample_levels[mine]
        buckets.append(WalkBucket(members, rows, levs, int(slots[members].max())))
    return tuple(buckets)
