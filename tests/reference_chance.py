"""The chance levels as first implemented (before issue 28): every permuted copy of the score
matrix analysed as extra metric columns through the whole pipeline. Test code only: the
independent reference that analysis.chance must agree with within Monte-Carlo error."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.aggregate import compute_seg_values, group_means
from analysis.compute import walk_values
from analysis.metametrics import get_meta_metric


def permute_within_segs(scores: np.ndarray, seg_rows: Sequence[np.ndarray], n_perm: int,
                        rng: np.random.Generator) -> np.ndarray:
    """``n_perm`` copies of the score matrix, each column's valid scores shuffled within every SEG;
    column ``p * n_metrics + j`` is permutation ``p`` of metric ``j``."""
    x = np.asarray(scores, dtype=float)
    n_rows, n_m = x.shape
    out = np.tile(x, (1, n_perm)).reshape(n_rows, n_perm, n_m)
    for rows in seg_rows:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) < 2:
            continue
        block = x[rows]
        valid = ~np.isnan(block)
        keys = np.where(valid[None], rng.random((n_perm, len(rows), n_m)), np.inf)
        src = np.argsort(keys, axis=1)
        dst = np.broadcast_to(np.argsort(~valid, axis=0, kind="stable")[None], src.shape)
        perm = np.empty((n_perm, len(rows), n_m))
        np.put_along_axis(perm, dst, np.take_along_axis(np.broadcast_to(block[None], src.shape), src, axis=1), axis=1)
        out[rows] = perm.transpose(1, 0, 2)
    return out.reshape(n_rows, n_perm * n_m)


def reference_replicates(scores, structure, walk_table, sigma, protocol, metrics, meta_metrics,
                         lower_is_better=(), n_perm=100, seed=0, max_columns=200) -> np.ndarray:
    """Dataset values of ``n_perm`` permuted tables: ``(n_perm, metric, meta_metric, group)``."""
    n_m = len(metrics)
    wanted = set(walk_table.seg_ids)
    seg_rows = [np.concatenate(s.rows) for s in structure.segs if s.seg_id in wanted and s.rows]
    rng = np.random.default_rng([seed, 116])
    reps = []
    step = max(1, max_columns // max(n_m, 1))
    magnitude = [k for k, name in enumerate(meta_metrics) if get_meta_metric(name).normalised] \
        if protocol.lower_is_better_delta == "magnitude" else []
    flip = np.array([m in set(lower_is_better) for m in metrics], dtype=bool)
    for lo in range(0, n_perm, step):
        p = min(step, n_perm - lo)
        perm = permute_within_segs(scores, seg_rows, p, rng)
        wv, nv = walk_values(walk_table, perm, protocol, meta_metrics)
        sv = compute_seg_values(walk_table, wv, nv, np.tile(sigma, p), protocol, list(metrics) * p, meta_metrics)
        est, _ = group_means(sv.values, sv.groups())
        est = est.reshape(p, n_m, len(meta_metrics), -1)
        for k in magnitude:
            est[:, flip, k] = np.abs(est[:, flip, k])
        reps.append(est)
    return np.concatenate(reps, axis=0)
