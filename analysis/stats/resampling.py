"""Cluster bootstrap: clusters (SEGs, prompts) drawn with replacement, optionally within strata.

The SEG view draws, within every subset (SEGs without a subset form one more stratum), SEGs with
replacement (by default the rescaled bootstrap of Rao & Wu: ``n_h - 1`` draws weighing
``n_h / (n_h - 1)``; see :func:`stratified_counts`), and recomputes every subset mean and the Avg from the
per-SEG values already computed (:func:`bootstrap_group_means`): no walk is recomputed, so 1000
replicates of 20 metrics cost a few matrix products. :func:`group_means` is the one weighted group
mean: the point estimates (unit weights) and every replicate (the resample counts). The human view
draws prompts the same way (:func:`cluster_draws`, one stratum) and averages per-prompt values with it. The delta normaliser is resampled with the SEGs by
:class:`analysis.aggregate.NormaliserMoments`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BOOTSTRAP_SCHEMES", "cluster_draws", "draw_counts", "stratified_counts", "group_means", "bootstrap_group_means",
           "MAX_BOOTSTRAP", "MAX_BOOTSTRAP_GIB", "bootstrap_bytes", "check_bootstrap_size"]

#: Largest ``bootstrap`` accepted whatever the table (``ts2/options.py`` declares it): 100 times
#: the default 1000; the CI's Monte-Carlo error is far below its width long before.
MAX_BOOTSTRAP = 100_000
#: Memory the replicates of one protocol may take (:func:`bootstrap_bytes`), in GiB.
MAX_BOOTSTRAP_GIB = 8.0


def cluster_draws(n_clusters: int, n_boot: int, rng: np.random.Generator, n_draws: int | None = None) -> np.ndarray:
    """``(n_boot, n_draws)`` cluster indices drawn with replacement, one row per replicate
    (``n_draws`` defaults to ``n_clusters``).

    Examples
    --------
    >>> cluster_draws(3, 2, np.random.default_rng(0)).tolist()
    [[2, 1, 1], [0, 0, 0]]
    """
    if n_boot < 1:
        raise ValueError(f"expected at least one bootstrap replicate, got {n_boot}")
    if n_clusters < 1:
        raise ValueError(f"expected at least one cluster to resample, got {n_clusters}")
    return rng.integers(0, n_clusters, size=(n_boot, n_clusters if n_draws is None else n_draws))


def draw_counts(draws: np.ndarray, n_clusters: int) -> np.ndarray:
    """How often each cluster is drawn in each replicate: ``(n_boot, n_clusters)`` floats.

    Examples
    --------
    >>> draw_counts(np.array([[2, 1, 1], [0, 0, 2]]), 3).tolist()
    [[0.0, 2.0, 1.0], [2.0, 0.0, 1.0]]
    """
    n_boot = draws.shape[0]
    flat = (np.arange(n_boot)[:, None] * n_clusters + draws).ravel()
    return np.bincount(flat, minlength=n_boot * n_clusters).reshape(n_boot, n_clusters).astype(float)


BOOTSTRAP_SCHEMES = ("rescaled", "plain")


def stratified_counts(strata: Sequence, n_boot: int, rng: np.random.Generator,
                      scheme: str = "plain") -> np.ndarray:
    """How often each SEG counts in each replicate: ``(n_boot, n_segs)`` float matrix.

    ``plain``: each stratum of ``n_h`` SEGs draws ``n_h`` of them with replacement (integer
    counts). ``rescaled`` (Rao & Wu 1988, the survey statistician's bootstrap of a stratified
    sample): each stratum draws ``n_h - 1`` with replacement and every draw weighs
    ``n_h / (n_h - 1)``. The plain bootstrap's variance of a stratum mean is ``(n_h - 1) / n_h``
    times the unbiased one (0.96 for TS2's 25 Nat SEGs), which narrows every interval; the
    rescaled draw makes it unbiased for means, keeps the stratum's total weight at ``n_h``, and
    leaves ratios of weighted sums (every statistic here) well defined. A stratum of one SEG has
    no variance to resample and keeps count 1. Either way every row sums, within each stratum,
    to the stratum's size.

    Raises
    ------
    ValueError
        ``n_boot < 1`` or an unknown ``scheme``.

    Examples
    --------
    >>> c = stratified_counts(["a", "a", "b"], 4, np.random.default_rng(0))
    >>> c.shape, c[:, :2].sum(axis=1).tolist(), c[:, 2].tolist()
    ((4, 3), [2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])
    >>> stratified_counts(["a", "a", "a"], 2, np.random.default_rng(0), "rescaled").tolist()  # 2 draws of 3, x 1.5
    [[0.0, 1.5, 1.5], [1.5, 1.5, 0.0]]
    """
    if n_boot < 1:
        raise ValueError(f"expected at least one bootstrap replicate, got {n_boot}")
    if scheme not in BOOTSTRAP_SCHEMES:
        raise ValueError(f"expected a bootstrap scheme among {list(BOOTSTRAP_SCHEMES)}, got {scheme!r}")
    labels = ["\0none" if s is None else str(s) for s in strata]
    n = len(labels)
    counts = np.zeros((n_boot, n))
    for name in dict.fromkeys(labels):
        members = np.flatnonzero(np.array([lbl == name for lbl in labels], dtype=bool))
        n_h = len(members)
        if scheme == "plain":
            counts[:, members] = draw_counts(cluster_draws(n_h, n_boot, rng), n_h)
        elif n_h == 1:
            counts[:, members] = 1.0
        else:
            counts[:, members] = draw_counts(cluster_draws(n_h, n_boot, rng, n_h - 1), n_h) * (n_h / (n_h - 1))
    return counts


def group_means(values: np.ndarray, groups: Sequence[tuple[str, np.ndarray]],
                weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted means over the SEGs (clusters) of each group, NaN values left out: the point
    estimate (unit weights) and every bootstrap replicate (resample counts) of a group mean.

    For a cell ``c`` (a row of ``values``), group ``g`` and weight row ``w``::

        mean = sum_{j in g, v[c, j] not NaN} w[j] * v[c, j] / sum_{j in g, v[c, j] not NaN} w[j]

    Parameters
    ----------
    values : ndarray, shape (..., n_segs)
        Per-SEG values; NaN = the SEG has no value for that cell.
    groups : sequence of (name, SEG indices)
        The indices: an integer array, or a slice (``slice(None)``: every SEG).
    weights : ndarray, shape (n_w, n_segs), optional
        One row per weighting, e.g. the resample counts of :func:`stratified_counts` (non-negative).
        None (default): every SEG counts once, and the sums are plain ``numpy`` sums.

    Returns
    -------
    means : ndarray, shape (..., n_groups), or (n_w, ..., n_groups) with ``weights``
        NaN where no SEG of the group has a value (or, with weights, none of weight > 0).
    totals : ndarray, same shape
        The weight behind each mean: with unit weights the number of SEGs with a value (int).

    Raises
    ------
    ValueError
        ``weights`` not of shape ``(n_w, n_segs)``.

    Notes
    -----
    With weights, each group's sums are one matrix product over all cells and weight rows (1000
    replicates of 20 cells cost a few products). Without, they are ``sum(axis=-1)`` of the
    NaN-zeroed values: the same value up to rounding, kept so the point estimates do not depend
    on the BLAS kernel a one-row product would take.

    Examples
    --------
    >>> v = np.array([[1.0, np.nan, 3.0, 5.0]])
    >>> groups = [("Avg", np.arange(4)), ("A", np.array([0, 1]))]
    >>> m, n = group_means(v, groups)
    >>> m.tolist(), n.tolist()
    ([[3.0, 1.0]], [[3, 1]])
    >>> m, w = group_means(v, groups, np.array([[2.0, 1.0, 0.0, 0.0]]))
    >>> m.tolist(), w.tolist()
    ([[[1.0, 1.0]]], [[[2.0, 2.0]]])
    """
    ok = ~np.isnan(values)
    v0 = np.where(ok, values, 0.0)
    lead, n_segs = values.shape[:-1], values.shape[-1]
    if weights is None:
        shape, total_type = (*lead, len(groups)), int
    else:
        weights = np.asarray(weights, dtype=float)
        if weights.ndim != 2 or weights.shape[1] != n_segs:
            raise ValueError(f"expected weights of shape (n_w, {n_segs}) (one weight per SEG), got {weights.shape}")
        shape, total_type = (len(weights), *lead, len(groups)), float
        n_cells = int(np.prod(lead, dtype=int))
        v0, ok = v0.reshape(n_cells, n_segs), ok.reshape(n_cells, n_segs)
    means = np.empty(shape)
    totals = np.empty(shape, dtype=total_type)
    for g, (_, idx) in enumerate(groups):
        if weights is None:
            num, den = v0[..., idx].sum(axis=-1), ok[..., idx].sum(axis=-1)
        else:
            w = weights[:, idx]
            num = (w @ v0[:, idx].T).reshape(shape[:-1])
            den = (w @ ok[:, idx].T.astype(float)).reshape(shape[:-1])
        with np.errstate(invalid="ignore", divide="ignore"):
            means[..., g] = np.where(den > 0, num / den, np.nan)
        totals[..., g] = den
    return means, totals


def bootstrap_group_means(values: np.ndarray, counts: np.ndarray,
                          groups: Sequence[tuple[str, np.ndarray]]) -> np.ndarray:
    """Replicates of every group mean: :func:`group_means` weighted by each replicate's counts.

    Parameters
    ----------
    values : ndarray, shape (n_cells, n_segs)
        Per-SEG values (NaN = SEG has no value for that cell; left out like in the point estimate).
    counts : ndarray, shape (n_boot, n_segs)
        From :func:`stratified_counts`.
    groups : sequence of (name, SEG indices)

    Returns
    -------
    ndarray, shape (n_boot, n_cells, n_groups)
        NaN where a replicate drew no SEG with a value.
    """
    return group_means(values, groups, counts)[0]


def bootstrap_bytes(n_boot: int, n_segs: int, n_cells: int, n_groups: int) -> int:
    """Peak memory, in bytes, of a SEG bootstrap with ``n_boot`` replicates (an estimate).

    Per replicate, float64: the counts row and the draws behind it (``2 * n_segs``), the kept
    replicates (``n_cells * n_groups``), the products of :func:`bootstrap_group_means` and the
    normaliser ratio (about ``n_cells * 4``), and the copies the interval takes (``2 * n_cells * n_groups``):
    ``8 * (2 * n_segs + n_cells * (3 * n_groups + 4))``.

    Examples
    --------
    >>> bootstrap_bytes(1000, 164, 20, 4)
    5184000
    """
    return 8 * int(n_boot) * (2 * int(n_segs) + int(n_cells) * (3 * int(n_groups) + 4))


def check_bootstrap_size(n_boot: int, n_segs: int, n_cells: int, n_groups: int,
                         max_gib: float = MAX_BOOTSTRAP_GIB) -> None:
    """Refuse a bootstrap whose replicates would not fit in ``max_gib`` GiB (or over :data:`MAX_BOOTSTRAP`).

    Raises
    ------
    ValueError
        ``expected bootstrap <= N (about X GiB for this table: ...), got B``, N the largest
        count that fits.
    """
    per = bootstrap_bytes(1, n_segs, n_cells, n_groups)
    fits = min(MAX_BOOTSTRAP, int(max_gib * 2**30 // max(per, 1)))
    if n_boot <= fits:
        return
    gib = bootstrap_bytes(n_boot, n_segs, n_cells, n_groups) / 2**30
    raise ValueError(f"expected bootstrap <= {fits} (about {gib:,.1f} GiB for this table: {n_segs} SEGs, "
                     f"{n_cells} metric x meta-metric cells, {n_groups} groups (Avg and the subsets); at most {max_gib:g} GiB and "
                     f"{MAX_BOOTSTRAP} resamples), got {n_boot}")
