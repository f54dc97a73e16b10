"""Percentile intervals of bootstrap replicates: one function, one NaN policy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "percentile_ci", "bca_ci", "withhold_small_cis"]


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


def _quantiles_per_cell(r: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantile (numpy's default) of each cell's finite replicates at that
    cell's own level ``q`` (shape ``r.shape[1:]``); NaN where a cell has no finite replicate."""
    s = np.sort(np.where(np.isfinite(r), r, np.nan), axis=0)  # NaN sorts last
    n = np.isfinite(r).sum(axis=0)
    pos = np.clip(q, 0.0, 1.0) * np.maximum(n - 1, 0)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
    a = np.take_along_axis(s, lo[None], axis=0)[0]
    b = np.take_along_axis(s, hi[None], axis=0)[0]
    out = a + (b - a) * (pos - lo)
    return np.where(n > 0, out, np.nan)


def bca_ci(replicates, estimate, jackknife, confidence: float = 0.95) -> Interval:
    """Bias-corrected and accelerated (BCa) bootstrap interval over axis 0 of the replicates.

    With ``z0 = Phi^-1(#(r < est) / B + #(r == est) / 2B)`` (bias) and the jackknife acceleration
    ``a = sum(d^3) / (6 sum(d^2)^1.5)``, ``d = mean(jack) - jack`` (Efron 1987), the interval is
    the replicates' quantiles at ``Phi(z0 + (z0 + z) / (1 - a (z0 + z)))`` for
    ``z = Phi^-1(alpha/2)`` and ``Phi^-1(1 - alpha/2)``. With ``z0 = a = 0`` it is the percentile
    interval. It corrects the percentile interval's bias and skew errors to second order; for
    TS2's Avg meta-metrics (165-SEG means) ``benchmarks/coverage.py`` found no gain over the
    percentile interval (docs/analysis.md), so the SEG view offers it as ``ci_method=bca``.

    Non-finite policy: as :func:`percentile_ci` for the replicates (left out, counted); a cell
    whose estimate or jackknife values are not all finite, or whose jackknife is constant (no
    acceleration to estimate), falls back to ``a = 0``; a cell without a finite estimate gets
    the percentile interval.

    Parameters
    ----------
    replicates : array_like, shape (n_boot, ...)
    estimate : array_like, shape (...)
        The statistic on the original data.
    jackknife : array_like, shape (n_clusters, ...)
        The statistic with each cluster left out in turn.
    confidence : float in (0, 1)

    Returns
    -------
    Interval

    Raises
    ------
    ValueError
        ``confidence`` outside (0, 1), or shapes that do not match.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.exponential(size=40)
    >>> reps = rng.choice(x, (2000, 40)).mean(axis=1)
    >>> jack = (x.sum() - x) / 39
    >>> ci = bca_ci(reps, x.mean(), jack, 0.9)
    >>> bool(ci.low < x.mean() < ci.high)
    True
    """
    from scipy.special import ndtr, ndtri

    if not 0 < confidence < 1:
        raise ValueError(f"expected a confidence level in (0, 1), got {confidence}")
    r = np.asarray(replicates, dtype=float)
    est = np.asarray(estimate, dtype=float)
    jack = np.asarray(jackknife, dtype=float)
    if r.ndim < 1 or r.shape[1:] != est.shape or jack.shape[1:] != est.shape:
        raise ValueError(f"expected replicates (B, *S), estimate S and jackknife (n, *S), got shapes {r.shape}, "
                         f"{est.shape} and {jack.shape}")
    ok = np.isfinite(r)
    n_ok = ok.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        below = ((r < est) & ok).sum(axis=0) + 0.5 * ((r == est) & ok).sum(axis=0)
        z0 = ndtri(np.clip(below / np.maximum(n_ok, 1), 1e-12, 1 - 1e-12))
        d = jack.mean(axis=0) - jack
        acc = (d ** 3).sum(axis=0) / (6.0 * (d ** 2).sum(axis=0) ** 1.5)
    acc = np.where(np.isfinite(acc), acc, 0.0)
    z0 = np.where(np.isfinite(est), z0, 0.0)
    acc = np.where(np.isfinite(est), acc, 0.0)
    alpha = (1 - confidence) / 2
    levels = []
    for z in (ndtri(alpha), ndtri(1 - alpha)):
        with np.errstate(invalid="ignore", divide="ignore"):
            q = ndtr(z0 + (z0 + z) / (1 - acc * (z0 + z)))
        levels.append(np.where(np.isfinite(q), q, ndtr(z)))
    if r.ndim == 1:
        lo, hi = (float(_quantiles_per_cell(r[:, None], np.atleast_1d(q))[0]) for q in levels)
        return Interval(lo, hi, int((~ok).sum()), confidence)
    lo, hi = (_quantiles_per_cell(r, q) for q in levels)
    return Interval(lo, hi, (~ok).sum(axis=0), confidence)


def withhold_small_cis(low: np.ndarray, high: np.ndarray, n_segs: np.ndarray,
                       min_segs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CI bounds with every cell of fewer than ``min_segs`` SEGs set to NaN.

    Parameters
    ----------
    low, high : ndarray
        CI bounds, any shape.
    n_segs : ndarray
        SEGs behind each cell (same shape).
    min_segs : int
        Fewest SEGs a cell needs for an interval (>= 0; 0 keeps every interval).

    Returns
    -------
    low, high, withheld : ndarray
        New bounds and the boolean mask of the cells whose interval was withheld.

    Examples
    --------
    >>> lo, hi, w = withhold_small_cis(np.array([0.1, 0.2]), np.array([0.3, 0.4]), np.array([1, 12]), 10)
    >>> lo.tolist(), w.tolist()
    ([nan, 0.2], [True, False])
    """
    if min_segs < 0:
        raise ValueError(f"expected min_segs_ci >= 0, got {min_segs}")
    withheld = np.asarray(n_segs) < min_segs
    low, high = np.array(low, dtype=float), np.array(high, dtype=float)
    low[withheld] = np.nan
    high[withheld] = np.nan
    return low, high, withheld
