"""Pareto frontier of metrics in (higher meta-metric, lower cost), and FLOP strings.

A metric is on the frontier when no other metric is at least as good on both axes and
strictly better on one. Ties: points with equal value and equal cost do not dominate each
other, so all of them stay on the frontier.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["pareto_mask", "pareto_front", "parse_flops"]

_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_FLOPS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*([KMGTPE]?)\s*(?:FLOPs?)?\s*$")


def parse_flops(text: str | float) -> float:
    """A FLOP count from a number or a string with an SI suffix, as in the paper's Table 2.

    Examples
    --------
    >>> parse_flops("604M"), parse_flops("1.66P"), parse_flops(2.5e12)
    (604000000.0, 1660000000000000.0, 2500000000000.0)

    Raises
    ------
    ValueError
        Anything else (the message shows the accepted form).
    """
    if isinstance(text, (int, float, np.floating, np.integer)) and not isinstance(text, bool):
        return float(text)
    m = _FLOPS.match(str(text))
    if m is None:
        raise ValueError(f"expected a FLOP count like '604M', '224T' or '1.66P', got {text!r}")
    return float(m.group(1)) * _SI[m.group(2)]


def pareto_mask(values: Sequence[float], costs: Sequence[float]) -> np.ndarray:
    """Boolean mask of the non-dominated points (maximise ``values``, minimise ``costs``).

    Raises
    ------
    ValueError
        Different lengths, or a NaN value or cost (a metric without a number cannot be placed).

    Examples
    --------
    >>> pareto_mask([0.7, 0.8, 0.6, 0.8], [1.0, 10.0, 5.0, 10.0]).tolist()
    [True, True, False, True]
    """
    v = np.asarray(values, dtype=float)
    c = np.asarray(costs, dtype=float)
    if v.shape != c.shape or v.ndim != 1:
        raise ValueError(f"expected 1-D values and costs of equal length, got shapes {v.shape} and {c.shape}")
    if np.isnan(v).any() or np.isnan(c).any():
        bad = int(np.flatnonzero(np.isnan(v) | np.isnan(c))[0])
        raise ValueError(f"expected numbers for every point, got NaN at position {bad}")
    ge = (v[None, :] >= v[:, None]) & (c[None, :] <= c[:, None])  # ge[i, j]: j at least as good as i
    strict = (v[None, :] > v[:, None]) | (c[None, :] < c[:, None])
    return ~(ge & strict).any(axis=1)


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """Names of the frontier points of ``{name: (value, cost)}``, cheapest first.

    Examples
    --------
    >>> pareto_front({"clip": (0.714, 604e6), "align": (0.739, 688e6), "vie": (0.378, 2.6e12)})
    ['clip', 'align']
    """
    names = list(points)
    vals = [points[n][0] for n in names]
    costs = [points[n][1] for n in names]
    mask = pareto_mask(vals, costs)
    keep = [i for i in range(len(names)) if mask[i]]
    keep.sort(key=lambda i: (costs[i], -vals[i], names[i]))
    return [names[i] for i in keep]
