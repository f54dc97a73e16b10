"""Many correlations at once: the scipy statistics of the human view over groups and resamples.

The human view computes the same few statistics thousands of times (per prompt, per bootstrap
replicate, per permutation). Each function here computes a batch of them with numpy and gives
the numbers scipy gives call by call:

* Kendall's tau-b / tau-c are built from the same integer counts scipy uses (concordant minus
  discordant pairs, tied pairs, distinct values), so they match ``scipy.stats.kendalltau``
  bit for bit; a resample is a weighted sum of per-prompt-pair counts (a prompt drawn ``w``
  times contributes ``w_g w_g'`` copies of each of its pairs with prompt ``g'``).
* Spearman and Pearson are closed-form sums; they match scipy to rounding (~1e-15).

Constant input (one distinct value on a side) and fewer than 2 items give NaN, as the scalar
functions in :mod:`analysis.human.correlation` do.
"""

from __future__ import annotations

import functools

import numpy as np


def _tau_from_counts(two_cmd, x_tied, y_tied, size, variant: str = "b", minclasses=None) -> np.ndarray:
    """Kendall's tau from counts over *ordered* item pairs, with scipy's formula and NaN policy.

    ``two_cmd`` is the sum of ``sign(dx) sign(dy)`` over ordered pairs (twice concordant minus
    discordant); ``x_tied``/``y_tied`` count ordered pairs tied on a side, each item paired with
    itself included. All are exact integers held in floats (well below 2**53).
    """
    size = np.asarray(size, dtype=float)
    tot = size * (size - 1) // 2
    xtie = (np.asarray(x_tied, dtype=float) - size) / 2
    ytie = (np.asarray(y_tied, dtype=float) - size) / 2
    cmd = np.asarray(two_cmd, dtype=float) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        if variant == "b":
            tau = cmd / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
        else:
            m = np.asarray(minclasses, dtype=float)
            tau = 2 * cmd / (size ** 2 * (m - 1) / m)
    tau = np.minimum(1.0, np.maximum(-1.0, tau))
    return np.where((size < 2) | (xtie == tot) | (ytie == tot), np.nan, tau)


def _pearson_rows(x, y, w, x_varies, y_varies) -> np.ndarray:
    """Weighted Pearson r per row: ``x, y, w`` of shape (rows, items), weights 0 for absent items."""
    n = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = x - ((w * x).sum(axis=1) / n)[:, None]
        dy = y - ((w * y).sum(axis=1) / n)[:, None]
        r = (w * dx * dy).sum(axis=1) / np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
    r = np.minimum(1.0, np.maximum(-1.0, r))
    return np.where((n >= 2) & x_varies & y_varies, r, np.nan)


# -- within groups (one value per prompt) ---------------------------------------------------------
def _padded(v: np.ndarray, codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(n_groups, max size)`` layout of ``v`` by group (items in input order) and its mask."""
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pos = np.arange(len(codes)) - np.repeat(starts, sizes)
    out = np.zeros((n_groups, max(int(sizes.max(initial=0)), 1)))
    mask = np.zeros(out.shape, dtype=bool)
    out[codes[order], pos] = v[order]
    mask[codes[order], pos] = True
    return out, mask


def grouped_statistics(x, y, codes, n_groups: int, statistic: str) -> np.ndarray:
    """One statistic of ``x`` vs ``y`` within every group, all groups at once.

    Parameters
    ----------
    x, y : ndarray, shape (n,)
        Finite values.
    codes : ndarray of int, shape (n,)
        Group code in ``0..n_groups-1`` per item.
    statistic : {"spearman", "kendall_b", "kendall_c", "pearson"}

    Returns
    -------
    ndarray, shape (n_groups,)
        ``scipy.stats.spearmanr / kendalltau(variant=...) / pearsonr`` of each group's items; NaN
        for groups with fewer than 2 items or a constant side.

    Raises
    ------
    ValueError
        Unknown statistic.

    Examples
    --------
    >>> grouped_statistics(np.array([1., 2, 3, 3, 2, 1]), np.array([1., 2, 3, 1, 2, 3]),
    ...                    np.array([0, 0, 0, 1, 1, 1]), 2, "kendall_b").tolist()
    [1.0, -1.0]
    """
    X, m = _padded(np.asarray(x, dtype=float), codes, n_groups)
    Y, _ = _padded(np.asarray(y, dtype=float), codes, n_groups)
    both = m[:, :, None] & m[:, None, :]
    size = m.sum(axis=1).astype(float)
    x_varies = np.where(m, X, np.inf).min(axis=1) < np.where(m, X, -np.inf).max(axis=1)
    y_varies = np.where(m, Y, np.inf).min(axis=1) < np.where(m, Y, -np.inf).max(axis=1)
    if statistic in ("kendall_b", "kendall_c"):
        sx = np.sign(X[:, :, None] - X[:, None, :])
        sy = np.sign(Y[:, :, None] - Y[:, None, :])
        two_cmd = (both * sx * sy).sum(axis=(1, 2))
        xt = (both & (X[:, :, None] == X[:, None, :])).sum(axis=(1, 2))
        yt = (both & (Y[:, :, None] == Y[:, None, :])).sum(axis=(1, 2))
        minclasses = None
        if statistic == "kendall_c":
            earlier = np.tril(np.ones(both.shape[1:], dtype=bool), -1)  # j < i
            dup_x = (both & earlier & (X[:, :, None] == X[:, None, :])).any(axis=2)
            dup_y = (both & earlier & (Y[:, :, None] == Y[:, None, :])).any(axis=2)
            minclasses = np.minimum(size - dup_x.sum(axis=1), size - dup_y.sum(axis=1))
        return _tau_from_counts(two_cmd, xt, yt, size, statistic[-1], minclasses)
    if statistic == "spearman":
        # Average ranks: #smaller + (#equal incl. itself + 1) / 2 = sum_j (<) + 0.5 (==) + 0.5.
        X = (both * ((X[:, None, :] < X[:, :, None]) + 0.5 * (X[:, None, :] == X[:, :, None]))).sum(axis=2) + 0.5
        Y = (both * ((Y[:, None, :] < Y[:, :, None]) + 0.5 * (Y[:, None, :] == Y[:, :, None]))).sum(axis=2) + 0.5
    elif statistic != "pearson":
        raise ValueError(f"expected statistic in ['spearman', 'kendall_b', 'kendall_c', 'pearson'], got {statistic!r}")
    return _pearson_rows(X, Y, m.astype(float), x_varies, y_varies)


# -- pooled, over weighted resamples of prompts ------------------------------------------------
def group_pair_counts(u, v, h, codes, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt pair sums over ordered item pairs ``(i in g, j in g')``.

    Returns ``S[g, g'] = sum sign(u_i - v_j) sign(h_i - h_j)`` and ``T[g, g'] = #{u_i == v_j}``
    (``u = v`` gives a metric against itself, the diagonal ``i = j`` included in ``T``). The
    human view asks for the same metric's counts in several bootstraps and paired tests, so
    the last results are kept (keyed by the arrays' bytes; read-only copies are returned).
    """
    arrays = [np.ascontiguousarray(z, dtype=float) for z in (u, v, h)]
    key = (*(z.tobytes() for z in arrays), np.ascontiguousarray(codes, dtype=np.intp).tobytes(), n_groups)
    return _group_pair_counts_cached(key)


@functools.lru_cache(maxsize=64)
def _group_pair_counts_cached(key) -> tuple[np.ndarray, np.ndarray]:
    u, v, h = (np.frombuffer(b, dtype=float) for b in key[:3])
    codes, n_groups = np.frombuffer(key[3], dtype=np.intp), key[4]
    S, T = _group_pair_counts(u, v, h, codes, n_groups)
    S.flags.writeable = False
    T.flags.writeable = False
    return S, T


def _group_pair_counts(u, v, h, codes, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_groups)
    u, v, h, c = u[order], v[order], h[order], codes[order]
    s = np.sign(u[:, None] - v[None, :]) * np.sign(h[:, None] - h[None, :])
    t = (u[:, None] == v[None, :]).astype(float)
    S = np.zeros((n_groups, n_groups))
    T = np.zeros((n_groups, n_groups))
    present = np.flatnonzero(sizes)
    starts = np.concatenate(([0], np.cumsum(sizes[present])[:-1]))
    ix = np.ix_(c[starts], c[starts])
    S[ix] = np.add.reduceat(np.add.reduceat(s, starts, axis=0), starts, axis=1)
    T[ix] = np.add.reduceat(np.add.reduceat(t, starts, axis=0), starts, axis=1)
    return S, T


def _quad(a: np.ndarray, M: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ``a_k^T M b_k``."""
    return np.einsum("kg,kg->k", a @ M, b)


def _distinct_drawn(v: np.ndarray, codes: np.ndarray, n_groups: int, counts: np.ndarray) -> np.ndarray:
    """Distinct values of ``v`` among the items of the prompts drawn in each replicate."""
    _, inv = np.unique(v, return_inverse=True)
    has = np.zeros((n_groups, inv.max() + 1))
    has[codes, inv] = 1.0
    return ((counts > 0).astype(float) @ has > 0).sum(axis=1).astype(float)


def bootstrap_statistics(x, y, codes, n_groups: int, counts: np.ndarray, statistic: str) -> np.ndarray:
    """A pooled statistic on every cluster-bootstrap replicate, without copying data.

    Replicate ``b`` holds ``counts[b, g]`` copies of every item of prompt ``g``; the value is
    what the scipy function gives on those items concatenated (copies tie with each other).

    Parameters
    ----------
    x, y : ndarray, shape (n,)
    codes : ndarray of int, shape (n,)
    counts : ndarray, shape (n_boot, n_groups)
        :func:`analysis.stats.draw_counts` of the draws.
    statistic : {"spearman", "kendall_b", "kendall_c", "pearson"}

    Returns
    -------
    ndarray, shape (n_boot,)

    Raises
    ------
    ValueError
        Unknown statistic.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    sizes = np.bincount(codes, minlength=n_groups).astype(float)
    n_b = counts @ sizes
    if statistic in ("kendall_b", "kendall_c"):
        S, Tx = group_pair_counts(x, x, y, codes, n_groups)
        _, Ty = group_pair_counts(y, y, y, codes, n_groups)
        minclasses = None
        if statistic == "kendall_c":
            minclasses = np.minimum(_distinct_drawn(x, codes, n_groups, counts),
                                    _distinct_drawn(y, codes, n_groups, counts))
        return _tau_from_counts(_quad(counts, S, counts), _quad(counts, Tx, counts), _quad(counts, Ty, counts),
                                n_b, statistic[-1], minclasses)
    if statistic not in ("spearman", "pearson"):
        raise ValueError(f"expected statistic in ['spearman', 'kendall_b', 'kendall_c', 'pearson'], got {statistic!r}")
    w = counts[:, codes]
    x_varies = _distinct_drawn(x, codes, n_groups, counts) > 1
    y_varies = _distinct_drawn(y, codes, n_groups, counts) > 1
    if statistic == "spearman":
        x, y = _weighted_ranks(x, w), _weighted_ranks(y, w)
    else:
        x, y = np.broadcast_to(x, w.shape), np.broadcast_to(y, w.shape)
    return _pearson_rows(x, y, w, x_varies, y_varies)


def _weighted_ranks(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average rank of each item among ``w[b]`` copies of every item, per replicate ``b``."""
    uniq, inv = np.unique(v, return_inverse=True)
    per_value = np.zeros((w.shape[0], len(uniq)))
    np.add.at(per_value.T, inv, w.T)
    below = np.cumsum(per_value, axis=1) - per_value
    return (below + 0.5 * per_value + 0.5)[:, inv]


# -- pooled Kendall under prompt swaps (paired permutation test) -----------------------------------
def swapped_kendall_b_diffs(a, b, h, codes, n_groups: int, flips: np.ndarray) -> np.ndarray:
    """``tau_b(a', h) - tau_b(b', h)`` for every row of ``flips``, pooled over all items.

    Row ``k`` swaps all scores of prompt ``g`` between the two metrics where ``flips[k, g]``:
    ``a' = where(flips[k][codes], b, a)``, ``b'`` the rest. The ordered-pair sums split into
    prompt-pair blocks whose source (a or b) on each side is fixed by the two prompts' flips,
    so each permutation is four quadratic forms in the flip indicators.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    h = np.asarray(h, dtype=float)
    n = float(len(a))
    S_aa, T_aa = group_pair_counts(a, a, h, codes, n_groups)
    S_bb, T_bb = group_pair_counts(b, b, h, codes, n_groups)
    S_ab, T_ab = group_pair_counts(a, b, h, codes, n_groups)
    _, T_h = group_pair_counts(h, h, h, codes, n_groups)
    y_tied = float(T_h.sum())
    # A block (g, g') takes S_aa, S_bb, S_ab or S_ba = S_ab^T by the flips s_g, s_g' of its two
    # prompts; for 0/1 flips that is S_aa + (S_ba - S_aa) s_g + (S_ab - S_aa) s_g' + Q s_g s_g'
    # with Q = S_aa + S_bb - S_ab - S_ba. b' uses the flips 1 - s. Integer sums: exact.
    s = flips.astype(float)
    ones = np.ones(n_groups)

    def both_sides(A, B, C):
        Q = A + B - C - C.T
        lin = (C.T - A).sum(axis=1) + (C - A).sum(axis=0)
        sq = np.einsum("kg,kg->k", s @ Q, s)
        q_lin = s @ (Q.sum(axis=0) + Q.sum(axis=1))
        first = A.sum() + s @ lin + sq
        second = A.sum() + (ones - s) @ lin + Q.sum() - q_lin + sq
        return first, second

    cmd1, cmd2 = both_sides(S_aa, S_bb, S_ab)
    tie1, tie2 = both_sides(T_aa, T_bb, T_ab)
    y_tied = np.full(len(s), float(T_h.sum()))
    size = np.full(len(s), n)
    return _tau_from_counts(cmd1, tie1, y_tied, size) - _tau_from_counts(cmd2, tie2, y_tied, size)


# -- pooled Pearson under prompt swaps (paired permutation test) -----------------------------------
def swapped_pearson_diffs(a, b, h, codes, n_groups: int, flips: np.ndarray) -> np.ndarray:
    """``r(a', h) - r(b', h)`` (Pearson) for every row of ``flips``, pooled over all items.

    Row ``k`` swaps all scores of prompt ``g`` between the two metrics where ``flips[k, g]``
    (as :func:`swapped_kendall_b_diffs`). Pearson's r needs only the sums of x, x^2 and x h, and a
    swapped prompt contributes b's sums instead of a's: each is linear in the flips, so every
    permutation is a few matrix-vector products (equal to ``scipy.stats.pearsonr`` to rounding).
    """
    a, b, h = (np.asarray(v, dtype=float) for v in (a, b, h))
    n = float(len(a))
    s = flips.astype(float)

    def per_group(v):
        return np.bincount(codes, weights=v, minlength=n_groups)

    hc = h - h.mean()
    shh = float((hc * hc).sum())
    sums = {k: (per_group(v_a), per_group(v_b)) for k, v_a, v_b in
            (("x", a, b), ("xx", a * a, b * b), ("xh", a * hc, b * hc))}

    def corr(first: bool) -> np.ndarray:
        f = s if first else 1.0 - s  # the prompts where this side holds b's scores
        sx, sxx, sxh = ((ga.sum() + f @ (gb - ga)) for ga, gb in sums.values())
        with np.errstate(invalid="ignore", divide="ignore"):
            r = sxh / np.sqrt((sxx - sx * sx / n) * shh)
        return np.clip(r, -1.0, 1.0)

    return corr(True) - corr(False)
