"""Cluster bootstrap over SEGs, stratified by subset, reusing the per-SEG values.

A replicate draws, within every subset (SEGs without a subset form one more stratum), as many
SEGs with replacement as the subset has, and recomputes every subset mean and the Avg from the
per-SEG values already computed: no walk is recomputed, so 1000 replicates of 20 metrics cost a
few matrix products. The delta normaliser (score std) is held at its full-data value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["stratified_counts", "bootstrap_group_means", "percentile_ci"]


def stratified_counts(strata: Sequence, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each SEG is drawn in each replicate: ``(n_boot, n_segs)`` float matrix.

    Every row sums, within each stratum, to the stratum's size.

    Examples
    --------
    >>> c = stratified_counts(["a", "a", "b"], 4, np.random.default_rng(0))
    >>> c.shape, c[:, :2].sum(axis=1).tolist(), c[:, 2].tolist()
    ((4, 3), [2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])
    """
    if n_boot < 1:
        raise ValueError(f"expected at least one bootstrap replicate, got {n_boot}")
    labels = ["\0none" if s is None else str(s) for s in strata]
    n = len(labels)
    counts = np.zeros((n_boot, n))
    for name in dict.fromkeys(labels):
        members = np.flatnonzero(np.array([lbl == name for lbl in labels], dtype=bool))
        k = len(members)
        draws = rng.integers(0, k, size=(n_boot, k))
        flat = (np.arange(n_boot)[:, None] * k + draws).ravel()
        counts[:, members] = np.bincount(flat, minlength=n_boot * k).reshape(n_boot, k)
    return counts


def bootstrap_group_means(values: np.ndarray, counts: np.ndarray,
                          groups: Sequence[tuple[str, np.ndarray]]) -> np.ndarray:
    """Replicates of every group mean.

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
    ok = ~np.isnan(values)
    v0 = np.where(ok, values, 0.0)
    out = np.empty((counts.shape[0], values.shape[0], len(groups)))
    for g, (_, idx) in enumerate(groups):
        c = counts[:, idx]
        num = c @ v0[:, idx].T
        den = c @ ok[:, idx].T.astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, :, g] = np.where(den > 0, num / den, np.nan)
    return out


def percentile_ci(replicates: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 (NaN replicates ignored; all-NaN gives NaN)."""
    if not 0 < confidence < 1:
        raise ValueError(f"expected a confidence level in (0, 1), got {confidence}")
    alpha = (1 - confidence) / 2
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells: NaN is the answer
            lo, hi = np.nanquantile(replicates, [alpha, 1 - alpha], axis=0)
    return lo, hi
