"""Walk statistics from node-level counts: the same walk values as :class:`WalkStats`, without
sorting any walk.

A walk visits whole nodes (a duplicated root visits its node twice), so every order statistic
of a walk is a sum over pairs of its nodes of a statistic of that node pair, and every node
pair is shared by many walks. :class:`NodeStats` ranks each SEG's scores once, counts each
node's scores per distinct value (``C[node, value]``), forms the node-pair counts once per SEG,

- ``G[P, Q] = #{x in P, y in Q: x > y}`` and ``T[P, Q] = #{x in P, y in Q: x == y}`` (``C L^T``
  and ``C C^T``, ``L`` the counts strictly below each value),
- ``KS[A, B] = max_v |F_A(v) - F_B(v)|`` between level pools (a node, or the union of a
  walk's nodes on one level) from their cumulative counts,

and then each walk's statistics as quadratic forms of its node multiplicities ``m`` (``m^T A m``).
For many score columns at once (permuted copies of a metric, :mod:`analysis.chance`) this
replaces a sort, a cumulative count and a pair count per walk and column by a few small
matrix products per SEG. Each registered meta-metric gives its walk value from these
statistics (``MetaMetricSpec.nodes``); they equal the :class:`WalkStats` kernels' to rounding.

Arrays are batched as ``(S, B, W, ...)``: S SEGs of one padded shape, B score columns, W walks
per SEG (padding: walks without nodes, nodes without rows, levels without nodes, all inert).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

__all__ = ["NodeStats", "NodeFormUnavailable", "size_class"]


def size_class(n: int) -> int:
    """The smallest of the geometric sizes 1, 2, 3, 5, 8, 12, ... (ratio 1.5) that holds ``n``: items
    of similar size share one padded batch, and padding wastes about a third at most."""
    w = 1
    while w < n:
        w = max(w + 1, int(np.ceil(w * 1.5)))
    return w


def _falling(x: np.ndarray, k: int) -> np.ndarray:
    """The falling factorial ``x (x - 1) ... (x - k + 1)``."""
    out = np.ones(np.shape(x))
    for i in range(k):
        out = out * (x - i)
    return out


def _centred_level_ranks(c: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Average rank of each level's samples minus the mean rank, from per-level counts ``c``
    (``(..., L)``, levels in order) and their total ``n`` (``(...)``)."""
    return np.cumsum(c, axis=-1) - c + (c + 1) / 2 - ((n + 1) / 2)[..., None]


def _level_ties(c: np.ndarray) -> np.ndarray:
    """Pairs of samples sharing a level, ``sum_l c_l (c_l - 1) / 2``, from per-level counts."""
    return (c * (c - 1) / 2).sum(axis=-1)


def score_rank_ss(n: np.ndarray, tie_cubes: np.ndarray) -> np.ndarray:
    """Sum of squared centred average ranks of ``n`` scores whose tie sizes ``t_v`` give
    ``tie_cubes = sum_v t_v^3``: ``(n^3 - sum_v t_v^3) / 12`` (Spearman's tie-corrected ``Syy``)."""
    return (n ** 3 - tie_cubes) / 12


def tau_b_denominator(n: np.ndarray, level_ties: np.ndarray, tie_squares: np.ndarray) -> np.ndarray:
    """Kendall tau-b's ``sqrt((n0 - n1) (n0 - n2))``: ``n0 = n (n - 1) / 2`` pairs, ``n1`` of them
    sharing a level, ``n2 = (sum_v t_v^2 - n) / 2`` sharing a score (``tie_squares = sum_v t_v^2``)."""
    n0 = n * (n - 1) / 2
    return np.sqrt((n0 - level_ties) * (n0 - (tie_squares - n) / 2))


class NodeFormUnavailable(Exception):
    """A meta-metric option (or a walk shape) has no node-pair form: use the walk kernel."""


class NodeStats:
    """Node-pair statistics of a batch of SEGs and the walk statistics built from them.

    Parameters
    ----------
    values : array, shape (S, R, B)
        Scores of each SEG's rows for B columns; NaN where missing (and on padded rows).
    node : int array, shape (S, R)
        Node index (``0 .. P-1``) of each row (any value on padded rows).
    node_level : int array, shape (S, P)
        Dense level index (``0 .. L-1``, in level order) of each node; ``-1`` on padded nodes.
    mult : array, shape (S, W, P)
        How many times each walk visits each node (0 on padded walks).
    n_levels : int
        L.
    pool_mix, pool_level, walk_pool : arrays, shapes (S, Q, P), (S, Q), (S, W, L)
        The level pools of the walks (for KS): each pool's node counts (a level with one node,
        repeated or not, is that node once: the same ECDF), its dense level (-1 on padding),
        and the pool each walk has on each level (-1: none).
    """

    def __init__(self, values: np.ndarray, node: np.ndarray, node_level: np.ndarray, mult: np.ndarray,
                 n_levels: int, pool_mix: np.ndarray, pool_level: np.ndarray, walk_pool: np.ndarray) -> None:
        self.pool_mix = np.asarray(pool_mix, dtype=float)
        self.pool_level = np.asarray(pool_level, dtype=np.int64)
        self.walk_pool = np.asarray(walk_pool, dtype=np.int64)
        self._values = np.asarray(values, dtype=float)
        self._node = np.asarray(node, dtype=np.int64)
        self._node_level = np.asarray(node_level, dtype=np.int64)
        self.mult = np.asarray(mult, dtype=float)
        S, R, B = self._values.shape
        self.shape = (S, B, self.mult.shape[1])
        self.n_nodes = self.mult.shape[2]
        self.n_levels = int(n_levels)

    # -- per node -----------------------------------------------------------------------------
    @cached_property
    def level_onehot(self) -> np.ndarray:
        """``(S, P, L)``: 1 where the node is on that level (rows of padded nodes are 0)."""
        lv = self._node_level
        return (lv[:, :, None] == np.arange(self.n_levels)[None, None, :]).astype(float)

    @cached_property
    def _dense(self) -> np.ndarray:
        """``(S, R, B)`` dense rank of each score within its SEG and column (0 = lowest; NaN rows any)."""
        x = self._values
        order = np.argsort(x, axis=1, kind="stable")  # NaN last
        xs = np.take_along_axis(x, order, axis=1)
        new = np.ones(xs.shape, dtype=bool)
        new[:, 1:] = xs[:, 1:] != xs[:, :-1]
        vid = np.empty(x.shape, dtype=np.int64)
        np.put_along_axis(vid, order, np.cumsum(new, axis=1) - 1, axis=1)
        return vid

    @cached_property
    def counts(self) -> np.ndarray:
        """``C``, ``(S, B, P, V)``: the node's valid scores equal to each distinct value of its SEG
        (values in ascending order; V the most distinct values of one SEG and column, unused bins 0)."""
        x = self._values
        S, R, B = x.shape
        vid = self._dense
        nan = np.isnan(x)
        V = int(np.where(nan, -1, vid).max(initial=-1)) + 1  # coarse scores: few bins
        vid = np.where(nan, V, vid)  # an overflow bin, dropped
        P = self.n_nodes
        flat = ((np.arange(S)[:, None, None] * B + np.arange(B)[None, None, :]) * P
                + self._node[:, :, None]) * (V + 1) + vid
        c = np.bincount(flat.ravel(), minlength=S * B * P * (V + 1)).reshape(S, B, P, V + 1)
        return c[..., :V].astype(float)

    @cached_property
    def seg_tied(self) -> np.ndarray:
        """``(S, B)``: whether the SEG's valid scores in the column hold a tie."""
        return self.counts.sum(axis=2).max(axis=-1, initial=0) > 1

    @cached_property
    def repeats(self) -> np.ndarray:
        """``(S, W)``: whether the walk visits a node (its images) more than once (root duplication)."""
        return (self.mult > 1).any(axis=-1)

    def _per_node(self, weights: np.ndarray) -> np.ndarray:
        x = self._values
        S, R, B = x.shape
        P = self.n_nodes
        flat = (np.arange(S)[:, None, None] * B + np.arange(B)[None, None, :]) * P + self._node[:, :, None]
        return np.bincount(flat.ravel(), weights=weights.ravel(), minlength=S * B * P).reshape(S, B, P)

    @cached_property
    def node_n(self) -> np.ndarray:
        """``(S, B, P)`` valid scores per node (without ranking anything: delta needs no order)."""
        if "counts" in self.__dict__:
            return self.counts.sum(axis=-1)
        return self._per_node((~np.isnan(self._values)).astype(float))

    @cached_property
    def node_sum(self) -> np.ndarray:
        """``(S, B, P)`` sum of the node's valid scores."""
        return self._per_node(np.nan_to_num(self._values))

    @cached_property
    def greater(self) -> np.ndarray:
        """``G[s, b, P, Q] = #{x in P, y in Q: x > y}``."""
        c = self.counts
        below = np.cumsum(c, axis=-1) - c
        return c @ below.swapaxes(-1, -2)

    @cached_property
    def tied(self) -> np.ndarray:
        """``T[s, b, P, Q] = #{x in P, y in Q: x == y}`` (self-pairs on the diagonal)."""
        c = self.counts
        return c @ c.swapaxes(-1, -2)

    @cached_property
    def pool_n(self) -> np.ndarray:
        """``(S, B, Q)`` valid scores in each level pool."""
        return (self.pool_mix[:, None] @ self.node_n[..., None])[..., 0]

    @cached_property
    def compared_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Pool pairs ``i < j`` on different levels in some SEG of the batch (each unordered pair once)."""
        lv = self.pool_level
        i, j = np.triu_indices(lv.shape[1], 1)
        use = ((lv[:, i] != lv[:, j]) & (lv[:, i] >= 0) & (lv[:, j] >= 0)).any(axis=0)
        return i[use], j[use]

    @cached_property
    def pool_ks(self) -> np.ndarray:
        """``(S, B, Q, Q)`` KS statistic between the scores of two level pools on different levels
        (0 where one has no valid score, and between pools of one level, which no walk compares).

        As :func:`~.sep.sep_walks`: ``max |cum_A n_B - cum_B n_A| / (n_A n_B)``, integers until the
        division (float32 holds them exactly while the largest pool size squared is below 2^24).
        """
        mix = self.pool_mix[:, None]  # (S, 1, Q, P)
        n = self.pool_n
        dtype = np.float32 if float(n.max(initial=0)) ** 2 < 2 ** 24 else np.float64
        cum = (mix @ np.cumsum(self.counts, axis=-1)).astype(dtype)
        Q = self.pool_level.shape[1]
        i, j = self.compared_pairs
        d = np.zeros(cum.shape[:2] + (Q, Q))
        if len(i):
            nn = n.astype(dtype)[..., None]
            # initial=0: a batch of SEGs without any valid score (unscored SEGs of a partial table) has
            # no score positions at all; its pools are empty and masked to 0 below
            cross = np.abs(cum[:, :, i] * nn[:, :, j] - cum[:, :, j] * nn[:, :, i]).max(axis=-1, initial=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                dij = cross / (n[:, :, i] * n[:, :, j])
            d[:, :, i, j] = dij
            d[:, :, j, i] = dij
        return np.where((n[:, :, :, None] > 0) & (n[:, :, None, :] > 0), d, 0.0)

    @cached_property
    def lower(self) -> np.ndarray:
        """``(S, P, P)``: 1 where node P's level is below node Q's."""
        lv = self._node_level
        return ((lv[:, :, None] < lv[:, None, :]) & (lv[:, :, None] >= 0)).astype(float)

    # -- per walk ------------------------------------------------------------------------------
    def _row(self, a: np.ndarray) -> np.ndarray:
        """``sum_Q m_Q A[P, Q]`` for every walk: ``(S, B, W, P)``."""
        return self.mult[:, None] @ a.swapaxes(-1, -2)

    @cached_property
    def level_count(self) -> np.ndarray:
        """``(S, B, W, L)`` valid samples of each level on each walk (repeats counted)."""
        return (self.mult[:, None] * self.node_n[:, :, None, :]) @ self.level_onehot[:, None]

    @cached_property
    def n(self) -> np.ndarray:
        """``(S, B, W)`` valid samples per walk."""
        return self.level_count.sum(axis=-1)

    @cached_property
    def present(self) -> np.ndarray:
        return self.level_count > 0

    @cached_property
    def n_slots(self) -> np.ndarray:
        """``(S, B, W)`` levels with a valid sample per walk."""
        return self.present.sum(axis=-1)

    @cached_property
    def _pair_sums(self) -> np.ndarray:
        """``(3, S, B, W)``: :attr:`tied_pairs`, :attr:`concordance`, :attr:`right_pairs` in one product."""
        g, t, low = self.greater, self.tied, self.lower[:, None]
        a = np.stack([t, low * (g - g.swapaxes(-1, -2)), low * (g + 0.5 * t)])  # (3, S, B, P, P)
        m = self.mult[:, None]
        return ((m @ a.swapaxes(-1, -2)) * m).sum(axis=-1)

    @cached_property
    def tied_pairs(self) -> np.ndarray:
        """``sum_v t_v^2``, ``t_v`` the walk's samples equal to value v: ``(S, B, W)``."""
        return self._pair_sums[0]

    @cached_property
    def constant(self) -> np.ndarray:
        """Walks whose valid scores are all equal."""
        return self.tied_pairs == self.n ** 2

    @cached_property
    def _walk_counts(self) -> np.ndarray:
        """``(S, B, W, V)``: the walk's samples equal to each value (repeats counted)."""
        return self.mult[:, None] @ self.counts

    @cached_property
    def tie_cubes(self) -> np.ndarray:
        """``sum_v t_v^3`` per walk: ``(S, B, W)``."""
        t = self._walk_counts
        return (t * t * t).sum(axis=-1)

    @property
    def concordance(self) -> np.ndarray:
        """Cross-level pairs whose lower level scores higher minus those where it scores lower
        (repeats counted): Kendall's ``C - D``."""
        return self._pair_sums[1]

    @property
    def right_pairs(self) -> np.ndarray:
        """Cross-level pairs whose lower level scores higher, a tie counting half."""
        return self._pair_sums[2]

    @cached_property
    def level_tied_pairs(self) -> np.ndarray:
        """``sum_l c_l (c_l - 1) / 2``: pairs sharing a level."""
        return _level_ties(self.level_count)

    @cached_property
    def _spearman_parts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(S, B, W, P)`` centred level rank of each node on each walk, ``(S, B, W, P)`` the average
        score ranks of the node's images summed (each image once), ``(S, B, W)`` sum of squared
        centred level ranks."""
        c = self.level_count
        lr = _centred_level_ranks(c, self.n)
        sxx = (c * lr * lr).sum(axis=-1)
        lr_node = lr @ self.level_onehot[:, None].swapaxes(-1, -2)  # (S, B, W, P)
        rank_sum = self._row(self.greater + 0.5 * self.tied) + self.node_n[:, :, None, :] / 2
        return lr_node, rank_sum, sxx

    def spearman_average(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Numerator and the two sums of squares of Pearson(level ranks, score ranks), average ranks.

        Score rank of x: (samples below it) + (samples tied with it, itself included, + 1) / 2, so
        the ranks summed over a node are ``sum_Q m_Q G[P, Q] + (sum_Q m_Q T[P, Q] + n_P) / 2``.
        """
        lr_node, rank_sum, sxx = self._spearman_parts
        num = (self.mult[:, None] * lr_node * rank_sum).sum(axis=-1)
        return num, sxx, score_rank_ss(self.n, self.tie_cubes)

    # -- one repeated node (root duplication) ----------------------------------------------
    @cached_property
    def repeated_node(self) -> np.ndarray:
        """``(S, W)``: the node a walk visits more than once when it is the only one (root
        duplication), else -1."""
        rep = self.mult > 1
        return np.where(rep.sum(axis=-1) == 1, rep.argmax(axis=-1), -1)

    @cached_property
    def stand_in_walks(self) -> np.ndarray:
        """``(S, B, W)``: walks with one repeated node whose value can move under a permutation (at
        least 2 samples on at least 2 levels), the ones a null stand-in serves."""
        return (self.repeated_node >= 0)[:, None, :] & (self.n >= 2) & (self.n_slots > 1)

    def _node_at_repeated(self, a: np.ndarray) -> np.ndarray:
        """A per-node statistic ``(S, B, P, ...)`` at each walk's repeated node: ``(S, B, W, ...)``
        (node 0 where there is none)."""
        S, B, _ = self.shape
        return a[np.arange(S)[:, None, None], np.arange(B)[None, :, None], np.maximum(self.repeated_node, 0)[:, None, :]]

    def _walk_at_repeated(self, a: np.ndarray) -> np.ndarray:
        """A per-walk, per-node statistic ``(S, B, W, P)`` at each walk's repeated node: ``(S, B, W)``."""
        idx = np.broadcast_to(np.maximum(self.repeated_node, 0)[:, None, :, None], a.shape[:3] + (1,))
        return np.take_along_axis(a, idx, axis=-1)[..., 0]

    @cached_property
    def repeat_frames(self) -> dict:
        """Statistics of walks with one repeated node (:attr:`stand_in_walks`), as visited (``m``
        times) and as its twin-free walk (once), for the null stand-ins of rank and kendall
        (``(S, B, W)`` each; meaningless on other walks).

        Keys: ``m`` (visits), ``r`` (the node's valid images), ``o`` (the walk's other valid
        positions, the same in both), ``q`` (pairs of one of the node's images and another image of
        the walk where the first scores higher, minus lower), ``s`` (the other positions above the
        node's level minus those below); and per frame, ``"twin"`` and ``"free"``, a dict with
        ``n``, ``lr`` (the node's centred level rank), ``sxx`` (sum of squared centred level
        ranks), ``ranks`` (the node's images' average ranks summed, each once), ``ties2``/``ties3``
        (``sum_v t_v^2``, ``sum_v t_v^3`` over the walk's values), ``level_ties`` (pairs sharing a
        level), ``e_ties2``/``e_ties3`` (their null expectations, :meth:`expected_tie_powers`).
        The twin-free frame is derived from the visited one (one node's multiplicity less), not
        recounted.
        """
        S, B, W = self.shape
        m = np.broadcast_to(np.take_along_axis(self.mult, np.maximum(self.repeated_node, 0)[..., None], axis=-1)[..., 0]
                            [:, None, :], (S, B, W))
        r = self._node_at_repeated(self.node_n)
        n = self.n
        o = n - m * r
        lev = np.broadcast_to(self._node_level[np.arange(S)[:, None], np.maximum(self.repeated_node, 0)][:, None, :],
                              (S, B, W))
        at_lev = np.arange(self.n_levels) == lev[..., None]  # (S, B, W, L)
        g, t = self.greater, self.tied
        q = self._walk_at_repeated(self._row(g - g.swapaxes(-1, -2)))
        c = self.level_count
        s_ = (c * np.sign(np.arange(self.n_levels) - lev[..., None])).sum(axis=-1)
        lr_node, rank_sum, sxx = self._spearman_parts
        twin = {"n": n, "lr": self._walk_at_repeated(lr_node), "sxx": sxx, "ranks": self._walk_at_repeated(rank_sum),
                "ties2": self.tied_pairs, "ties3": self.tie_cubes, "level_ties": self.level_tied_pairs}
        # The twin-free walk: m - 1 visits of the node fewer.
        d = m - 1.0
        cl = c - (d * r)[..., None] * at_lev
        nn = n - d * r
        lr_all = _centred_level_ranks(cl, nn)
        tt = self._walk_counts - d[..., None] * self._node_at_repeated(self.counts)
        # pairs within the node (one image above the other, or tied, self-pairs included): what one
        # visit fewer takes off its images' rank sum
        within = self._node_at_repeated(np.diagonal(g + 0.5 * t, axis1=-2, axis2=-1))
        free = {"n": nn, "lr": (lr_all * at_lev).sum(axis=-1), "sxx": (cl * lr_all * lr_all).sum(axis=-1),
                "ranks": twin["ranks"] - d * within, "ties2": (tt * tt).sum(axis=-1), "ties3": (tt * tt * tt).sum(axis=-1),
                "level_ties": _level_ties(cl)}
        for frame, mu in ((twin, m), (free, np.ones_like(m))):
            frame["e_ties2"], frame["e_ties3"] = self.expected_tie_powers(mu, r, o)
        return {"m": m, "r": r, "o": o, "q": q, "s": s_, "twin": twin, "free": free}

    @cached_property
    def _tie_shares(self) -> list:
        """At index ``k = 1, 2, 3``: ``sum_v t_v^(k) / N^(k)``, ``(S, B, 1)``, the SEG's tie sizes
        ``t_v`` as falling factorials over the same of its valid count ``N`` (0 where ``N < k``)."""
        t = self.counts.sum(axis=2)  # (S, B, V)
        N = t.sum(axis=-1)[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            return [None] + [np.where(_falling(N, k) > 0, _falling(t, k).sum(axis=-1)[..., None] / _falling(N, k), 0.0)
                             for k in (1, 2, 3)]

    def expected_tie_powers(self, m: np.ndarray, r: np.ndarray, o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(S, B, W)`` null expectations of ``sum_v t_v^2`` and ``sum_v t_v^3`` (``t_v`` the walk's
        samples equal to value v, repeats counted) for a walk that visits a node of ``r`` valid
        images ``m`` times and ``o`` other valid images once each.

        Under a within-SEG permutation the node's images and the others are disjoint uniform draws
        from the SEG's ``N`` valid scores, so for a value the SEG holds ``t`` times the counts
        ``(a, b)`` it gets are multivariate hypergeometric with factorial moments
        ``E[a^(i) b^(j)] = t^(i+j) r^(i) o^(j) / N^(i+j)`` (``x^(k)`` the falling factorial), and
        ``t_v = m a + b``. Summed over values only ``sum_v t_v^(k)``, ``k <= 3``, is needed.
        """
        share = self._tie_shares

        def f(i, j):  # sum over values of E[a^(i) b^(j)]
            return _falling(r, i) * _falling(o, j) * share[i + j]

        f10, f01, f11, f20, f02 = f(1, 0), f(0, 1), f(1, 1), f(2, 0), f(0, 2)
        sq = m * m * (f20 + f10) + 2 * m * f11 + f02 + f01
        cube = (m ** 3 * (f(3, 0) + 3 * f20 + f10) + 3 * m * m * (f(2, 1) + f11) + 3 * m * (f(1, 2) + f11)
                + f(0, 3) + 3 * f02 + f01)
        return sq, cube

    def ks_mean(self, pairs: str) -> np.ndarray:
        """Mean KS between the walk's level pools over all their pairs (``all``) or adjacent ones."""
        return self.pool_pair_mean(self.pool_ks, pairs)

    @cached_property
    def _pool_pair_index(self) -> np.ndarray:
        """``(S, B, W, L * L)`` flat index into a ``(S, B, Q, Q)`` array of the pools each walk has on
        each pair of levels (level pairs without a pool point anywhere; they are masked)."""
        S, B, W = self.shape
        L = self.n_levels
        Q = self.pool_level.shape[1]
        safe = np.maximum(self.walk_pool, 0)  # (S, W, L)
        idx = (safe[:, :, :, None] * Q + safe[:, :, None, :]).reshape(S, 1, W, L * L)
        return idx + (np.arange(S)[:, None, None, None] * B + np.arange(B)[None, :, None, None]) * (Q * Q)

    def _level_pairs(self, pairs: str) -> tuple[np.ndarray, np.ndarray]:
        """``(S, B, W, L * L)`` mask of the walk's compared level pairs and ``(S, B, W)`` their count."""
        key = "_pairs_" + pairs
        if key not in self.__dict__:
            L = self.n_levels
            present = self.present  # (S, B, W, L)
            pair = present[..., :, None] & present[..., None, :] & np.triu(np.ones((L, L), dtype=bool), 1)
            ns = self.n_slots
            if pairs == "all":
                count = ns * (ns - 1) / 2
            elif pairs == "adjacent":
                # adjacent: no present level strictly between the two
                cum = np.cumsum(present, axis=-1)
                pair &= (cum[..., None, :] - present[..., None, :] - cum[..., :, None]) == 0
                count = ns - 1.0
            else:
                raise ValueError(f"expected KS pairs 'all' or 'adjacent', got {pairs!r}")
            self.__dict__[key] = (pair.reshape(pair.shape[:-2] + (L * L,)), count)
        return self.__dict__[key]

    def pool_pair_mean(self, value: np.ndarray, pairs: str) -> np.ndarray:
        """Mean of a symmetric pool-pair statistic ``value`` (``(S, B, Q, Q)``) over each walk's
        pairs of present levels: all of them (``all``) or adjacent ones (``adjacent``)."""
        pair, count = self._level_pairs(pairs)
        v = np.take(value, self._pool_pair_index)  # the statistic between the walk's pools on two levels
        total = np.where(pair, v, 0.0).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / count

    def level_mean_span_weights(self) -> np.ndarray:
        """``(S, B, W, P)``: :meth:`level_mean_span` as a linear form of the nodes' score sums, the
        weight of each node's sum (its visits over the level's valid samples; negative on the
        highest level; 0 on a one-level walk)."""
        c = self.level_count
        pres = self.present
        L = c.shape[-1]
        first = np.argmax(pres, axis=-1)[..., None]  # (S, B, W, 1)
        last = (L - 1 - np.argmax(pres[..., ::-1], axis=-1))[..., None]
        lv = self._node_level[:, None, None, :]  # (S, 1, 1, P)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = ((lv == first) / np.take_along_axis(c, first, axis=-1)
                 - (lv == last) / np.take_along_axis(c, last, axis=-1)) * self.mult[:, None]
        return np.where(np.isfinite(w), w, 0.0)  # a walk without valid samples: no weight

    def level_mean_span(self) -> np.ndarray:
        """Mean score of the walk's lowest present level minus that of its highest."""
        c = self.level_count
        s = (self.mult[:, None] * self.node_sum[:, :, None, :]) @ self.level_onehot[:, None]
        pres = self.present
        L = c.shape[-1]
        first = np.argmax(pres, axis=-1)[..., None]
        last = (L - 1 - np.argmax(pres[..., ::-1], axis=-1))[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            m = s / c
        return (np.take_along_axis(m, first, axis=-1) - np.take_along_axis(m, last, axis=-1))[..., 0]
