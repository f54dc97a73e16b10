"""From walk values to SEG values (walk weighting) and from SEG values to subsets (plain means,
:func:`analysis.stats.resampling.group_means`, re-exported here).

Also the delta normaliser: the metric's score standard deviation (ddof=1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .protocols import Protocol
from .stats.resampling import group_means  # the one weighted group mean (point estimate and bootstrap)
from .walks import Structure, WalkTable, seg_image_rows

__all__ = ["SegValues", "seg_means", "score_std", "group_means", "AVG", "NormaliserMoments", "normaliser_moments"]

AVG = "Avg"


@dataclass(frozen=True)
class SegValues:
    """Per-SEG meta-metric values of one protocol: ``values[metric, meta_metric, seg]``.

    delta values are already divided by ``sigma`` (per metric) when the protocol normalises.
    ``subsets[s]`` is SEG ``s``'s subset (or None).
    """

    protocol: Protocol
    metrics: tuple[str, ...]
    meta_metrics: tuple[str, ...]
    seg_ids: tuple[str, ...]
    subsets: tuple[str | None, ...]
    values: np.ndarray
    n_walks: np.ndarray
    sigma: np.ndarray

    def groups(self) -> list[tuple[str, np.ndarray]]:
        """``[("Avg", all SEG indices), (subset, its SEG indices), ...]`` in first-seen order."""
        out = [(AVG, np.arange(len(self.seg_ids)))]
        for name in dict.fromkeys(s for s in self.subsets if s is not None):
            out.append((name, np.flatnonzero(np.array([s == name for s in self.subsets], dtype=bool))))
        return out


def seg_means(values: np.ndarray, n_valid: np.ndarray, walk_seg: np.ndarray, n_segs: int,
              weighting: str) -> np.ndarray:
    """Weighted mean of walk values per SEG.

    Parameters
    ----------
    values : ndarray, shape (n_metrics, n_meta, n_walks)
    n_valid : ndarray, shape (n_metrics, n_walks)
        Valid samples per walk: the weights when ``weighting == "samples"``.
    walk_seg : ndarray, shape (n_walks,)
        SEG index of each walk.
    weighting : {"samples", "uniform"}

    NaN policy: NaN walk values are left out (weight and value); a SEG with no non-NaN walk
    value is NaN.

    Returns
    -------
    ndarray, shape (n_metrics, n_meta, n_segs)
    """
    if weighting not in {"samples", "uniform"}:
        raise ValueError(f"expected walk weighting 'samples' or 'uniform', got {weighting!r}")
    n_m, n_k, n_w = values.shape
    w = n_valid.astype(float) if weighting == "samples" else np.ones((n_m, n_w))
    ok = ~np.isnan(values)
    wv = np.where(ok, values * w[:, None, :], 0.0)
    ww = np.where(ok, w[:, None, :], 0.0)
    idx = (np.arange(n_m * n_k)[:, None] * n_segs + walk_seg[None, :]).ravel()
    size = n_m * n_k * n_segs
    num = np.bincount(idx, weights=wv.ravel(), minlength=size).reshape(n_m, n_k, n_segs)
    den = np.bincount(idx, weights=ww.ravel(), minlength=size).reshape(n_m, n_k, n_segs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _pow2_scale(x: np.ndarray) -> np.ndarray:
    """Per column, a power of two near ``max |x|`` (1 for an all-NaN or all-zero column).

    Dividing by a power of two is exact, so scaled statistics equal the unscaled ones bit for bit
    where those do not overflow, and squares of scores near 1e200 stay finite.
    """
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN column: scale 1
            top = np.nanmax(np.abs(x), axis=0) if x.shape[0] else np.zeros(x.shape[1])
    top = np.where(np.isfinite(top) & (top > 0), top, 1.0)
    return np.ldexp(1.0, np.frexp(top)[1])


def _normaliser_rows(structure: Structure, seg_ids: Sequence[str] | None, how: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the analysed SEGs (SEG after SEG, in structure order) and the rows outside them
    that still enter the normaliser."""
    if how not in {"std_all", "std_included", "none"}:
        raise ValueError(f"expected delta_norm 'std_all', 'std_included' or 'none', got {how!r}")
    keep = None if seg_ids is None else set(seg_ids)
    rows, _, _ = seg_image_rows([s for s in structure.segs if keep is None or s.seg_id in keep])
    if how != "std_all":
        return rows, np.zeros(0, dtype=np.int64)
    inside = np.zeros(structure.n_rows, dtype=bool)
    inside[rows] = True
    return rows, np.flatnonzero(~inside)


def score_std(scores: np.ndarray, structure: Structure, seg_ids: Sequence[str] | None, how: str) -> np.ndarray:
    """Delta normaliser per metric: sample std (ddof=1) of the scores, NaN dropped.

    ``std_all``: every row of the score matrix (SEGs left out included, as the paper's code);
    ``std_included``: rows of the SEGs ``seg_ids``; ``none``: ones. Scale-safe: each column is
    divided by a power of two near its largest magnitude first, so scores near 1e200 give their
    std (not ``inf``, which would make every delta 0) and ordinary scores give the same bits as
    ``numpy.std``. Fewer than two scores: NaN.

    Examples
    --------
    >>> import numpy as np
    >>> from analysis.walks import SegNodes, Structure
    >>> st = Structure((SegNodes("0", None, ("0",), (0,), (np.arange(3),), None),), 3)
    >>> score_std(np.array([[1e200], [2e200], [3e200]]), st, None, "std_all") / 1e200
    array([1.])
    """
    n_m = scores.shape[1]
    rows, _ = _normaliser_rows(structure, seg_ids, how)
    if how == "none":
        return np.ones(n_m)
    x = scores if how == "std_all" else scores[rows]
    scale = _pow2_scale(x)
    sd = np.full(n_m, np.nan)
    for j in range(n_m):
        col = x[:, j][~np.isnan(x[:, j])] / scale[j]
        if len(col) > 1:
            sd[j] = col.std(ddof=1) * scale[j]
    return sd


@dataclass(frozen=True)
class NormaliserMoments:
    """Per-SEG moments of each metric's scores, for resampling the delta normaliser with the SEGs.

    Scores are divided by ``scale`` (a power of two per metric) and centred on ``center`` (their
    scaled mean); ``n``, ``mean``, ``m2`` are ``(n_segs, n_metrics)`` count, mean and sum of
    squared deviations from the SEG mean; ``fixed_*`` (``(n_metrics,)``) describe the rows that
    enter the normaliser but are never resampled (``std_all``: rows outside the analysed SEGs).
    """

    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    fixed_n: np.ndarray
    fixed_mean: np.ndarray
    fixed_m2: np.ndarray
    scale: np.ndarray

    def std(self, counts: np.ndarray) -> np.ndarray:
        """Normaliser of each replicate: ``(n_boot, n_metrics)`` from ``(n_boot, n_segs)`` draw counts.

        Pooled with the parallel-variance formula: ``M2 = sum_s c_s (m2_s + n_s mean_s^2) -
        N mean^2`` over drawn SEGs plus the fixed rows, ``std = sqrt(M2 / (N - 1)) * scale``;
        the centring keeps the cancellation harmless. Fewer than two scores: NaN.
        """
        c = np.asarray(counts, dtype=float)
        big_n = c @ self.n + self.fixed_n
        s1 = c @ (self.n * self.mean) + self.fixed_n * self.fixed_mean
        s2 = c @ (self.m2 + self.n * self.mean ** 2) + self.fixed_m2 + self.fixed_n * self.fixed_mean ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            m2 = np.maximum(s2 - s1 * s1 / big_n, 0.0)
            return np.where(big_n > 1, np.sqrt(m2 / (big_n - 1)) * self.scale, np.nan)


def _moments(z: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count, mean and sum of squared deviations from the mean of each group's non-NaN values.

    Parameters
    ----------
    z : ndarray, shape (n_rows, n_columns)
    group : ndarray of int, shape (n_rows,)
        Each row's group, in ``[0, n_groups)``.
    n_groups : int

    Returns
    -------
    n, mean, m2 : ndarray, shape (n_groups, n_columns)
        A group without a value: count, mean and m2 0.

    Notes
    -----
    ``np.bincount`` adds each group's rows one after the other in row order, as ``sum(axis=0)``
    of the group's rows does (the same bits; ``np.add.reduceat`` sums in another order).
    """
    ok = ~np.isnan(z)
    z0 = np.where(ok, z, 0.0)
    n_c = z.shape[1]
    n = np.zeros((n_groups, n_c))
    total = np.zeros((n_groups, n_c))
    for j in range(n_c):
        n[:, j] = np.bincount(group, weights=ok[:, j], minlength=n_groups)
        total[:, j] = np.bincount(group, weights=z0[:, j], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, total / n, 0.0)
    dev = np.where(ok, (z - mean[group]) ** 2, 0.0)
    m2 = np.zeros((n_groups, n_c))
    for j in range(n_c):
        m2[:, j] = np.bincount(group, weights=dev[:, j], minlength=n_groups)
    return n, mean, m2


def normaliser_moments(scores: np.ndarray, structure: Structure, seg_ids: Sequence[str] | None,
                       how: str) -> NormaliserMoments | None:
    """:class:`NormaliserMoments` of the analysed SEGs (None when ``how == "none"``: nothing to resample).

    ``seg_ids`` must list the SEGs in the order of the per-SEG values being resampled.
    """
    _, outside = _normaliser_rows(structure, seg_ids, how)
    if how == "none":
        return None
    segs = list(structure.segs)
    if seg_ids is not None:
        by_id = {s.seg_id: s for s in structure.segs}
        segs = [by_id[i] for i in seg_ids]
    rows, seg, _ = seg_image_rows(segs)
    scale = _pow2_scale(scores)
    y = scores / scale
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            center = np.nan_to_num(np.nanmean(y, axis=0))
    z = y - center
    n, mean, m2 = _moments(z[rows], seg, len(segs))
    fn, fmean, fm2 = (a[0] for a in _moments(z[outside], np.zeros(len(outside), dtype=np.int64), 1))
    return NormaliserMoments(n, mean, m2, fn, fmean, fm2, scale)


def compute_seg_values(walk_table: WalkTable, walk_vals: np.ndarray, n_valid: np.ndarray, sigma: np.ndarray,
                       protocol: Protocol, metrics: Sequence[str], meta_metrics: Sequence[str]) -> SegValues:
    """SEG values from walk values; divides normalised meta-metrics (delta) by ``sigma``."""
    from .metametrics import get_meta_metric

    vals = seg_means(walk_vals, n_valid, walk_table.walk_seg, walk_table.n_segs, protocol.walk_weighting)
    for k, name in enumerate(meta_metrics):
        if get_meta_metric(name).normalised:
            with np.errstate(invalid="ignore", divide="ignore"):
                vals[:, k, :] = vals[:, k, :] / sigma[:, None]
    return SegValues(protocol, tuple(metrics), tuple(meta_metrics), walk_table.seg_ids, walk_table.subsets, vals,
                     walk_table.walks_per_seg(), np.asarray(sigma, dtype=float))
