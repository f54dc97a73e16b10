"""Chance levels: what each meta-metric reads when scores carry no information about errors.

A meta-metric's floor is not 0: the KS statistic between two small samples drawn from one
distribution is far from 0, a metric that ties everything gets pair_acc 0.5, and so on. The null
"scores say nothing about error counts" is made concrete by permuting each metric's scores among
the images of each SEG (NaN cells stay where they are), which keeps every SEG's node sizes, walks
and score distribution, and recomputing the meta-metric with the protocol's own rules. The chance
level is the mean of the dataset values (Avg and subsets) over ``n_perm`` permutations, the band
their percentile interval (:func:`analysis.stats.percentile_ci`), ``mc_error`` the Monte-Carlo
standard error of the chance level itself (``std / sqrt(n_perm)`` over the permutations).

Which null this is: each metric keeps its *own* scores, so a discrete metric keeps its per-SEG
ties; a random metric with the same overall score distribution (which does not tie like that
within a SEG) can read higher. "Above chance" and "beats a random control" are different bars.

The permuted columns are analysed like extra metrics (all permutations of all metrics go through
the vectorised kernels in chunks), so the cost is that of ``n_perm`` more analyses of the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .aggregate import compute_seg_values, group_means
from .compute import walk_values
from .metametrics import get_meta_metric
from .protocols import Protocol
from .stats import percentile_ci
from .walks import Structure, WalkTable

__all__ = ["ChanceLevels", "NULL_DESCRIPTION", "permute_within_segs", "chance_levels", "chance_adjusted"]

#: The null the chance levels are the expectation under (the tables and the report name it).
NULL_DESCRIPTION = "each metric's own scores permuted within each SEG (its ties and missing cells kept)"


@dataclass(frozen=True)
class ChanceLevels:
    """Chance levels of one protocol: ``mean``/``low``/``high``/``mc_error`` are ``(metric, meta_metric,
    group)`` arrays (NaN where undefined), from ``n_perm`` within-SEG permutations; the band is at level
    ``confidence``, ``mc_error`` the Monte-Carlo standard error of ``mean`` (``std / sqrt(n)`` over the
    ``n`` permutations where the cell is defined; NaN with fewer than two)."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_perm: int
    confidence: float
    mc_error: np.ndarray


def permute_within_segs(scores: np.ndarray, seg_rows: Sequence[np.ndarray], n_perm: int,
                        rng: np.random.Generator) -> np.ndarray:
    """``n_perm`` copies of the score matrix, each column's valid scores shuffled within every SEG.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        NaN marks a missing score; missing cells stay in place, only valid scores move.
    seg_rows : sequence of int arrays
        The rows of each SEG (rows of no SEG are left as they are).
    n_perm : int
    rng : numpy Generator

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
    out = np.tile(x, (1, n_perm)).reshape(n_rows, n_perm, n_m)
    for rows in seg_rows:
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) < 2:
            continue
        block = x[rows]  # (k, M)
        valid = ~np.isnan(block)
        # Valid rows in a random order first, NaN rows last (key inf), one order per permutation.
        keys = np.where(valid[None], rng.random((n_perm, len(rows), n_m)), np.inf)
        src = np.argsort(keys, axis=1)
        dst = np.broadcast_to(np.argsort(~valid, axis=0, kind="stable")[None], src.shape)
        perm = np.empty((n_perm, len(rows), n_m))
        np.put_along_axis(perm, dst, np.take_along_axis(np.broadcast_to(block[None], src.shape), src, axis=1), axis=1)
        out[rows] = perm.transpose(1, 0, 2)
    return out.reshape(n_rows, n_perm * n_m)


def chance_levels(scores: np.ndarray, structure: Structure, walk_table: WalkTable, sigma: np.ndarray,
                  protocol: Protocol, metrics: Sequence[str], meta_metrics: Sequence[str],
                  lower_is_better: Sequence[str] = (), *, n_perm: int, seed: int = 0, confidence: float = 0.95,
                  max_columns: int = 200, progress: bool = False) -> ChanceLevels:
    """Chance level and band of every meta-metric of every metric under ``protocol``.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        Oriented scores (higher is better), as analysed.
    structure, walk_table : the analysis' structure and the protocol's walks (of the analysed SEGs).
    sigma : ndarray, shape (n_metrics,)
        The delta normaliser; a within-SEG permutation does not change it.
    protocol, metrics, meta_metrics, lower_is_better
        As in :func:`analysis.pipeline.run_protocol` (``magnitude`` deltas are taken as magnitudes
        in every permutation too, like the value they are compared with).
    n_perm : int
        Permutations (>= 1); the cost grows linearly with it. No default here: the commands'
        default is ``chance`` in ``conf/analysis/default.yaml``.
    seed : int
        Seeds the permutations (``default_rng([seed, 16])``, a stream apart from the bootstrap's).
    confidence : float
        Level of the band.
    max_columns : int
        Permuted columns analysed at once (memory bound).

    Returns
    -------
    ChanceLevels

    Raises
    ------
    ValueError
        ``n_perm < 1``.
    """
    if n_perm < 1:
        raise ValueError(f"expected at least one permutation for the chance levels, got {n_perm}")
    n_m = len(metrics)
    wanted = set(walk_table.seg_ids)
    seg_rows = [np.concatenate(s.rows) for s in structure.segs if s.seg_id in wanted and s.rows]
    rng = np.random.default_rng([seed, 16])
    groups = None
    reps = []
    step = max(1, max_columns // max(n_m, 1))
    chunks = range(0, n_perm, step)
    if progress:
        from tqdm.auto import tqdm

        chunks = tqdm(chunks, desc=f"chance levels ({protocol.name})", leave=False)
    magnitude = [k for k, name in enumerate(meta_metrics) if get_meta_metric(name).normalised] \
        if protocol.lower_is_better_delta == "magnitude" else []
    flip = np.array([m in set(lower_is_better) for m in metrics], dtype=bool)
    for lo in chunks:
        p = min(step, n_perm - lo)
        perm = permute_within_segs(scores, seg_rows, p, rng)
        wv, nv = walk_values(walk_table, perm, protocol, meta_metrics)
        sv = compute_seg_values(walk_table, wv, nv, np.tile(sigma, p), protocol, list(metrics) * p, meta_metrics)
        groups = sv.groups()
        est, _ = group_means(sv.values, groups)  # (p * M, K, G)
        est = est.reshape(p, n_m, len(meta_metrics), len(groups))
        for k in magnitude:
            est[:, flip, k] = np.abs(est[:, flip, k])
        reps.append(est)
    r = np.concatenate(reps, axis=0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cells undefined in every permutation: NaN
        mean = np.nanmean(r, axis=0)
        n_ok = (~np.isnan(r)).sum(axis=0)
        mc = np.where(n_ok > 1, np.nanstd(r, axis=0, ddof=1) / np.sqrt(np.maximum(n_ok, 1)), np.nan)
    ci = percentile_ci(r, confidence)
    return ChanceLevels(mean, np.asarray(ci.low), np.asarray(ci.high), int(n_perm), float(confidence), mc)


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
