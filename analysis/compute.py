"""Per-walk meta-metric values for many metrics at once (the vectorised engine).

Every walk bucket of a :class:`~analysis.walks.WalkTable` is gathered for all metric columns in
one fancy-indexing step, stacked as rows ``(metric, walk)``, and handed in memory-bounded chunks
to :class:`~analysis.metametrics.walkstats.WalkStats`; each registered meta-metric then reads
what it needs from the shared sorted statistics.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .metametrics import WalkStats, get_meta_metric
from .protocols import Protocol
from .walks import WalkTable

__all__ = ["walk_values"]


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
