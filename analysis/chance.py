"""Chance levels: what each meta-metric reads when scores carry no information about errors.

A meta-metric's floor is not 0: the KS statistic between two small samples drawn from one
distribution is far from 0, a metric that ties everything gets pair_acc 0.5, and so on. The null
"scores say nothing about error counts" is made concrete by permuting each metric's scores among
the images of each SEG (NaN cells stay where they are), which keeps every SEG's node sizes, walks
and score distribution, and recomputing the meta-metric with the protocol's own rules. The chance
level is the expectation of the dataset values (Avg and subsets) under that null, the band the
central ``confidence`` interval of their null distribution, ``mc_error`` the Monte-Carlo standard
error of the chance level itself (0 where it is exact).

How it is computed, and why it is fast:

- **Exact where a closed form exists.** A dataset value is a fixed linear combination of walk
  values (the walk weights and which walks are NaN depend only on where the NaN cells are, which
  a permutation keeps), so its expectation is the same combination of the walks' expectations.
  Each meta-metric states its walks' exact null expectation where one exists
  (:attr:`~analysis.metametrics.MetaMetricSpec.null_mean`, from the node statistics of the
  unpermuted scores, :meth:`analysis.compute.NodeLayout.null_means`): pair_acc 0.5 and delta 0
  always, rank and kendall 0 unless a walk repeats an image and its SEG's scores tie, sep the
  mean of its pool pairs' exact KS nulls, ties included
  (:func:`analysis.metametrics.sep.ks_null_means`). Those walks enter every permutation at
  their expectation, so a cell whose walks are all exact has no Monte-Carlo error at all; the
  others (rank/kendall of tied scores under root duplication, and a sep pool pair beyond the
  exact computation's cost bound) are estimated from the ``n_perm`` permutations.
- **A stand-in where the expectation has no closed form.** A duplicated root's walk (rank and
  kendall of tied scores) has none, so its level is estimated; a meta-metric may give, from the
  same permuted scores, a statistic with exactly the walk value's null expectation and far less
  variance (:attr:`~analysis.metametrics.MetaMetricSpec.null_estimate`: the value's conditional
  expectation given which values the repeated node and the rest of the walk receive, minus
  control variates of mean 0), and the level averages that instead.
- **Walks from node pairs.** The permuted columns' walk values come from node-pair statistics
  (:class:`analysis.compute.NodeLayout`, :mod:`analysis.metametrics.nodestats`): each SEG ranked
  once, each walk a few small products over its nodes, equal to the walk kernels' to rounding.
- **The spread pools over SEGs.** SEGs are permuted independently, so a dataset value (a mean of
  per-SEG values) has variance ``sum_s var_s / n^2``; each SEG's null variance ``var_s`` is
  estimated from the permutations, and the sum over 165 SEGs is precise after a few dozen
  permutations where the spread of the dataset values themselves would need thousands. The band
  is the normal interval ``level +- z sd`` (a mean of many independent SEG values), clipped to
  the meta-metric's range. A meta-metric linear in the scores (delta,
  :attr:`~analysis.metametrics.MetaMetricSpec.linear`) has an exact SEG variance
  (:func:`linear_null_variance`) and is not permuted at all. ``mc_error`` is
  ``sqrt(sum_s var'_s) / n / sqrt(n_perm)`` over the estimated walks only.
- **One null per tie pattern.** rank, sep, kendall and pair_acc read scores only through their
  order and ties along a walk, so columns whose SEGs have the same missing cells and the same
  pattern of ties (every continuous, complete metric) have one permutation null; its walk values
  and SEG means are computed once per such class (:func:`null_classes`) and shared.
- **Each column's draws are its own.** The permutations of a column come from a random stream
  seeded by ``seed`` and the column's tie pattern (:func:`column_streams`), and columns are taken
  in blocks of at most :data:`BLOCK_COLUMNS` with a fixed number of permutations per step, so a
  column's chance level is the same bits whichever other columns are analysed beside it: that is
  what lets the analysis store (:mod:`analysis.column_store`) keep one column's levels and reuse
  them when another column changes.
- A lower-is-better delta read as a magnitude (``|delta|``, the paper's rule) is a folded
  normal: its signed expectation is exactly 0, so its chance level is ``sd * sqrt(2/pi)`` and its
  band the folded normal's quantiles.

Which null this is: each metric keeps its *own* scores, so a discrete metric keeps its per-SEG
ties; a random metric with the same overall score distribution (which does not tie like that
within a SEG) can read higher. "Above chance" and "beats a random control" are different bars.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .aggregate import _pow2_scale, compute_seg_values, group_means, seg_means
from .compute import NodeLayout, SegPermutation, permute_by_keys, walk_values
from .metametrics import get_meta_metric
from .protocols import Protocol
from .walks import Structure, WalkTable, seg_image_rows

__all__ = ["ChanceLevels", "NULL_DESCRIPTION", "BLOCK_COLUMNS", "permute_within_segs", "null_classes",
           "null_patterns", "sorted_within_segs", "column_streams", "permutation_keys", "chance_steps", "linear_null_variance",
           "chance_levels", "chance_adjusted"]

#: Most metric columns whose permutations go through the kernels together. Fixed (not the number
#: of metrics) so that the permutations per step, and with them every rounding, are the same
#: whatever columns are analysed beside a column.
BLOCK_COLUMNS = 20

#: The null the chance levels are the expectation under (the tables and the report name it).
NULL_DESCRIPTION = "each metric's own scores permuted within each SEG (its ties and missing cells kept)"


@dataclass(frozen=True)
class ChanceLevels:
    """Chance levels of one protocol: ``mean``/``low``/``high``/``mc_error`` are ``(metric, meta_metric,
    group)`` arrays (NaN where undefined), from ``n_perm`` within-SEG permutations; the band is at level
    ``confidence``, ``mc_error`` the Monte-Carlo standard error of ``mean`` (0 where the level is exact;
    NaN where it is estimated from a single permutation)."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_perm: int
    confidence: float
    mc_error: np.ndarray


def permute_within_segs(scores: np.ndarray, seg_rows: Sequence[np.ndarray], n_perm: int,
                        rng: np.random.Generator | None = None, keys: np.ndarray | None = None) -> np.ndarray:
    """``n_perm`` copies of the score matrix, each column's valid scores shuffled within every SEG.

    Within each SEG, :func:`analysis.compute.permute_by_keys` (valid scores in the order of their
    keys, into the valid rows in order). With the keys of :func:`permutation_keys` these are the
    permutations :func:`chance_levels` uses, made whole (it permutes each batch of SEGs where it is
    used, :class:`analysis.compute.SegPermutation`, from the same keys); with ``rng`` the keys are
    ``rng.random((n_rows, n_perm * n_metrics))``.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        NaN marks a missing score; missing cells stay in place, only valid scores move.
    seg_rows : sequence of int arrays
        The rows of each SEG (rows of no SEG are left as they are).
    n_perm : int
    rng : numpy Generator, optional
    keys : ndarray, shape (n_rows, n_perm * n_metrics), optional
        Sort keys (given instead of ``rng``).

    Returns
    -------
    ndarray, shape (n_rows, n_perm * n_metrics)
        Column ``p * n_metrics + j`` is permutation ``p`` of metric ``j``.

    Examples
    --------
    >>> x = np.array([[1.0], [2.0], [np.nan], [4.0]])
    >>> y = permute_within_segs(x, [np.array([0, 1, 2]), np.array([3])], 2, np.random.default_rng(0))
    >>> sorted(y[:2, 0].tolist()), bool(np.isnan(y[2]).all()), y[3].tolist()
    ([1.0, 2.0], True, [4.0, 4.0])
    """
    x = np.asarray(scores, dtype=float)
    n_rows, n_m = x.shape
    if keys is None:
        if rng is None:
            raise ValueError("expected rng or keys for the permutations, got neither")
        keys = rng.random((n_rows, n_perm * n_m))
    out = np.tile(x, (1, n_perm))
    for rows in seg_rows:
        rows = np.asarray(rows, dtype=np.int64)
        out[rows] = permute_by_keys(out[rows], keys[rows], axis=0)
    return out


def _sorted_ties(scores: np.ndarray, seg_rows: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per SEG, ``(k - 1, n_metrics)``: whether each valid score equals the next in sorted order."""
    x = np.asarray(scores, dtype=float)
    out = []
    for rows in seg_rows:
        v = np.sort(x[np.asarray(rows, dtype=np.int64)], axis=0)  # NaN last; NaN == NaN is False
        out.append(v[1:] == v[:-1])
    return out


def null_patterns(scores: np.ndarray, seg_rows: Sequence[np.ndarray]) -> list[bytes]:
    """Each column's permutation null, as bytes: in every SEG its missing cells and the pattern of
    ties among its sorted valid scores (what an order-only meta-metric's null depends on)."""
    x = np.asarray(scores, dtype=float)
    order = np.concatenate([np.asarray(r, dtype=np.int64) for r in seg_rows]) if seg_rows else np.zeros(0, np.int64)
    nan = np.isnan(x[order])
    ties = _sorted_ties(x, seg_rows)
    eq = np.concatenate(ties) if ties else np.zeros((0, x.shape[1]), dtype=bool)
    return [nan[:, j].tobytes() + eq[:, j].tobytes() for j in range(x.shape[1])]


def sorted_within_segs(scores: np.ndarray, seg_rows: Sequence[np.ndarray]) -> np.ndarray:
    """Each column's valid scores sorted within every SEG, into the SEG's valid rows in the order
    ``seg_rows`` lists them (missing cells and rows of no SEG stay as they are).

    What :func:`chance_levels` permutes: the same multiset in every SEG, so the same null; and two
    columns with one :func:`null_patterns` entry become order-isomorphic, so the same keys give
    them the same order-only statistics.

    Examples
    --------
    >>> x = np.array([[3.0, 1.0], [1.0, np.nan], [2.0, 5.0], [9.0, 0.0]])
    >>> sorted_within_segs(x, [np.array([2, 0, 1]), np.array([3])]).tolist()
    [[2.0, 5.0], [3.0, nan], [1.0, 1.0], [9.0, 0.0]]
    """
    x = np.asarray(scores, dtype=float)
    out = x.copy()
    if not len(seg_rows):
        return out
    rows = np.concatenate([np.asarray(r, dtype=np.int64) for r in seg_rows])
    seg = np.repeat(np.arange(len(seg_rows)), [len(r) for r in seg_rows])
    pos = np.arange(len(rows))
    for j in range(x.shape[1]):
        v = x[rows, j]
        nan = np.isnan(v)
        src = np.lexsort((v, seg))  # by SEG, then value (NaN last)
        dst = np.lexsort((pos, nan, seg))  # by SEG, valid rows first, in the order listed
        out[rows[dst], j] = v[src]
    return out


def column_streams(patterns: Sequence[bytes], seed: int) -> list[np.random.Generator]:
    """One random stream per column, seeded by ``seed`` and the column's :func:`null_patterns` entry.

    Columns with one pattern share one stream (so one permutation null is computed once per
    class and is the same for every member); a column's stream does not depend on the other
    columns, which keeps its chance level the same whatever is analysed beside it.

    Examples
    --------
    >>> a, b, c = column_streams([b"x", b"x", b"y"], seed=0)
    >>> a is b, bool(column_streams([b"x"], 0)[0].random() == a.random()), bool(a.random() == c.random())
    (True, True, False)
    """
    import hashlib

    made: dict[bytes, np.random.Generator] = {}
    for pattern in patterns:
        if pattern not in made:
            words = np.frombuffer(hashlib.blake2b(pattern, digest_size=16).digest(), dtype="<u4").tolist()
            made[pattern] = np.random.default_rng([int(seed), 16, *words])  # 16: a stream apart from the bootstrap's
    return [made[pattern] for pattern in patterns]


def permutation_keys(streams: Sequence[np.random.Generator], n_rows: int, p: int) -> np.ndarray:
    """The next ``p`` permutations' sort keys, ``(n_rows, p * n_metrics)``: column ``q * n_metrics +
    j`` permutes metric ``j``, drawn from ``streams[j]`` one permutation after another (so a stream
    gives the same keys however the permutations are split into steps). Columns sharing a stream
    (equal :func:`null_patterns`) share one draw."""
    n_m = len(streams)
    out = np.empty((n_rows, p * n_m))
    drawn: dict[int, np.ndarray] = {}
    for j, stream in enumerate(streams):
        k = drawn.get(id(stream))
        if k is None:
            k = drawn[id(stream)] = stream.random((p, n_rows)).T
        out[:, j::n_m] = k
    return out


def chance_steps(n_perm: int, n_walks: int, n_meta_metrics: int, max_columns: int | None = None
                 ) -> tuple[int, list[int]]:
    """Block width and permutations per step of :func:`chance_levels`: ``max_columns`` permuted
    columns at once (default: at most 200, and as many as keep each ``(columns, meta-metrics,
    walks)`` array of a step under 5 million values, 40 MB), in blocks of at most
    :data:`BLOCK_COLUMNS` metrics; neither depends on how many metrics are analysed."""
    if max_columns is None:
        max_columns = min(200, 5_000_000 // max(n_meta_metrics * n_walks, 1))
    width = max(1, min(BLOCK_COLUMNS, max_columns))
    step = max(1, max_columns // width)
    return width, [min(step, n_perm - lo) for lo in range(0, n_perm, step)]


def null_classes(scores: np.ndarray, seg_rows: Sequence[np.ndarray]) -> np.ndarray:
    """For each metric column, the first column with the same permutation null for order-only
    meta-metrics: in every SEG the same missing cells and the same pattern of ties among the
    sorted valid scores (an order-preserving map takes one column's SEG values to the other's,
    so their within-SEG permutations have one distribution of order and ties).

    Examples
    --------
    >>> x = np.array([[0.1, 5.0, 2.0, 1.0], [0.7, 9.0, 2.0, 3.0], [0.3, 6.0, 1.0, np.nan]])
    >>> null_classes(x, [np.array([0, 1, 2])]).tolist()  # untied, untied, tied, a hole
    [0, 0, 2, 3]
    """
    first: dict[bytes, int] = {}
    return np.array([first.setdefault(b, j) for j, b in enumerate(null_patterns(scores, seg_rows))], dtype=np.int64)


class _Columns:
    """Which permuted columns go through which kernels: order-only meta-metrics once per tie
    pattern class (:func:`null_classes`), any other permuted one for every metric (a meta-metric
    registered with a walk kernel only; delta, which reads values, is linear and never permuted)."""

    def __init__(self, rep: np.ndarray, meta_metrics: Sequence[str]) -> None:
        self.reps, self.member = np.unique(rep, return_inverse=True)  # member -> its class's position
        self.n_m = len(rep)
        self.order = [k for k, name in enumerate(meta_metrics) if get_meta_metric(name).order_only]

    def null_means(self, layout: NodeLayout, scores: np.ndarray, protocol: Protocol,
                   meta_metrics: Sequence[str]) -> np.ndarray:
        """Exact null expectations of every walk (:meth:`analysis.compute.NodeLayout.null_means`),
        order-only meta-metrics once per class."""
        out = np.full((self.n_m, len(meta_metrics), layout.table.n_walks), np.nan)
        value = [k for k in range(len(meta_metrics)) if k not in self.order]
        for ks, cols in ((self.order, self.reps), (value, None)):
            if ks:
                got = layout.null_means(scores if cols is None else scores[:, cols], protocol,
                                        [meta_metrics[k] for k in ks])
                out[:, ks] = got if cols is None else got[self.member]
        return out

    def walk_values(self, layout: NodeLayout, scores: np.ndarray, keys: np.ndarray, p: int, protocol: Protocol,
                    meta_metrics: Sequence[str], which: Sequence[int], stand_in: Sequence[int] = (),
                    by_class: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """Walk values ``(rows, len(which), n_walks)`` of ``p`` permutations of ``scores`` (column
        ``q * n_metrics + j`` of ``keys`` permutes metric ``j``) for the meta-metrics ``which``
        (indices) and, for those in ``stand_in``, their lower-variance stand-ins (NaN where none;
        None when ``stand_in`` names none of ``which``; :meth:`analysis.compute.NodeLayout.walk_values`
        with ``estimates``). ``by_class`` (``which`` all order-only): one row per permutation and
        tie-pattern class (its first member's scores), ``p * len(reps)`` rows; else one per
        permutation and metric."""
        which = list(which)
        if by_class and any(k not in self.order for k in which):
            raise ValueError(f"expected only order-only meta-metrics by class, got {[meta_metrics[k] for k in which]}")
        cols = self.reps if by_class else np.arange(self.n_m)
        at_cols = (np.arange(p)[:, None] * self.n_m + cols[None, :]).ravel()
        perm = SegPermutation(keys[:, at_cols], np.tile(np.arange(self.n_m), p)[at_cols])
        names = [meta_metrics[k] for k in which if k in stand_in]
        got = layout.walk_values(scores, protocol, [meta_metrics[k] for k in which], permutation=perm,
                                 estimates=names or None)
        return got[0], (got[2] if names else None)


class _PermutedSegs:
    """SEG values of ``p`` permutations of the scores, ``(p, metric, meta-metric, SEG)``: raw, and
    as the level averages them (walks with an exact expectation at it, the others at their
    stand-in where the meta-metric has one).

    Order-only meta-metrics go through the walks and the SEG means once per tie-pattern class
    (the members' SEG values are the same: same walk values, same valid counts), any other
    permuted one once per metric; those linear in the scores (delta) are not permuted: their SEG
    values enter every permutation at their expectation (their band is exact,
    :func:`linear_null_variance`).
    """

    def __init__(self, layout: NodeLayout, cols: _Columns, scores: np.ndarray, exact: np.ndarray,
                 nv0: np.ndarray, sigma: np.ndarray, protocol: Protocol, metrics: Sequence[str],
                 meta_metrics: Sequence[str], stand_in: Sequence[int]) -> None:
        self.layout, self.cols, self.scores, self.exact, self.nv0 = layout, cols, scores, exact, nv0
        self.sigma, self.protocol, self.metrics, self.meta_metrics = sigma, protocol, metrics, meta_metrics
        self.stand_in = stand_in
        self.known = ~np.isnan(exact)
        specs = [get_meta_metric(name) for name in meta_metrics]
        self.linear = [k for k, spec in enumerate(specs) if spec.linear is not None]
        permuted = [k for k in range(len(specs)) if k not in self.linear]
        self.by_class = [k for k in permuted if k in cols.order and not specs[k].normalised]
        self.per_metric = [k for k in permuted if k not in self.by_class]
        n_m = len(metrics)
        self.fixed = self._seg_values(exact[:, self.linear], np.arange(n_m), 1, self.linear)[0] if self.linear else None

    def _seg_values(self, wv: np.ndarray, src: np.ndarray, p: int, ks: list[int]) -> np.ndarray:
        """``(p, len(src), len(ks), n_segs)`` SEG values of walk values with rows ``(perm, src)``."""
        table = self.layout.table
        nv = np.tile(self.nv0[src], (p, 1))  # valid counts: missing cells do not move
        return compute_seg_values(table, wv, nv, np.tile(self.sigma[src], p), self.protocol,
                                  [self.metrics[i] for i in src] * p, [self.meta_metrics[k] for k in ks]
                                  ).values.reshape(p, len(src), len(ks), table.n_segs)

    def batch(self, keys: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Raw and level SEG values of the ``p`` permutations ``keys`` give (column ``q * n_metrics
        + j`` permutes metric ``j``)."""
        cols, n_m = self.cols, len(self.metrics)
        shape = (p, n_m, len(self.meta_metrics), self.layout.table.n_segs)
        raw, est = np.empty(shape), np.empty(shape)
        if self.linear:
            raw[:, :, self.linear] = self.fixed
            est[:, :, self.linear] = self.fixed
        for ks, src in ((self.by_class, cols.reps), (self.per_metric, np.arange(n_m))):
            if not ks:
                continue
            wv, stand_in = cols.walk_values(self.layout, self.scores, keys, p, self.protocol, self.meta_metrics, ks,
                                            self.stand_in, by_class=src is cols.reps)
            expand = cols.member if src is cols.reps else slice(None)
            raw[:, :, ks] = self._seg_values(wv, src, p, ks)[:, expand]
            # Walks with an exact expectation enter at it: same expectation, no Monte-Carlo noise;
            # the others at their lower-variance stand-in where the meta-metric has one (rank/kendall
            # on a duplicated root), same expectation again.
            if stand_in is not None:
                wv = np.where(np.isnan(stand_in) | np.isnan(wv), wv, stand_in)
            np.copyto(wv, np.tile(self.exact[src][:, ks], (p, 1, 1)), where=np.tile(self.known[src][:, ks], (p, 1, 1)))
            est[:, :, ks] = self._seg_values(wv, src, p, ks)[:, expand]
        return raw, est


class _Moments:
    """Running mean and sum of squared deviations over permutations (Chan et al.'s pairwise merge)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, batch: np.ndarray) -> None:  # batch: (p, ...)
        nb = batch.shape[0]
        mb = batch.mean(axis=0)
        m2b = ((batch - mb) ** 2).sum(axis=0)
        n = self.n + nb
        d = mb - self.mean
        self.mean = self.mean + d * (nb / n)
        self.m2 = self.m2 + m2b + d * d * (self.n * nb / n)
        self.n = n

    def var(self) -> np.ndarray:
        return self.m2 / (self.n - 1) if self.n > 1 else np.full(np.shape(self.mean), np.nan)


def _folded(mu: np.ndarray, sd: np.ndarray, confidence: float) -> list[np.ndarray]:
    """Mean and central ``confidence`` quantiles of ``|X|``, ``X ~ N(mu, sd^2)`` (NaN where sd is)."""
    from scipy.stats import foldnorm

    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.nan_to_num(sd, nan=0.0) > 0
        fn = foldnorm(np.where(spread, np.abs(mu) / np.where(spread, sd, 1.0), 0.0), scale=np.where(spread, sd, 1.0))
        q = (1 - confidence) / 2
        return [np.where(spread, f, np.where(sd == 0, np.abs(mu), np.nan)) for f in (fn.mean(), fn.ppf(q), fn.ppf(1 - q))]


def linear_null_variance(layout: NodeLayout, scores: np.ndarray, structure: Structure, nv0: np.ndarray,
                         sigma: np.ndarray, protocol: Protocol, metrics: Sequence[str], meta_metric: str) -> np.ndarray:
    """``(n_metrics, n_segs)`` exact null variance of each SEG value of a meta-metric linear in the
    scores (delta; :attr:`~analysis.metametrics.MetaMetricSpec.linear`), in the layout's SEG order.

    A SEG value is then ``sum_i c_i x_i`` over the SEG's valid scores, ``c_i`` the weight of the
    image's node (its walks' weights, aggregated as the SEG value aggregates walks), and under a
    uniform permutation of the valid scores ``Var = sum_i (c_i - c_bar)^2 sum_j (x_j - x_bar)^2
    / (N - 1)`` (a finite population's linear statistic). NaN where the SEG has no value.
    """
    table = layout.table
    w = layout.linear_weights(scores, protocol, meta_metric)  # (n_m, P, n_walks)
    n_m, P, _ = w.shape
    c = compute_seg_values(table, w.reshape(n_m * P, 1, -1), np.repeat(nv0, P, axis=0), np.repeat(sigma, P),
                           protocol, [m for m in metrics for _ in range(P)], [meta_metric]).values
    c = c.reshape(n_m, P, table.n_segs)
    value = ~np.isnan(c).all(axis=1)  # (n_m, n_segs): the SEG has a value
    c = np.nan_to_num(c)  # nodes the SEG does not have
    # Every row of the table's SEGs with its SEG and node, then per (SEG, node) and per SEG the
    # valid counts and the scores' sum of squared deviations, all columns at once.
    by_id = {sg.seg_id: sg for sg in structure.segs}
    keep = np.flatnonzero(value.any(axis=0))  # SEGs with a walk with a value (one left out has no place in P either)
    segs = [by_id[table.seg_ids[j]] for j in keep]
    if not any(sg.rows for sg in segs):
        return np.full((n_m, table.n_segs), np.nan)
    rows, at, node = seg_image_rows(segs)
    seg = keep[at]
    x = np.asarray(scores, dtype=float)[rows]
    scale = _pow2_scale(x)  # exact: squares of huge scores stay finite
    y = x / scale
    valid = ~np.isnan(y)
    y0 = np.where(valid, y, 0.0)
    out = np.full((n_m, table.n_segs), np.nan)
    for m in range(n_m):
        n_p = np.bincount(seg * P + node, weights=valid[:, m], minlength=table.n_segs * P).reshape(table.n_segs, P)
        n = n_p.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(seg, weights=y0[:, m], minlength=table.n_segs) / n
            ss = np.bincount(seg, weights=np.where(valid[:, m], (y0[:, m] - mean[seg]) ** 2, 0.0),
                             minlength=table.n_segs)
            cs = c[m].T * (np.sqrt(ss / (n - 1)) * scale[m])[:, None]  # (n_segs, P)
        var = (n_p * cs * cs).sum(axis=1) - (n_p * cs).sum(axis=1) ** 2 / np.where(n > 0, n, 1)
        out[m] = np.where(n >= 2, var, 0.0)
    out[~value] = np.nan
    return out


def chance_levels(scores: np.ndarray, structure: Structure, walk_table: WalkTable, sigma: np.ndarray,
                  protocol: Protocol, metrics: Sequence[str], meta_metrics: Sequence[str],
                  lower_is_better: Sequence[str] = (), *, n_perm: int, seed: int = 0, confidence: float = 0.95,
                  max_columns: int | None = None, progress: bool = False,
                  observed: tuple[np.ndarray, np.ndarray] | None = None) -> ChanceLevels:
    """Chance level and band of every meta-metric of every metric under ``protocol``.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        Oriented scores (higher is better), as analysed.
    structure, walk_table : the analysis' structure and the protocol's walks (of the analysed SEGs).
    sigma : ndarray, shape (n_metrics,)
        The delta normaliser; a within-SEG permutation does not change it.
    protocol, metrics, meta_metrics, lower_is_better
        As in :func:`analysis.pipeline.run_protocol` (``magnitude`` deltas are taken as magnitudes,
        like the value they are compared with).
    n_perm : int
        Permutations (>= 1); the cost grows linearly with it. Cells whose walks all have an exact
        null expectation need none for their level, every band needs at least two. No default
        here: the commands' default is ``chance`` in ``conf/analysis/default.yaml``.
    seed : int
        Seeds the permutations: each column's stream is seeded by ``seed`` and its tie pattern
        (:func:`column_streams`), apart from the bootstrap's.
    confidence : float
        Level of the band.
    max_columns : int, optional
        Permuted columns analysed at once (memory bound; :func:`chance_steps`); default: at most
        200, and as many as keep each ``(columns, meta-metrics, walks)`` array of a step under 5
        million values (40 MB). Columns go in blocks of at most :data:`BLOCK_COLUMNS`.
    observed : (walk values, valid counts), optional
        :func:`analysis.compute.walk_values` of the unpermuted scores, when the caller has them.

    Returns
    -------
    ChanceLevels

    Raises
    ------
    ValueError
        ``n_perm < 1``.

    Notes
    -----
    Tie and NaN policy: each metric's ties and missing cells are its own and stay (module
    docstring). A cell undefined in the data (no SEG with a value) is NaN; a null with no spread
    (e.g. KS between two single images, always 1) has a zero-width band.
    """
    if n_perm < 1:
        raise ValueError(f"expected at least one permutation for the chance levels, got {n_perm}")
    n_m, n_k = len(metrics), len(meta_metrics)
    seg_rows = _image_rows_per_seg(structure, walk_table)
    wv0, nv0 = walk_values(walk_table, scores, protocol, meta_metrics) if observed is None else observed
    width, steps = chance_steps(n_perm, walk_table.n_walks, n_k, max_columns)
    null = _Null(NodeLayout(walk_table, structure), structure, protocol, tuple(meta_metrics), steps, float(confidence),
                 int(seed), seg_rows)
    patterns = null_patterns(scores, seg_rows)
    flip = np.array([m in set(lower_is_better) for m in metrics], dtype=bool)
    blocks = [np.arange(lo, min(lo + width, n_m)) for lo in range(0, n_m, width)]
    with _progress_bar(progress, len(blocks) * len(steps), f"chance levels ({protocol.name})") as bar:
        parts = [null.levels(scores[:, b], wv0[b], nv0[b], sigma[b], [metrics[i] for i in b], flip[b],
                             [patterns[i] for i in b], bar) for b in blocks]
    if not parts:
        empty = np.zeros((0, n_k, len(compute_seg_values(walk_table, wv0, nv0, sigma, protocol, metrics,
                                                           meta_metrics).groups())))
        return ChanceLevels(empty, empty, empty, int(n_perm), float(confidence), empty)
    mean, low, high, mc = (np.concatenate([part[i] for part in parts]) for i in range(4))
    return ChanceLevels(mean, low, high, int(n_perm), float(confidence), mc)


def _image_rows_per_seg(structure: Structure, walk_table: WalkTable) -> list[np.ndarray]:
    """Each SEG's score-matrix rows (node after node), in the walk table's SEG order (SEG j of every
    per-SEG array)."""
    by_id = {s.seg_id: s for s in structure.segs}
    return [np.concatenate(by_id[i].rows) if by_id[i].rows else np.zeros(0, np.int64) for i in walk_table.seg_ids]


@contextmanager
def _progress_bar(show: bool, total: int, desc: str):
    """A progress bar over ``total`` steps while the block runs (closed however it ends), or None."""
    if not show:
        yield None
        return
    from seg_data.progress import tqdm

    bar = tqdm(total=total, desc=desc, leave=False)
    try:
        yield bar
    finally:
        bar.close()


@dataclass(frozen=True)
class _Null:
    """What every block of columns shares in :func:`chance_levels`: the node layout, the protocol,
    the permutations per step; :meth:`levels` computes one block's levels, bands and errors."""

    layout: NodeLayout
    structure: Structure
    protocol: Protocol
    meta_metrics: tuple[str, ...]
    steps: list[int]
    confidence: float
    seed: int
    seg_rows: list[np.ndarray]  # each SEG's rows, in the walk table's SEG order (built once per call)

    def levels(self, scores: np.ndarray, wv0: np.ndarray, nv0: np.ndarray, sigma: np.ndarray, metrics: list[str],
               flip: np.ndarray, patterns: list[bytes], bar) -> tuple[np.ndarray, ...]:
        """``(level, low, high, mc_error)``, each ``(len(metrics), meta-metric, group)``, of one block."""
        from scipy.stats import norm

        layout, protocol, meta_metrics = self.layout, self.protocol, self.meta_metrics
        walk_table = layout.table
        n_k = len(meta_metrics)
        streams = column_streams(patterns, self.seed)  # fresh per block: a column's draws are its own
        cols = _Columns(_classes_of(streams), meta_metrics)
        exact = cols.null_means(layout, scores, protocol, meta_metrics)
        exact[np.isnan(wv0)] = np.nan  # a walk left out stays out under every permutation (missing cells stay)
        unknown = np.isnan(exact) & ~np.isnan(wv0)  # walks whose expectation is estimated
        open_ = [k for k in range(n_k) if unknown[:, k].any()]
        groups = compute_seg_values(walk_table, wv0, nv0, sigma, protocol, metrics, meta_metrics).groups()
        raw, est = _Moments(), _Moments()
        # Permuted from each SEG's scores in sorted order (a uniform permutation of them is one of the
        # original arrangement): columns of one tie pattern then read the same order under the same
        # keys, so a class's permuted values are its members' own, whichever member comes first.
        segs = _PermutedSegs(layout, cols, sorted_within_segs(scores, self.seg_rows), exact, nv0, sigma, protocol,
                             metrics, meta_metrics, open_)
        linear = segs.linear
        n_perm = sum(self.steps)
        for p in self.steps:
            batch_raw, batch_est = segs.batch(permutation_keys(streams, scores.shape[0], p), p)
            raw.add(batch_raw)
            est.add(batch_est)
            if bar is not None:
                bar.update(1)
        # SEG values with no estimated walk are exact: no Monte-Carlo variance, whatever n_perm.
        seg_exact = seg_means(unknown.astype(float), np.ones_like(nv0), walk_table.walk_seg, walk_table.n_segs,
                              "uniform") == 0
        level, counts = group_means(est.mean, groups)

        def sums(v: np.ndarray) -> np.ndarray:  # over each group's SEGs with a value
            return group_means(v, groups)[0] * counts

        raw_var = raw.var()
        for k in linear:
            raw_var[:, k] = linear_null_variance(layout, scores, self.structure, nv0, sigma, protocol, metrics,
                                                 meta_metrics[k])
        var_raw = sums(raw_var)
        var_est = sums(np.where(seg_exact, 0.0, est.var()))
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = np.sqrt(var_raw) / counts
            mc = np.sqrt(var_est) / counts / np.sqrt(n_perm)
        z = norm.ppf(0.5 + self.confidence / 2)
        low, high = level - z * sd, level + z * sd
        for k, name in enumerate(meta_metrics):
            spec = get_meta_metric(name)
            lo_b = -np.inf if spec.minimum is None else spec.minimum
            hi_b = np.inf if spec.maximum is None else spec.maximum
            low[:, k], high[:, k] = np.clip(low[:, k], lo_b, hi_b), np.clip(high[:, k], lo_b, hi_b)
        if protocol.lower_is_better_delta == "magnitude" and flip.any():
            for k, name in enumerate(meta_metrics):
                if not get_meta_metric(name).normalised:
                    continue
                new = _folded(level[flip, k], sd[flip, k], self.confidence)
                # The spread is itself estimated (var of a variance estimate ~ 2 var^2 / (n - 1)): its
                # relative error, halved for the sd (delta method), carries to the level.
                with np.errstate(invalid="ignore", divide="ignore"):
                    rel = 0.0 if k in linear else \
                        np.sqrt(2.0 * sums(raw_var ** 2)[flip, k] / max(n_perm - 1, 1)) / (2.0 * var_raw[flip, k])
                mc[flip, k] = np.sqrt(mc[flip, k] ** 2 + (new[0] * np.where(var_raw[flip, k] > 0, rel, 0.0)) ** 2)
                level[flip, k], low[flip, k], high[flip, k] = new
        return level, low, high, mc


def _classes_of(streams: Sequence[np.random.Generator]) -> np.ndarray:
    """For each column, the first column sharing its stream (its permutation-null class)."""
    first: dict[int, int] = {}
    return np.array([first.setdefault(id(g), j) for j, g in enumerate(streams)], dtype=np.int64)


def chance_adjusted(value, chance, maximum: float | None):
    """``(value - chance) / (maximum - chance)``: 0 at chance, 1 at the maximum.

    NaN where the meta-metric has no maximum (``maximum`` None: delta is unbounded) or where
    ``chance == maximum`` (nothing to gain over chance).

    Examples
    --------
    >>> float(chance_adjusted(0.75, 0.5, 1.0))
    0.5
    """
    v = np.asarray(value, dtype=float)
    c = np.asarray(chance, dtype=float)
    if maximum is None:
        return np.full(np.broadcast(v, c).shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c < maximum, (v - c) / (maximum - c), np.nan)
