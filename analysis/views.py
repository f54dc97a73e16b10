"""Two views of the same metrics side by side: the SEG view and the human-judgment view.

The SEG view scores a metric by how well it orders images along semantic error graphs (e.g.
TS2's ``rank_m``); the human view by its correlation with people's ratings (e.g. Kendall's tau
on TIFA v1.0). :func:`compare_views` ranks the metrics under each view and measures how much
the two rankings agree with Kendall's tau-b. Pure functions; no torch.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as ss

__all__ = ["ViewComparison", "compare_views", "view_values"]


@dataclass(frozen=True)
class ViewComparison:
    """How the SEG view and the human view rank the same metrics.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per metric present in both views, best SEG rank first: ``metric``,
        ``seg_value``, ``seg_rank``, ``human_value``, ``human_rank`` (1 = best; tied values share
        the best rank of their tie, ``method="min"``), ``rank_shift`` = human_rank - seg_rank.
    seg_order, human_order : tuple of str
        The common metrics, best first, under each view (equal values: alphabetical).
    tau : float
        Kendall's tau-b between the two views' values over the common metrics (1 = same order,
        -1 = reversed). NaN with fewer than 2 common metrics or when a view is constant.
    pvalue : float
        scipy's two-sided p-value for ``tau`` (exact for small n without ties); NaN with ``tau``.
    n : int
        Common metrics.
    only_seg, only_human : tuple of str
        Metrics with a finite value in one view only (left out of the comparison).
    """

    table: pd.DataFrame
    seg_order: tuple[str, ...]
    human_order: tuple[str, ...]
    tau: float
    pvalue: float
    n: int
    only_seg: tuple[str, ...]
    only_human: tuple[str, ...]


def _finite(values: Mapping[str, float], name: str) -> dict[str, float]:
    if not isinstance(values, Mapping):
        raise TypeError(f"expected {name} as a mapping metric -> value, got {type(values).__name__}")
    out = {}
    for k, v in values.items():
        try:
            f = float(v)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}[{k!r}]: expected a number, got {v!r}") from e
        if math.isfinite(f):
            out[str(k)] = f
    return out


def compare_views(seg: Mapping[str, float], human: Mapping[str, float], seg_higher_is_better: bool = True,
                  human_higher_is_better: bool = True) -> ViewComparison:
    """Rank metrics under the SEG view and the human view; Kendall's tau-b between the orders.

    Parameters
    ----------
    seg : mapping metric -> float
        The SEG-view value per metric (e.g. ``rank_m``). NaN values count as missing.
    human : mapping metric -> float
        The human-view value per metric (e.g. Kendall's tau with human ratings).
    seg_higher_is_better, human_higher_is_better : bool
        Direction of each view's value (a SEG statistic that is an error rate is better low).

    Returns
    -------
    ViewComparison

    Raises
    ------
    TypeError
        A view is not a mapping.
    ValueError
        A value that is not a number.

    Examples
    --------
    >>> v = compare_views({"a": 0.9, "b": 0.5, "c": 0.7}, {"a": 0.4, "b": 0.3, "c": 0.45})
    >>> v.seg_order, v.human_order, round(v.tau, 3)
    (('a', 'c', 'b'), ('c', 'a', 'b'), 0.333)
    """
    s = _finite(seg, "seg")
    h = _finite(human, "human")
    common = sorted(set(s) & set(h))
    only_seg = tuple(sorted(set(s) - set(h)))
    only_human = tuple(sorted(set(h) - set(s)))
    sv = np.array([s[m] for m in common]) * (1 if seg_higher_is_better else -1)
    hv = np.array([h[m] for m in common]) * (1 if human_higher_is_better else -1)
    # Orders: best first, equal values alphabetical (common is sorted, the sort is stable).
    seg_order = tuple(common[i] for i in np.argsort(-sv, kind="stable"))
    human_order = tuple(common[i] for i in np.argsort(-hv, kind="stable"))
    tau = p = math.nan
    if len(common) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            warnings.simplefilter("ignore", category=ss.ConstantInputWarning)
            r = ss.kendalltau(sv, hv)
        tau, p = float(r.statistic), float(r.pvalue)
    table = pd.DataFrame({
        "metric": common,
        "seg_value": [s[m] for m in common],
        "seg_rank": pd.Series(sv).rank(ascending=False, method="min").astype(int).to_numpy() if common else [],
        "human_value": [h[m] for m in common],
        "human_rank": pd.Series(hv).rank(ascending=False, method="min").astype(int).to_numpy() if common else [],
    })
    table["rank_shift"] = table["human_rank"] - table["seg_rank"]
    table = table.set_index("metric").loc[list(seg_order)].reset_index()
    return ViewComparison(table, seg_order, human_order, tau, p, len(common), only_seg, only_human)


def view_values(results: pd.DataFrame, statistic: str = "kendall_b", grouping: str = "global") -> dict[str, float]:
    """Metric -> value of one statistic from a long results table such as ``human_metametrics.csv``.

    Rows of the pseudo-metrics ``human`` (inter-annotator agreement) and ``rater_ceiling`` are
    left out, and so are per-category rows (``subset`` other than ``all``).

    Raises
    ------
    ValueError
        Missing columns, no row for (statistic, grouping), or a metric listed twice.

    Examples
    --------
    >>> df = pd.DataFrame({"metric": ["a", "b"], "statistic": ["kendall_b"] * 2,
    ...                    "grouping": ["global"] * 2, "value": [0.3, 0.5]})
    >>> view_values(df)
    {'a': 0.3, 'b': 0.5}
    """
    from seg_data.results import HUMAN_REQUIRED  # here: importing seg_data loads networkx

    need = set(HUMAN_REQUIRED)
    if not need <= set(results.columns):
        raise ValueError(f"expected columns {sorted(need)}, got {list(results.columns)}")
    from .human.view import ALL, HUMAN_ROWS

    sub = results[(results["statistic"] == statistic) & (results["grouping"] == grouping)
                  & ~results["metric"].isin(HUMAN_ROWS)]
    if "subset" in sub.columns:  # the per-category rows are breakdowns, not the view
        sub = sub[sub["subset"].fillna(ALL) == ALL]
    if sub.empty:
        raise ValueError(f"expected rows with statistic {statistic!r} and grouping {grouping!r}, found none "
                         f"(statistics: {sorted(set(results['statistic']))}, groupings: {sorted(set(results['grouping']))})")
    if sub["metric"].duplicated().any():
        raise ValueError(f"expected one row per metric, got {sub['metric'][sub['metric'].duplicated()].tolist()} twice")
    return {str(m): float(v) for m, v in zip(sub["metric"], sub["value"], strict=True)}
