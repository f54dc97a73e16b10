"""Percentile intervals of bootstrap replicates: one function, one NaN policy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "percentile_ci"]


@dataclass(frozen=True)
class Interval:
    """A percentile interval: ``low``/``high`` (floats, or arrays for cells), ``n_invalid``
    non-finite replicates left out (per cell), at level ``confidence``."""

    low: np.ndarray | float
    high: np.ndarray | float
    n_invalid: np.ndarray | int
    confidence: float


def percentile_ci(replicates, confidence: float = 0.95) -> Interval:
    """Percentile interval over axis 0 of the replicates.

    ``low, high = quantile(r, [a, 1 - a])`` with ``a = (1 - confidence) / 2`` and numpy's default
    (linear) quantile interpolation, taken over the finite replicates of each cell.

    Non-finite policy: NaN and +-inf replicates (a resample where the statistic is undefined)
    are left out of that cell and counted in ``n_invalid``; a cell without any finite replicate
    has a NaN interval. Constant replicates give ``low == high``.

    Parameters
    ----------
    replicates : array_like, shape (n_boot, ...)
    confidence : float in (0, 1)

    Returns
    -------
    Interval
        Floats for 1-D input, arrays of shape ``replicates.shape[1:]`` otherwise.

    Raises
    ------
    ValueError
        ``confidence`` outside (0, 1), or no replicate axis.

    Examples
    --------
    >>> ci = percentile_ci([np.nan, *range(101)], 0.9)
    >>> round(ci.low, 9), round(ci.high, 9), ci.n_invalid
    (5.0, 95.0, 1)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"expected a confidence level in (0, 1), got {confidence}")
    r = np.asarray(replicates, dtype=float)
    if r.ndim < 1:
        raise ValueError(f"expected replicates along axis 0, got a scalar {r!r}")
    a = (1 - confidence) / 2
    ok = np.isfinite(r)
    n_bad = (~ok).sum(axis=0)
    if r.ndim == 1:
        if not ok.any():
            return Interval(float("nan"), float("nan"), int(n_bad), confidence)
        lo, hi = np.quantile(r[ok], [a, 1 - a])
        return Interval(float(lo), float(hi), int(n_bad), confidence)
    if ok.all():
        lo, hi = np.quantile(r, [a, 1 - a], axis=0)
    else:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-invalid cells: NaN is the answer
            lo, hi = np.nanquantile(np.where(ok, r, np.nan), [a, 1 - a], axis=0)
    return Interval(lo, hi, n_bad, confidence)
