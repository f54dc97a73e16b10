"""The human ceiling: how well one rater agrees with the others, with the statistics metrics are judged by.

For a set with per-rater ratings, each rater ``r`` in turn is set against the mean of the other
raters (leave one rater out) on the items that ``r`` and at least one other rater rated::

    ceiling = mean over raters r of  stat(rating_r, mean of the others' ratings)

with ``stat`` any statistic of :data:`analysis.human.STATISTICS` under either grouping, computed
exactly as for a metric (a rater's ratings take the metric's place). A metric whose value reaches
the ceiling agrees with the human mean as well as a single person does. Raters with fewer than
``min_items`` such items are left out.

Its interval is the prompt bootstrap of the same mean: every rater's statistic is resampled with
the same drawn prompts (the same draws as the metrics', :func:`analysis.human.draw_clusters`),
and a replicate is the mean over raters of their replicate values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..stats import percentile_ci
from ._common import _groups_codes
from .bootstrap import BootstrapCI, bootstrap_replicates, draw_clusters
from .correlation import GLOBAL_ONLY, GROUPINGS, get_statistic, human_statistic

__all__ = ["RaterCeiling", "leave_one_rater_out", "rater_ceiling"]


@dataclass(frozen=True)
class RaterCeiling:
    """The ceiling of one statistic and grouping.

    Attributes
    ----------
    ci : BootstrapCI
        ``value`` (the mean over raters) and its prompt-bootstrap interval.
    per_rater : dict
        Rater -> its leave-one-out statistic (NaN where undefined).
    n_raters : int
        Raters with a defined value (the mean's terms).
    """

    ci: BootstrapCI
    per_rater: dict
    n_raters: int


def leave_one_rater_out(ratings: np.ndarray, min_items: int = 2):
    """For each rater ``j``: ``(j, mask, own, others_mean)`` over the items ``j`` and another rater rated.

    ``ratings`` is items x raters with NaN where a rater did not rate; raters with fewer than
    ``min_items`` such items are skipped.
    """
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"expected an items x raters array, got shape {r.shape}")
    rated = np.isfinite(r)
    total = np.where(rated, r, 0.0).sum(axis=1)
    count = rated.sum(axis=1)
    for j in range(r.shape[1]):
        others = count - rated[:, j]
        mask = rated[:, j] & (others > 0)
        if mask.sum() < min_items:
            continue
        mean_others = (total[mask] - r[mask, j]) / others[mask]
        yield j, mask, r[mask, j], mean_others


def rater_ceiling(ratings, groups, statistic: str = "kendall_b", grouping: str = "global", n_boot: int = 1000,
                  seed: int | None = 0, confidence: float = 0.95, min_items: int = 2,
                  rater_names=None) -> RaterCeiling | None:
    """Leave-one-rater-out agreement (module docstring) of one statistic and grouping, with its interval.

    Parameters
    ----------
    ratings : array_like, shape (items, raters)
        NaN where a rater did not rate an item.
    groups : array_like, shape (items,)
        Prompt id per item.
    statistic, grouping : see :func:`analysis.human.human_statistic`
    n_boot, seed, confidence : see :func:`analysis.human.bootstrap_human_statistic` (the same
        ``seed`` draws the same prompts as the metrics' intervals).
    min_items : int
        Items a rater needs in common with the others.
    rater_names : sequence, optional
        Keys of ``per_rater`` (default: column indices).

    Returns
    -------
    RaterCeiling or None
        None when fewer than two raters have ``min_items`` items in common with the others.

    Raises
    ------
    KeyError
        Unknown statistic.
    ValueError
        Unknown grouping, or ratings that are not items x raters.

    Examples
    --------
    >>> r = np.array([[1, 1], [2, 3], [3, 2], [4, 4.]])
    >>> round(rater_ceiling(r, ["a", "a", "b", "b"], "pearson", n_boot=0).ci.value, 4)
    0.8
    """
    get_statistic(statistic)
    if grouping not in GROUPINGS or (grouping != "global" and statistic in GLOBAL_ONLY):
        raise ValueError(f"expected grouping in {list(GROUPINGS)}, got {grouping!r}")
    r = np.asarray(ratings, dtype=float)
    codes, uniq = _groups_codes(np.asarray(groups, dtype=object), r.shape[0] if r.ndim == 2 else -1)
    parts = list(leave_one_rater_out(r, min_items))
    if len(parts) < 2:
        return None
    names = list(rater_names) if rater_names is not None else list(range(r.shape[1]))
    values = np.array([human_statistic(own, other, uniq[codes[mask]], statistic, grouping)
                       for _, mask, own, other in parts])
    per_rater = {names[j]: float(v) for (j, *_), v in zip(parts, values, strict=True)}
    ok = np.isfinite(values)
    value = float(values[ok].mean()) if ok.any() else math.nan
    low = high = math.nan
    n_invalid = 0
    if n_boot > 0:
        draws = draw_clusters(len(uniq), n_boot, seed)
        reps = np.vstack([bootstrap_replicates(own, other, codes[mask], len(uniq), draws, statistic, grouping)
                          for _, mask, own, other in parts])
        with np.errstate(invalid="ignore"):
            reps = np.where(np.isfinite(reps), reps, np.nan)
            defined = np.isfinite(reps).sum(axis=0)
            mean = np.where(defined > 0, np.nansum(reps, axis=0) / np.maximum(defined, 1), np.nan)
        ci = percentile_ci(mean, confidence)
        low, high, n_invalid = ci.low, ci.high, ci.n_invalid
    return RaterCeiling(BootstrapCI(value=value, low=low, high=high, n_boot=max(n_boot, 0), n_invalid=n_invalid,
                                    confidence=confidence), per_rater, int(ok.sum()))
