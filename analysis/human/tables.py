"""Metric-metric correlations and the TIFA-Table-2-like tables of the human view."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as ss

from ._common import _quiet
from .correlation import GROUPINGS


# -- metric-metric correlation ----------------------------------------------------------------------
def metric_correlation_matrix(scores: pd.DataFrame, method: str = "spearman", min_periods: int = 3) -> pd.DataFrame:
    """Correlation between every two metrics of a score table ("What makes a good metric?", 3.3).

    ``scores`` has one row per image and one column per metric (SEG or human score tables
    alike). Each pair uses the rows where both are present (pairwise complete, pandas
    ``DataFrame.corr``); fewer than ``min_periods`` such rows or a constant column give NaN.

    Raises
    ------
    ValueError
        Unknown method or a non-numeric column.
    """
    if method not in {"spearman", "kendall", "pearson"}:
        raise ValueError(f"expected method in ['spearman', 'kendall', 'pearson'], got {method!r}")
    bad = [c for c in scores.columns if not pd.api.types.is_numeric_dtype(scores[c])]
    if bad:
        raise ValueError(f"expected numeric score columns, got non-numeric {bad}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return scores.astype(float).corr(method=method, min_periods=min_periods)


def metric_correlation_pvalues(scores: pd.DataFrame, method: str = "spearman", min_periods: int = 3) -> pd.DataFrame:
    """Two-sided p-values matching :func:`metric_correlation_matrix` (scipy's tests, pairwise complete)."""
    fns = {"spearman": ss.spearmanr, "kendall": ss.kendalltau, "pearson": ss.pearsonr}
    if method not in fns:
        raise ValueError(f"expected method in {list(fns)}, got {method!r}")
    cols = list(scores.columns)
    out = pd.DataFrame(np.nan, index=cols, columns=cols)
    v = scores.to_numpy(dtype=float)
    for i in range(len(cols)):
        for j in range(i, len(cols)):
            ok = np.isfinite(v[:, i]) & np.isfinite(v[:, j])
            if ok.sum() < min_periods:
                continue
            if i == j:
                out.iloc[i, j] = 0.0
                continue
            p = _quiet(lambda a=v[ok, i], b=v[ok, j]: fns[method](a, b).pvalue)
            out.iloc[i, j] = out.iloc[j, i] = p
    return out


# -- TIFA-Table-2-like tables ------------------------------------------------------------------------
STATISTIC_LABELS: Mapping[str, str] = {
    "spearman": "Spearman's ρ",
    "kendall_b": "Kendall's τ_b",
    "kendall_c": "Kendall's τ_c",
    "pearson": "Pearson's r",
    "pairwise_acc": "Pairwise acc_eq",
    "roc_auc": "ROC AUC",
}


def human_table(results: pd.DataFrame, grouping: str = "global",
                statistics: Sequence[str] = ("spearman", "kendall_b"),
                labels: Mapping[str, str] | None = None, metrics: Sequence[str] | None = None,
                scale: float = 100.0, with_ci: bool = False) -> pd.DataFrame:
    """A table like TIFA's Table 2: one row per metric, one column per statistic (x ``scale``).

    Parameters
    ----------
    results : DataFrame
        Long results with columns ``metric, statistic, grouping, value, ci_low, ci_high`` (as in
        ``human_metametrics.csv``).
    grouping : str
    statistics : sequence of str
        Columns, in order (labels from :data:`STATISTIC_LABELS`).
    labels : mapping, optional
        Metric display names for the index.
    metrics : sequence, optional
        Row order (default: first appearance in ``results``).
    scale : float
        100 prints percentages like the paper.
    with_ci : bool
        Add ``<stat> low`` / ``<stat> high`` columns.

    Raises
    ------
    ValueError
        Missing columns, or no rows for ``grouping``.
    """
    from seg_data.results import HUMAN_REQUIRED  # here: importing seg_data loads networkx

    need = set(HUMAN_REQUIRED)
    if not need <= set(results.columns):
        raise ValueError(f"expected result columns {sorted(need)}, got {list(results.columns)}")
    sub = results[(results["grouping"] == grouping) & results["statistic"].isin(statistics)]
    if sub.empty:
        raise ValueError(f"expected results for grouping {grouping!r} and statistics {list(statistics)}, found none")
    order = list(metrics) if metrics is not None else list(dict.fromkeys(sub["metric"]))
    labels = labels or {}
    table = pd.DataFrame(index=pd.Index([labels.get(m, m) for m in order], name="metric"))
    for st in statistics:
        rows = sub[sub["statistic"] == st].set_index("metric")
        col = STATISTIC_LABELS.get(st, st)
        table[col] = [scale * float(rows["value"].get(m, np.nan)) for m in order]
        if with_ci and {"ci_low", "ci_high"} <= set(rows.columns):
            table[f"{col} low"] = [scale * float(rows["ci_low"].get(m, np.nan)) for m in order]
            table[f"{col} high"] = [scale * float(rows["ci_high"].get(m, np.nan)) for m in order]
    return table


def table_to_markdown(table: pd.DataFrame, digits: int = 1) -> str:
    """GitHub markdown of a numeric table (index as first column, NaN as an en dash)."""
    def fmt(v) -> str:
        return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"

    head = [table.index.name or "", *map(str, table.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(table.columns)) + "|"]
    for name, row in table.iterrows():
        lines.append("| " + " | ".join([str(name), *(fmt(float(v)) for v in row)]) + " |")
    return "\n".join(lines) + "\n"


def _markdown_with_ci(table: pd.DataFrame, digits: int) -> str:
    """Markdown of a :func:`human_table` ``with_ci=True`` table: ``value [low, high]`` cells."""
    def fmt(v) -> str:
        return "–" if v is None or not math.isfinite(float(v)) else f"{float(v):.{digits}f}"

    cols = [c for c in table.columns if not (str(c).endswith(" low") or str(c).endswith(" high"))]
    head = [table.index.name or "", *map(str, cols)]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * len(cols)) + "|"]
    for name, row in table.iterrows():
        cells = []
        for c in cols:
            cell = fmt(row[c])
            lo, hi = row.get(f"{c} low", np.nan), row.get(f"{c} high", np.nan)
            if math.isfinite(float(row[c])) and math.isfinite(float(lo)) and math.isfinite(float(hi)):
                cell += f" [{fmt(lo)}, {fmt(hi)}]"
            cells.append(cell)
        lines.append("| " + " | ".join([str(name), *cells]) + " |")
    return "\n".join(lines) + "\n"


def write_human_table(results: pd.DataFrame, path: str | Path, fmt: str | None = None,
                      groupings: Iterable[str] = GROUPINGS,
                      statistics: Sequence[str] = ("spearman", "kendall_b", "kendall_c", "pearson", "pairwise_acc"),
                      labels: Mapping[str, str] | None = None, metrics: Sequence[str] | None = None,
                      digits: int = 1, with_ci: bool = True, confidence: float | None = None) -> Path:
    """Write :func:`human_table` for each grouping as markdown (``.md``) or CSV (``.csv``).

    Markdown: one titled table per grouping, each cell ``value [ci_low, ci_high]`` when the
    results carry intervals and ``with_ci``. CSV: the tables stacked with a ``grouping``
    column, values x100 unrounded, each statistic followed by its ``<label> low`` / ``<label> high``
    interval columns when the results carry them and ``with_ci``. Groupings without results are
    left out.

    Raises
    ------
    ValueError
        Unknown format, or no grouping had results.
    """
    p = Path(path)
    fmt = (fmt or p.suffix.lstrip(".")).lower()
    if fmt not in {"md", "csv"}:
        raise ValueError(f"expected table format 'md' or 'csv', got {fmt!r}")
    titles = {"global": "Correlation with human judgments over all images (TIFA Table 2 setting), x100",
              "prompt": "Correlation with human judgments within prompts, averaged over prompts, x100"}
    parts: list[tuple[str, pd.DataFrame]] = []
    for g in groupings:
        try:
            parts.append((g, human_table(results, g, statistics, labels, metrics, with_ci=with_ci)))
        except ValueError:
            continue
    if not parts:
        raise ValueError(f"expected results for one of the groupings {list(groupings)}, found none")
    p.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "md":
        level = ""
        if with_ci and "ci_low" in results.columns:
            ci = f"{confidence * 100:g}% " if confidence is not None else ""
            level = f" ({ci}prompt-bootstrap interval in brackets)"
        text = "\n".join(f"### {titles.get(g, g)}{level}\n\n{_markdown_with_ci(t, digits)}" for g, t in parts)
        p.write_text(text, encoding="utf-8")
    else:
        pd.concat([t.assign(grouping=g) for g, t in parts]).to_csv(p)
    return p
