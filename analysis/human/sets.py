"""Many human-judgment sets in one call: each set's human view, one long table, a summary, an HTML section.

:func:`run_human_sets` is what ``ts2 analyze human=[A,B,...]`` (and ``ts2.human([...])``) runs. It
writes, besides each set's :func:`analysis.human.run_human_view` files (in the output folder for
one set, in ``<output>/<set name>/`` for several):

``human_sets.csv``
    The long table: ``set, kind, metric, statistic, grouping, subset, value, ci_low, ci_high, n,
    cluster`` (the rows of every set's ``human_metametrics.csv``, the rater ceiling and
    Krippendorff's alpha included).
``human_sets_overview.csv``
    One row per set: ``set, kind, source, items, prompts, raters, metrics, categories``.
``human_summary.md`` / ``.csv``
    Metrics x sets: each set's headline statistic (:data:`HEADLINE`: tie-calibrated pairwise
    accuracy for ratings and ranks, ROC AUC for labels) with its interval and cluster, and the
    rater ceiling's row.
``human_report.html``
    The section (:func:`human_sets_html`) as a page of its own; ``ts2 report human=DIR`` shows the
    same section beside the SEG view.
"""

from __future__ import annotations

import html
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .tables import STATISTIC_LABELS
from .view import ALL, CEILING, RESULT_COLUMNS, HumanViewOutputs, run_human_view

__all__ = ["HEADLINE", "LONG_COLUMNS", "OVERVIEW_COLUMNS", "HumanSetsOutputs", "run_human_sets", "summary_table",
           "human_sets_html", "read_human_sets", "write_sets"]

log = logging.getLogger(__name__)

#: The statistic and grouping a set is summarised by, per kind: the tie-calibrated pairwise
#: accuracy (t2v_metrics' and mt-metrics-eval's headline; within prompts for ranks, which are
#: only comparable there) and ROC AUC for 0/1 labels.
HEADLINE = {"likert": ("pairwise_acc", "global"), "ranked": ("pairwise_acc", "prompt"),
            "binary": ("roc_auc", "global")}
LONG_COLUMNS = ["set", "kind", *RESULT_COLUMNS]
OVERVIEW_COLUMNS = ["set", "kind", "source", "items", "prompts", "raters", "metrics", "categories"]


@dataclass(frozen=True)
class HumanSetsOutputs:
    """What :func:`run_human_sets` computed and where it wrote it."""

    views: list[HumanViewOutputs]
    long: pd.DataFrame
    overview: pd.DataFrame
    summary: pd.DataFrame
    long_path: Path
    summary_md: Path
    summary_csv: Path
    html: Path


def run_human_sets(sets: list, output_dir: str | Path, **view_kwargs) -> HumanSetsOutputs:
    """The human view of every set in ``sets`` and the tables across them (module docstring).

    Parameters
    ----------
    sets : list of seg_data.human.HumanJudgments
        Distinct ``name``s (the folders and the ``set`` column).
    output_dir : path
    **view_kwargs
        Passed to :func:`analysis.human.run_human_view` (``n_boot``, ``seed``, ``n_perm``, ...).

    Raises
    ------
    ValueError
        No set, or two sets of one name.
    """
    if not sets:
        raise ValueError("expected at least one human-judgment set, got none")
    names = [h.name for h in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"expected distinct set names, got {names}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    views = []
    for hj in sets:
        folder = out if len(sets) == 1 else out / hj.name
        views.append(run_human_view(hj, folder, source=hj.source, **view_kwargs))
    long = pd.concat([v.results.assign(set=hj.name, kind=hj.kind) for hj, v in zip(sets, views, strict=True)],
                     ignore_index=True)[LONG_COLUMNS]
    overview = pd.DataFrame([{"set": h.name, "kind": h.kind, "source": h.source, "items": h.n_items,
                              "prompts": h.n_prompts, "raters": len(h.raters), "metrics": len(h.metrics),
                              "categories": h.categories.shape[1]} for h in sets], columns=OVERVIEW_COLUMNS)
    return write_sets(long, overview, out, views)


def write_sets(long: pd.DataFrame, overview: pd.DataFrame, out: Path, views=()) -> HumanSetsOutputs:
    """Write the long table, the overview, the summary and the HTML page of :func:`run_human_sets`."""
    long_path = out / "human_sets.csv"
    long.to_csv(long_path, index=False)
    overview.to_csv(out / "human_sets_overview.csv", index=False)
    summary = summary_table(long, overview)
    summary_csv = out / "human_summary.csv"
    summary.to_csv(summary_csv, index=False)
    summary_md = out / "human_summary.md"
    summary_md.write_text(_summary_markdown(summary, overview), encoding="utf-8")
    page = out / "human_report.html"
    page.write_text(_page(human_sets_html(long, overview)), encoding="utf-8")
    return HumanSetsOutputs(list(views), long, overview, summary, long_path, summary_md, summary_csv, page)


def read_human_sets(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """``(long, overview)`` of a ``ts2 analyze human=...`` folder, or None when it has no ``human_sets.csv``."""
    from ..scores_io import read_result_table

    p = Path(folder)
    if p.is_file():
        p = p.parent
    if not (p / "human_sets.csv").is_file() or not (p / "human_sets_overview.csv").is_file():
        return None
    long = read_result_table(p / "human_sets.csv", "human sets", LONG_COLUMNS,
                             dtype={"set": str, "metric": str, "subset": str})
    overview = read_result_table(p / "human_sets_overview.csv", "human sets overview", OVERVIEW_COLUMNS,
                                 dtype={"set": str})
    return long, overview


def summary_table(long: pd.DataFrame, overview: pd.DataFrame) -> pd.DataFrame:
    """Metrics x sets: the headline statistic of each set (:data:`HEADLINE`), subset ``all``.

    Returns
    -------
    DataFrame
        ``metric`` (the rater ceiling first, then metrics in first-appearance order), then per set
        ``<set>``, ``<set> low``, ``<set> high``, ``<set> cluster``.
    """
    rows = long[(long["subset"] == ALL) & (long["metric"] != "human")].copy()
    rows["cluster"] = pd.to_numeric(rows["cluster"], errors="coerce").astype(float)  # Int64 -> NaN where none
    metrics = list(dict.fromkeys([CEILING, *rows["metric"]]))
    table = pd.DataFrame({"metric": metrics})
    for s, kind in zip(overview["set"], overview["kind"], strict=True):
        st, grouping = HEADLINE[kind]
        cell = rows[(rows["set"] == s) & (rows["statistic"] == st) & (rows["grouping"] == grouping)].set_index("metric")
        for col, src in ((s, "value"), (f"{s} low", "ci_low"), (f"{s} high", "ci_high"), (f"{s} cluster", "cluster")):
            table[col] = [float(cell[src].get(m, math.nan)) for m in metrics]
    keep = table[[c for c in overview["set"]]].notna().any(axis=1)
    return table[keep].reset_index(drop=True)


def _fmt(v, digits: int = 1, scale: float = 100.0) -> str:
    return "–" if v is None or not math.isfinite(float(v)) else f"{scale * float(v):.{digits}f}"


def _cell(row, s: str) -> str:
    v, lo, hi, c = row[s], row[f"{s} low"], row[f"{s} high"], row[f"{s} cluster"]
    text = _fmt(v)
    if math.isfinite(v) and math.isfinite(lo) and math.isfinite(hi):
        text += f" [{_fmt(lo)}, {_fmt(hi)}]"
    if math.isfinite(c):
        text += f" ({int(c)})"
    return text


def _headline_names(overview: pd.DataFrame) -> list[str]:
    return [f"{s}: {STATISTIC_LABELS.get(HEADLINE[k][0], HEADLINE[k][0])}, {HEADLINE[k][1]}"
            for s, k in zip(overview["set"], overview["kind"], strict=True)]


def _summary_markdown(summary: pd.DataFrame, overview: pd.DataFrame) -> str:
    sets = list(overview["set"])
    lines = ["### Metrics across human-judgment sets (x100, [interval], (significance cluster, 1 = top))", "",
             "Statistic per set: " + "; ".join(_headline_names(overview)) + ".", "",
             "| metric | " + " | ".join(sets) + " |", "|---|" + "---:|" * len(sets)]
    for _, row in summary.iterrows():
        lines.append(f"| {row['metric']} | " + " | ".join(_cell(row, s) for s in sets) + " |")
    return "\n".join(lines) + "\n"


# -- HTML ----------------------------------------------------------------------------------------
def _esc(x) -> str:
    return html.escape(str(x))


def _table_html(head: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in head) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f" class='{classes[i]}'" if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


def _value_html(v, lo, hi, c) -> str:
    if not math.isfinite(float(v)):
        return "–"
    text = f"<b>{_fmt(v)}</b>" if math.isfinite(c) and int(c) == 1 else _fmt(v)
    if math.isfinite(float(lo)) and math.isfinite(float(hi)):
        text += f"<br><small>[{_fmt(lo)}, {_fmt(hi)}]</small>"
    if math.isfinite(c):
        text += f" <span class='cl c{min(int(c), 4)}'>{int(c)}</span>"
    return text


def _overview_html(long: pd.DataFrame, overview: pd.DataFrame) -> str:
    rows = []
    for _, o in overview.iterrows():
        alpha = long[(long["set"] == o["set"]) & (long["metric"] == "human")
                     & (long["statistic"] == "krippendorff_alpha_interval")]["value"]
        rows.append([_esc(o["set"]), _esc(o["kind"]), str(o["items"]), str(o["prompts"]), str(o["raters"]),
                     str(o["metrics"]), str(o["categories"]),
                     f"{float(alpha.iloc[0]):.3f}" if len(alpha) and math.isfinite(alpha.iloc[0]) else "–"])
    return _table_html(["set", "kind", "items", "prompts", "raters", "metrics", "categories",
                        "Krippendorff's α (interval)"], rows)


def _summary_html(long: pd.DataFrame, overview: pd.DataFrame) -> str:
    summary = summary_table(long, overview)
    sets = list(overview["set"])
    rows, classes = [], []
    for _, r in summary.iterrows():
        name = "rater ceiling (leave one rater out)" if r["metric"] == CEILING else r["metric"]
        rows.append([_esc(name)] + [_value_html(r[s], r[f"{s} low"], r[f"{s} high"], r[f"{s} cluster"])
                                    for s in sets])
        classes.append("ceiling" if r["metric"] == CEILING else "")
    head = ["metric"] + [f"{s} ({n.split(': ', 1)[1]})" for s, n in zip(sets, _headline_names(overview), strict=True)]
    return _table_html(head, rows, classes)


def _set_detail_html(long: pd.DataFrame, s: str) -> str:
    """All statistics and groupings of one set (subset all): metrics x (statistic, grouping)."""
    rows = long[(long["set"] == s) & (long["subset"] == ALL) & (long["metric"] != "human")
                & (long["statistic"] != "pairwise_acc_epsilon")].copy()
    rows["cluster"] = pd.to_numeric(rows["cluster"], errors="coerce").astype(float)
    cols = list(dict.fromkeys(zip(rows["statistic"], rows["grouping"], strict=True)))
    metrics = list(dict.fromkeys(rows["metric"]))
    idx = rows.set_index(["metric", "statistic", "grouping"])
    body = []
    for m in metrics:
        cells = []
        for st, g in cols:
            if (m, st, g) in idx.index:
                r = idx.loc[(m, st, g)]
                cells.append(_value_html(r["value"], r["ci_low"], r["ci_high"], r["cluster"]))
            else:
                cells.append("–")
        body.append([_esc("rater ceiling" if m == CEILING else m)] + cells)
    head = ["metric"] + [f"{STATISTIC_LABELS.get(st, st)} ({g})" for st, g in cols]
    return _table_html(head, body, ["ceiling" if m == CEILING else "" for m in metrics])


def _subset_html(long: pd.DataFrame, s: str, kind: str) -> str:
    """Per-category breakdown of one set: metrics x categories, the headline statistic."""
    st, grouping = HEADLINE[kind]
    rows = long[(long["set"] == s) & (long["subset"] != ALL) & (long["statistic"] == st)
                & (long["grouping"] == grouping)]
    if rows.empty:
        return ""
    subsets = list(dict.fromkeys(rows["subset"]))
    idx = rows.set_index(["metric", "subset"])
    body = []
    for m in dict.fromkeys(rows["metric"]):
        body.append([_esc(m)] + [_value_html(idx.loc[(m, c), "value"], idx.loc[(m, c), "ci_low"],
                                             idx.loc[(m, c), "ci_high"], math.nan) if (m, c) in idx.index else "–"
                                 for c in subsets])
    n = {c: int(rows[rows["subset"] == c]["n"].max()) for c in subsets}
    head = ["metric"] + [f"{c.split('=', 1)[-1]} (n={n[c]})" for c in subsets]
    return (f"<h4>{_esc(s)} by {_esc(subsets[0].split('=', 1)[0])}: {_esc(STATISTIC_LABELS.get(st, st))} "
            f"({_esc(grouping)})</h4>" + _table_html(head, body))


def human_sets_html(long: pd.DataFrame, overview: pd.DataFrame) -> str:
    """The report section of many human-judgment sets (an HTML fragment: overview, summary, per-set
    details, per-category breakdowns)."""
    parts = [
        "<p>Each metric against people's judgments on every set: values x100 with their 95% prompt-bootstrap "
        "interval below, and the metric's <i>significance cluster</i> (1 = top; metrics of one cluster are not "
        "significantly different, Holm-corrected paired tests, clustered as mt-metrics-eval does; bold: top "
        "cluster). The <i>rater ceiling</i> is each rater's agreement with the mean of the others, with the same "
        "statistic: how far a metric is from human agreement. Every value is in <code>human_sets.csv</code>.</p>",
        "<h3>Sets</h3>", _overview_html(long, overview),
        "<h3>Summary: metrics x sets</h3>", _summary_html(long, overview),
    ]
    for s in overview["set"]:
        parts.append(f"<details><summary>{_esc(s)}: every statistic</summary>{_set_detail_html(long, s)}</details>")
    breakdowns = [_subset_html(long, s, k) for s, k in zip(overview["set"], overview["kind"], strict=True)]
    if any(breakdowns):
        parts.append("<h3>By skill / category</h3>" + "".join(b for b in breakdowns if b))
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f2f2f2} td:first-child,th:first-child{text-align:left}
tr.ceiling td{background:#fff8e1;font-style:italic}
small{color:#666} details{margin:.4em 0} summary{cursor:pointer;font-weight:600}
.cl{display:inline-block;min-width:1.3em;border-radius:.6em;font-size:11px;text-align:center;color:#fff}
.c1{background:#2e7d32}.c2{background:#558b2f}.c3{background:#9e9d24}.c4{background:#8d6e63}
"""


def _page(body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Human-judgment sets</title>"
            f"<style>{_CSS}</style></head><body><h2>Metrics against human-judgment sets</h2>{body}</body></html>")


def families_markdown() -> str:
    """The docs' table of supported sets (docs/human.md), from the registry and :data:`KIND_STATISTICS`.

    One row per family of :data:`seg_data.human.HUMAN_SETS`: name, kind, format, size and license as
    stated by the source, how to get it, and the statistics that apply (with a rater ceiling when
    the set has several raters).
    """
    from seg_data.human import families

    from .view import KIND_STATISTICS

    lines = ["| set (`human=`) | kind | format | size | license (as stated by the source) | how to get it | "
             "statistics that apply |", "|---|---|---|---|---|---|---|"]
    for f in families():
        stats, groupings = KIND_STATISTICS[f.kind]
        applies = f"{', '.join(stats)} ({' and '.join(groupings)}); raters: {f.raters}"
        hub = f"; offline: `{f.name}:DIR`" if f.hub_repo else ""
        lines.append(f"| `{f.name}` ({f.title}) | {f.kind} | {f.file_format} | {f.size} | {f.license} | "
                     f"{f.get}{hub} | {applies} |")
    return "\n".join(lines) + "\n"
