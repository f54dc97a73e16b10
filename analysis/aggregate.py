"""From walk values to SEG values (walk weighting) and from SEG values to subsets (plain means).

Also the delta normaliser: the metric's score standard deviation (ddof=1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .protocols import Protocol
from .walks import Structure, WalkTable

__all__ = ["SegValues", "seg_means", "score_std", "group_means", "AVG"]

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


def score_std(scores: np.ndarray, structure: Structure, seg_ids: Sequence[str] | None, how: str) -> np.ndarray:
    """Delta normaliser per metric: sample std (ddof=1) of the scores, NaN dropped.

    ``std_all``: every row of the score matrix (SEGs left out included, as the paper's code);
    ``std_included``: rows of the SEGs ``seg_ids``; ``none``: ones.
    """
    n_m = scores.shape[1]
    if how == "none":
        return np.ones(n_m)
    if how == "std_all":
        x = scores
    elif how == "std_included":
        keep = set(seg_ids) if seg_ids is not None else None
        rows = [r for s in structure.segs if keep is None or s.seg_id in keep for r in s.rows]
        x = scores[np.concatenate(rows)] if rows else scores[:0]
    else:
        raise ValueError(f"expected delta_norm 'std_all', 'std_included' or 'none', got {how!r}")
    sd = np.full(n_m, np.nan)
    for j in range(n_m):
        col = x[:, j][~np.isnan(x[:, j])]
        if len(col) > 1:
            sd[j] = col.std(ddof=1)
    return sd


def group_means(values: np.ndarray, groups: Sequence[tuple[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Plain means over the SEGs of each group, NaN SEG values left out.

    Parameters
    ----------
    values : ndarray, shape (..., n_segs)
    groups : sequence of (name, SEG indices)

    Returns
    -------
    means, counts : ndarrays of shape (..., n_groups)
    """
    means, counts = [], []
    for _, idx in groups:
        v = values[..., idx]
        ok = ~np.isnan(v)
        c = ok.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means.append(np.where(c > 0, np.where(ok, v, 0.0).sum(axis=-1) / c, np.nan))
        counts.append(c)
    return np.stack(means, axis=-1), np.stack(counts, axis=-1)


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
