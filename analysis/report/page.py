"""The report: figures and a self-contained HTML page from merged results.

:mod:`analysis.report.result_dirs` finds, reads and merges result folders (it knows Hydra's folders and the
files of :mod:`seg_data.results`) into a :class:`MergedResults`; this module and
:mod:`analysis.report.figures` draw it and write ``report.html``, the merged tables,
``pareto.csv`` and ``figures/*.png`` as one result set (:func:`seg_data.result_sets.result_set`).

Metric roles (:data:`seg_data.results.ROLES`) decide how a metric is shown: controls are
marked, drawn as a dashed floor, never on a Pareto frontier and never choose heatmap SEGs; the
metrics of interest (role ``metric``) choose the heatmaps and lead every figure, beside the
reference metrics they agree with most.

This module never imports torch.
"""

from __future__ import annotations

import base64
import html
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data.result_sets import atomic_write_text, published_path, result_set
from seg_data.results import HUMAN_REQUIRED

from ..chance import NULL_DESCRIPTION
from .figures import FIGURE_KINDS, ReportFigure, make_figures, pareto_table
from .merged import MergedResults, RunInfo

__all__ = [
    "FIGURE_KINDS",
    "MergedResults",
    "ReportFigure",
    "ReportOutputs",
    "RunInfo",
    "figure_html",
    "make_figures",
    "metametrics_html",
    "pareto_table",
    "read_human_results",
    "render_html",
    "runs_html",
    "synthetic_dataset_note",
    "verdict_html",
    "views_frame",
    "views_html",
    "write_report",
]

log = logging.getLogger(__name__)


# -- tables and HTML -------------------------------------------------------------------------------

def _fmt_pct(v: float | None) -> str:
    """``0.1234`` -> ``"12.3"``; never ``"-0.0"`` (a value that rounds to zero prints ``0.0``)."""
    if v is None or not np.isfinite(v):
        return ""
    txt = f"{100 * v:.1f}"
    return "0.0" if txt == "-0.0" else txt


def _level(confidence: float | None) -> str:
    return "confidence interval (level not recorded)" if confidence is None else \
        f"{100 * confidence:g}% confidence interval"


def metametrics_html(mm: pd.DataFrame, protocol: str, labels: Mapping[str, str] | None = None,
                     roles: Mapping[str, str] | None = None) -> str:
    """The Table-2-style table of one protocol as HTML: metrics as columns (controls marked and
    shaded), meta-metric x subset rows, values in % with the CI below, and, when the columns
    ``chance``/``adjusted`` are present, the chance level and the chance-adjusted value; the
    best non-control value of each row in bold. A blank cell is an undefined value (marked
    with a footnote)."""
    labels, roles = dict(labels or {}), dict(roles or {})
    d = mm[mm["protocol"] == protocol]
    metrics = list(dict.fromkeys(d["metric"]))
    ctrl = {m for m in metrics if roles.get(m) == "control"}
    mms = list(dict.fromkeys(d["meta_metric"]))
    subsets = list(dict.fromkeys(d["subset"]))
    subsets = (["Avg"] if "Avg" in subsets else []) + [s for s in subsets if s != "Avg"]
    idx = d.set_index(["meta_metric", "subset", "metric"])
    has_chance = {"chance", "adjusted"} <= set(d.columns)
    # The chance level keeps each metric's own per-SEG ties; a scored `random` control is another
    # bar (a random metric with a discrete metric's overall distribution can read higher): show it beside.
    random_ctrl = "random" if "random" in metrics else None
    # With a bootstrap, a value without an interval had too few SEGs for one (min_segs_ci): say so.
    has_ci = "ci_low" in d.columns and bool(np.isfinite(pd.to_numeric(d["ci_low"], errors="coerce")).any())
    withheld = chance_shown = False

    def head(m):
        tag = {"control": "<br><small>control</small>", "reference": "<br><small>reference</small>"}
        return (f"<th{' class=ctrl' if m in ctrl else ''}>{html.escape(labels.get(m, m))}"
                f"{tag.get(roles.get(m, 'metric'), '')}</th>")

    rows = [f"<tr><th>meta-metric</th><th>subset</th>{''.join(head(m) for m in metrics)}</tr>"]
    blank: set[str] = set()
    for k in mms:
        for s in subsets:
            vals = []
            for m in metrics:
                try:
                    r = idx.loc[(k, s, m)]
                except KeyError:
                    vals.append(None)
                    continue
                vals.append(r.iloc[0] if isinstance(r, pd.DataFrame) else r)
            # Best after rounding to the printed 0.1, like table.md (printed ties all bold);
            # a control is never "best".
            fin = [round(100 * float(r["value"]), 1) for m, r in zip(metrics, vals, strict=True)
                   if r is not None and m not in ctrl and np.isfinite(float(r["value"]))]
            if not fin and all(r is None or not np.isfinite(float(r["value"])) for r in vals):
                continue
            best = max(fin) if fin else None
            cells = []
            for m, r in zip(metrics, vals, strict=True):
                cls = " class=ctrl" if m in ctrl else ""
                if r is None or not np.isfinite(float(r["value"])):
                    blank.add(labels.get(m, m))
                    cells.append(f"<td{cls}>&nbsp;<sup>*</sup></td>")
                    continue
                v = float(r["value"])
                txt = _fmt_pct(v)
                if m not in ctrl and round(100 * v, 1) == best:
                    txt = f"<b>{txt}</b>"
                lo, hi = r.get("ci_low"), r.get("ci_high")
                if lo is not None and hi is not None and np.isfinite(float(lo)) and np.isfinite(float(hi)):
                    txt += f"<br><small>[{_fmt_pct(float(lo))}, {_fmt_pct(float(hi))}]</small>"
                elif has_ci:
                    n = r.get("n_segs")
                    seg_text = f"{int(n)} SEG{'s' if int(n) != 1 else ''}" if n is not None and np.isfinite(float(n)) \
                        else "too few SEGs"
                    txt += f"<br><small class=na>[n/a: {seg_text}]<sup>&dagger;</sup></small>"
                    withheld = True
                if has_chance and np.isfinite(float(r["chance"])):
                    txt += _chance_text(r, idx, (k, s, random_ctrl) if random_ctrl not in (None, m) else None)
                    chance_shown = True
                cells.append(f"<td{cls}>{txt}</td>")
            rows.append(f"<tr><td>{html.escape(k)}</td><td>{html.escape(s)}</td>{''.join(cells)}</tr>")
    foot = _mm_footnotes(blank, withheld, chance_shown, random_ctrl)
    return "<table class='mm'>" + "".join(rows) + "</table>" + foot


def _chance_text(r: pd.Series, idx: pd.DataFrame, random_key: tuple | None) -> str:
    """A cell's chance line, apart from :func:`metametrics_html` to keep that function short.

    ``random_key`` is ``(meta_metric, subset, random control)`` when the scored random control's
    value goes beside the chance level (not in the control's own cell), else None.
    """
    mc = float(r["chance_mc_error"]) if "chance_mc_error" in r.index else float("nan")
    err = f" &plusmn;{100 * mc:.2f}" if np.isfinite(mc) else ""
    rnd = ""
    if random_key is not None and random_key in idx.index:
        rv = idx.loc[random_key]
        rv = float((rv.iloc[0] if isinstance(rv, pd.DataFrame) else rv)["value"])
        rnd = f"; random {_fmt_pct(rv)}" if np.isfinite(rv) else ""
    # delta has no maximum, so no chance-adjusted value: no "adj." label without a number
    adj = float(r["adjusted"])
    return (f"<br><small class=chance>chance<sup>&Dagger;</sup> {_fmt_pct(float(r['chance']))}{err}"
            f"{rnd}" + (f"; adj. {_fmt_pct(adj)}" if np.isfinite(adj) else "") + "</small>")


def _mm_footnotes(blank: set[str], withheld: bool, chance_shown: bool, random_ctrl: str | None) -> str:
    """The footnotes under :func:`metametrics_html`'s table, apart to keep that function short."""
    foot = ""
    if blank:
        foot = ("<p class='foot'><sup>*</sup> Blank: the value is undefined for " + html.escape(", ".join(sorted(blank)))
                + " (e.g. delta_m of a metric whose scores do not vary within the SEGs: there is no spread to "
                "normalise the gap by; such SEGs are left out, and a cell with none left is blank).</p>")
    if withheld:
        foot += ("<p class='foot'><sup>&dagger;</sup> n/a: no confidence interval for a value from fewer SEGs than "
                 "<code>min_segs_ci</code> (default 10): a bootstrap over so few SEGs gives intervals of no meaning "
                 "(zero width with one SEG).</p>")
    if chance_shown:
        foot += (f"<p class='foot'><sup>&Dagger;</sup> chance: the expected value under the null &ldquo;"
                 f"{html.escape(NULL_DESCRIPTION)}&rdquo;, &plusmn; its Monte-Carlo error (points; 0 where the "
                 "expectation is exact); a discrete "
                 "metric keeps its per-SEG ties, so its chance level can sit below what a random metric with the "
                 "same overall score distribution reads"
                 + ("; <i>random</i>: the scored random control's value in that row" if random_ctrl else "")
                 + "; adj.: (value &minus; chance) / (max &minus; chance).</p>")
    return foot


def read_human_results(path: str | Path) -> pd.DataFrame:
    """``human_metametrics.csv`` (``ts2 analyze human=...``), given as the file or its folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "human_metametrics.csv"
    from ..scores_io import read_result_table

    return read_result_table(p, "human results", HUMAN_REQUIRED, dtype={"metric": str})


def views_frame(mm: pd.DataFrame, human: pd.DataFrame, protocol: str, seg_meta_metric: str = "rank",
                statistic: str = "kendall_b", grouping: str = "prompt"):
    """The SEG view (``seg_meta_metric``, subset Avg, ``protocol``) beside the human view
    (``statistic`` with ``grouping``) of the metrics in both; see :func:`analysis.views.compare_views`."""
    from ..views import compare_views, view_values

    d = mm[(mm["protocol"] == protocol) & (mm["meta_metric"] == seg_meta_metric) & (mm["subset"] == "Avg")]
    seg = dict(zip(d["metric"], d["value"].astype(float), strict=True))
    return compare_views(seg, view_values(human, statistic=statistic, grouping=grouping))


def views_html(cmp, protocol: str, seg_meta_metric: str, statistic: str, grouping: str) -> str:
    """HTML of a :class:`analysis.views.ViewComparison`: both rank orders and Kendall's tau."""
    t = cmp.table
    rows = ["<tr><th>metric</th><th>SEG view: %s (%s, Avg)</th><th>SEG rank</th><th>human view: %s (%s)</th>"
            "<th>human rank</th><th>shift</th></tr>" % tuple(html.escape(x) for x in
                                                              (seg_meta_metric, protocol, statistic, grouping))]
    for r in t.itertuples(index=False):
        rows.append(f"<tr><td>{html.escape(str(r.metric))}</td><td>{_fmt_pct(float(r.seg_value))}</td>"
                    f"<td>{int(r.seg_rank)}</td><td>{_fmt_pct(float(r.human_value))}</td>"
                    f"<td>{int(r.human_rank)}</td><td>{int(r.rank_shift):+d}</td></tr>")
    tau = "n/a (fewer than 2 common metrics)" if not np.isfinite(cmp.tau) else f"{cmp.tau:.3f} (p = {cmp.pvalue:.3g})"
    parts = [f"<p>Order under the SEG view: {html.escape(' > '.join(cmp.seg_order))}<br>"
             f"Order under the human view: {html.escape(' > '.join(cmp.human_order))}<br>"
             f"Kendall's tau-b between the two views over {cmp.n} metric(s): <b>{tau}</b></p>",
             "<table>" + "".join(rows) + "</table>"]
    for name, only in (("SEG", cmp.only_seg), ("human", cmp.only_human)):
        if only:
            parts.append(f"<p class='note'>Only in the {name} view (left out): {html.escape(', '.join(only))}</p>")
    return "".join(parts)


def _p_text(p: float) -> str:
    return "n/a" if not np.isfinite(p) else ("&lt; 0.0001" if p < 1e-4 else f"{p:.4f}")


def verdict_html(v, protocol: str, labels: Mapping[str, str] | None = None,
                 confidence: float | None = None) -> str:
    """The verdict section of one protocol from an :class:`analysis.verdict.Verdict`: the
    direction warnings, one summary line and one table per metric under evaluation (its value,
    place and Holm group per meta-metric; the difference to every reference and control with its
    CI, permutation p-value, Holm-adjusted p-value and what it means)."""
    labels = dict(labels or {})
    t = v.table[v.table["protocol"] == protocol]
    if not len(t):
        return f"<p>No verdict for protocol {html.escape(protocol)}.</p>"
    from ..verdict import direction_hint, summary_line

    parts = [f"<p>For each metric under evaluation (not a control or a reference), protocol "
             f"<b>{html.escape(protocol)}</b>, subset {html.escape(str(t['subset'].iloc[0]))}: its value with the "
             f"{_level(confidence)}, its place among all {int(t['n_metrics'].iloc[0])} metrics and its Holm "
             "significance group (group 1: the best metric and every metric not significantly different from it), "
             "then the paired difference to every reference metric and control (same SEG resamples for both, "
             "so the CI of the difference is narrower than the two CIs suggest), its two-sided sign-flip "
             f"permutation p-value over the SEGs and the p-value Holm-adjusted over that metric's comparisons on the "
             f"meta-metric; <i>above</i>/<i>below</i>: significant at {v.alpha:g} after Holm. Values and differences in "
             "points of %. The tables are in <code>verdict.csv</code>, <code>ranking.csv</code> and "
             "<code>pairs.csv</code>.</p>"]
    for m in v.reversed:
        parts.append(f"<p class='note'><b>Direction:</b> {html.escape(labels.get(m, m))}: "
                     f"{html.escape(direction_hint(m, m in v.lower_is_better))} (e.g. <code>ts2 report ... "
                     f"'lower_is_better=[{html.escape(m)}]'</code>).</p>")
    head = ("<tr><th>meta-metric</th><th>value</th><th>place (group)</th><th>against</th><th>its value</th>"
            "<th>difference [CI]</th><th>p</th><th>Holm p</th><th>verdict</th></tr>")
    for m in dict.fromkeys(t["metric"]):
        d = t[t["metric"] == m]
        parts.append(f"<h3>{html.escape(labels.get(m, m))}</h3><p>{html.escape(summary_line(d, v.alpha))}</p>")
        rows = [head]
        for mm, g in d.groupby("meta_metric", sort=False):
            h = g.iloc[0]
            ci = (f" <small>[{_fmt_pct(h['ci_low'])}, {_fmt_pct(h['ci_high'])}]</small>"
                  if np.isfinite(h["ci_low"]) else "")
            first = (f"<td rowspan={len(g)}>{html.escape(mm)}_m</td><td rowspan={len(g)}>{_fmt_pct(h['value'])}{ci}"
                     f"</td><td rowspan={len(g)}>{int(h['position'])} of {int(h['n_metrics'])} "
                     f"(group {int(h['group'])} of {int(h['n_groups'])})</td>")
            for j, r in enumerate(g.itertuples(index=False)):
                lead = first if j == 0 else ""
                if not r.against:
                    rows.append(f"<tr>{lead}<td colspan=6>no reference or control to compare with</td></tr>")
                    continue
                dci = (f" <small>[{_fmt_pct(r.diff_ci_low)}, {_fmt_pct(r.diff_ci_high)}]</small>"
                       if np.isfinite(r.diff_ci_low) else "")
                word = {"above": "<b>above</b>", "below": "<b>below</b>"}.get(r.direction, html.escape(r.direction))
                tag = " <small>(control)</small>" if r.against_role == "control" else ""
                rows.append(f"<tr>{lead}<td>{html.escape(labels.get(r.against, r.against))}{tag}</td>"
                            f"<td>{_fmt_pct(r.against_value)}</td><td>{_fmt_signed(r.diff)}{dci}</td>"
                            f"<td>{_p_text(r.p_value)}</td><td>{_p_text(r.p_holm)}</td><td>{word}</td></tr>")
        parts.append("<table class='verdict'>" + "".join(rows) + "</table>")
    return "".join(parts)


def _fmt_signed(v: float) -> str:
    txt = _fmt_pct(v)
    return txt if not txt or txt.startswith("-") or txt == "0.0" else "+" + txt


#: What a synthetic dataset's generator means for reading the report (dataset metadata ``generator``).
SYNTHETIC_NOTES = {
    "seg_data.synthetic": (
        "This dataset is synthetic (seg_data.synthetic, e.g. <code>dataset=mini</code>): flat coloured shapes on a "
        "plain background, whose errors are wrong shapes, colours, counts and positions, rendered so that every "
        "object pixel has one palette colour. These are the very shapes, colours and counts that the pixel shapes "
        "detector (<code>geneval_shapes</code>, <code>detector=shapes</code>) checks, so its high rank_m here shows "
        "that the pipeline works end to end; it is not a result about the metric on real images."),
}


def synthetic_dataset_note(metadata: Mapping | None) -> str | None:
    """The report's sentence for a dataset made by a known generator (HTML), else None."""
    return SYNTHETIC_NOTES.get(str((metadata or {}).get("generator")))


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}td,th{border:1px solid #ccc;padding:.25em .5em;
text-align:right;vertical-align:top}th{background:#f3f3f3}td:first-child,td:nth-child(2){text-align:left}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:.9em;color:#444}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}.note{color:#8a4b00}
th.ctrl,td.ctrl{background:#ececec;color:#555}table.verdict td{text-align:left}.chance{color:#666}.foot{font-size:.85em;color:#444}
"""


def render_html(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """A complete HTML page from ``(heading, html body)`` sections (bodies are trusted HTML)."""
    body = "".join(f"<h2>{html.escape(h)}</h2>\n{b}\n" for h, b in sections)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n")


def figure_html(fig: ReportFigure) -> str:
    """``<figure>`` with the PNG embedded as base64 (the page needs no other file)."""
    data = base64.b64encode(Path(fig.path).read_bytes()).decode("ascii")
    return (f"<figure><img alt='{html.escape(fig.path.name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{html.escape(fig.caption)} <code>figures/{html.escape(fig.path.name)}</code>"
            "</figcaption></figure>")


def runs_html(runs: Sequence[RunInfo]) -> str:
    """The Runs table: the run's own wall time (``run.json``; summed over shards) and each
    metric's rate in images/s (never a mean over metrics, which a free control dominates)."""
    head = ("<tr><th>run</th><th>metric columns</th><th>overrides</th><th>images</th><th>device</th>"
            "<th>wall time (s)</th><th>images/s per metric</th><th>failed</th><th>cache hits / misses</th></tr>")
    rows = []
    for r in runs:
        cols = ", ".join(html.escape(v) for v in r.columns.values())
        ov = " ".join(html.escape(f"{k}={v}") for k, v in r.overrides.items()) or "-"
        if r.shards:
            ov += " <small>(shards " + ", ".join(html.escape(s) for s in r.shards) + ")</small>"
        hm = "-" if r.cache_hits is None else f"{r.cache_hits} / {r.cache_misses}"
        wt = "-" if r.wall_time_s is None else f"{r.wall_time_s:.1f}" + (" <small>(sum of shards)</small>"
                                                                          if len(r.dirs) > 1 else "")
        ips = "<br>".join(f"{html.escape(m)}: {v:.3g}" if np.isfinite(v) else f"{html.escape(m)}: cached"
                          for m, v in r.images_per_s.items()) or "-"
        rows.append(f"<tr><td>{html.escape(r.label)}</td><td>{cols}</td><td>{ov}</td>"
                    f"<td>{'-' if r.n_images is None else r.n_images}</td><td>{html.escape(str(r.device or '-'))}</td>"
                    f"<td>{wt}</td><td>{ips}</td><td>{r.n_failed}</td><td>{hm}</td></tr>")
    return "<table>" + head + "".join(rows) + "</table>"


@dataclass(frozen=True)
class ReportOutputs:
    """Paths written by :func:`write_report`."""

    output_dir: Path
    html: Path
    tables: tuple[Path, ...]
    figures: tuple[Path, ...]
    metametrics: Path | None
    per_seg: Path | None
    scores: Path | None
    notes: tuple[str, ...] = field(default_factory=tuple)


def write_report(merged: MergedResults, output_dir: str | Path, title: str = "TS2 report",
                 protocol: str | None = None, labels: Mapping[str, str] | None = None,
                 groups: Mapping[str, str] | None = None, scatter: Sequence[str] | None = None,
                 n_heatmaps: int = 2, extra_sections: Sequence[tuple[str, str]] = (),
                 prompts: Mapping[str, str] | None = None, figures: Sequence[str] = FIGURE_KINDS,
                 pareto: Sequence[str] | None = None, extra_files: Mapping[str, pd.DataFrame] | None = None,
                 verdict=None, dataset_note: str | None = None, dataset=None,
                 explorer: bool = False) -> ReportOutputs:
    """Write ``report.html``, the merged ``metametrics.csv``/``per_seg.csv``/``scores.csv``,
    ``pareto.csv``, the paper-style ``table.md``/``.tex``/``.csv``, ``figures/*.png`` and
    ``extra_files`` (name -> frame, as ``<name>.csv``) into ``output_dir``, as one result set
    (:func:`seg_data.result_sets.result_set`).

    ``extra_sections`` are ``(heading, html)`` pairs placed after the table (e.g. the
    discrepancy list of ``ts2 reproduce``). ``verdict`` (an :class:`analysis.verdict.Verdict`)
    adds the Verdict section after the overview and writes ``verdict.csv``, ``ranking.csv`` and
    ``pairs.csv``; ``dataset_note`` (HTML, e.g. :func:`synthetic_dataset_note`) goes into the
    overview. With ``explorer`` and per-image scores, the SEG explorer
    (:func:`analysis.report.explorer.write_explorer`, drawing ``dataset``'s SEGs when given) is written as
    ``explorer.html`` and linked from the page; when it cannot be built, a note says why.
    """
    extra_files = dict(extra_files or {})
    if verdict is not None:
        extra_files.update({"verdict": verdict.table, "ranking": verdict.ranking, "pairs": verdict.pairs})
    unknown = sorted(set(labels or {}) - set(merged.metrics))
    if unknown:  # a typo'd metric name would otherwise leave its label unused without a word
        # a note: shown in the report, and logged by ts2 report with the others
        merged = replace(merged, notes=(*merged.notes, f"labels name no metric of the report: {unknown}; "
                                                        f"expected keys among {merged.metrics}"))
    with result_set(output_dir, "ts2 report") as stage:
        res = _write_report(merged, stage, title, protocol, dict(labels or {}), groups, scatter,
                            n_heatmaps, extra_sections, prompts, figures, pareto, extra_files, verdict,
                            dataset_note, dataset, explorer)
        return _published(res)


def _published(res: ReportOutputs) -> ReportOutputs:
    """``res`` with every path where it will be once the result set is swapped in."""
    def pub(p):
        return None if p is None else published_path(p)

    return replace(res, output_dir=pub(res.output_dir), html=pub(res.html), tables=tuple(map(pub, res.tables)),
                   figures=tuple(map(pub, res.figures)), metametrics=pub(res.metametrics),
                   per_seg=pub(res.per_seg), scores=pub(res.scores))


def _overview(merged: MergedResults, labels: Mapping[str, str]) -> str:
    """Dataset, SEG/image counts and the metrics by role."""
    parts = [f"<p><b>Dataset:</b> {html.escape(merged.dataset or 'not recorded (give path= or dataset=)')}"]
    if merged.scores is not None:
        parts.append(f"; {merged.scores['seg_id'].nunique()} SEGs, {len(merged.scores)} images")
    parts.append("</p><ul>")
    what = {"metric": "Metrics under evaluation", "reference": "Reference metrics (published scores, for comparison)",
            "control": "Controls (built to fail: the floor a metric must clear; never on a Pareto frontier, "
                       "never choosing heatmaps)"}
    for role, text in what.items():
        ms = [labels.get(m, m) for m in merged.metrics if merged.role(m) == role]
        if ms:
            parts.append(f"<li>{text}: {html.escape(', '.join(ms))}</li>")
    return "".join(parts) + "</ul>"


def _explorer_section(merged: MergedResults, out: Path, dataset, protocol: str | None, title: str) -> tuple[str, str]:
    """Write ``explorer.html`` into ``out``; the report's section linking to it (or saying why not)."""
    from .explorer import write_explorer

    try:
        res = write_explorer(merged, out / "explorer.html", dataset, protocol=protocol, title=f"{title}: SEG explorer")
    except ValueError as e:
        log.warning("no SEG explorer: %s", e)
        return "SEG explorer", f"<p class='note'>No explorer: {html.escape(str(e))}</p>"
    return "SEG explorer", (
        f"<p><a href='explorer.html'>explorer.html</a>: {res.n_segs} SEGs, {res.n_images} images "
        f"({res.n_thumbnails} thumbnails, {res.size_bytes / 2**20:.1f} MB), one page that opens from disk. "
        "SEGs worst first by a metric's rank_m or sep_m (filter by subset, or where one metric fails and another "
        "passes); a SEG's graph with its walks, the worst walk highlighted, its images and scores; two metrics side "
        "by side.</p>")


def _metametrics_section(merged: MergedResults, labels: Mapping[str, str], front: pd.DataFrame | None,
                         figures) -> str:
    """The report's meta-metrics section (tables, FLOPs, Pareto notes), apart to keep :func:`_write_report` short."""
    mm = merged.metametrics
    protocols = list(dict.fromkeys(mm["protocol"]))
    body = (f"<p>Values in %, {_level(merged.confidence)} (bootstrap over SEGs) below each value when computed; "
            "the best non-control value of each row in bold; controls shaded"
            + ("; <i>chance</i>: the expected value when scores carry no information (each metric's own "
               "scores permuted within each SEG) &plusmn; its Monte-Carlo error, <i>adj.</i>: "
               "(value &minus; chance) / (max &minus; chance)"
               if {"chance", "adjusted"} <= set(mm.columns) else "")
            + ". The same table is in <code>table.md</code>, <code>table.tex</code> and <code>table.csv</code>; "
            "every cell with its CI is in <code>metametrics.csv</code>.</p>")
    for p in protocols:
        body += f"<h3>protocol: {html.escape(p)}</h3>" + metametrics_html(mm, p, labels, merged.roles)
    if merged.flops:
        body += "<p>FLOPs per image: " + ", ".join(
            f"{html.escape(labels.get(m, m))} {_fmt_flops(f)}" for m, f in merged.flops.items()) + "</p>"
    if front is not None and len(front):
        body += ("<p>Pareto frontier members (non-control metrics, per meta-metric and subset) are listed in "
                 "<code>pareto.csv</code>.</p>")
    missing = [m for m in merged.metrics if m not in merged.flops and merged.role(m) != "control"]
    costed_own = [m for m in merged.metrics if m in merged.flops and merged.role(m) != "control"]
    if "pareto" in figures and len(costed_own) == 1:
        body += (f"<p class='note'>No Pareto figures: {html.escape(labels.get(costed_own[0], costed_own[0]))} is "
                 "the only non-control metric with a known cost, so there is no frontier to draw (it is on "
                 "it alone); the controls' values are in the table above.</p>")
    if "pareto" in figures and missing:
        body += ("<p class='note'>No Pareto figure" + (" position" if merged.flops else "") + " for "
                 + html.escape(", ".join(labels.get(m, m) for m in missing))
                 + ": no cost is known. Give FLOPs per image on the command line, e.g. "
                 "<code>ts2 report results=DIR 'flops={" + html.escape(missing[0]) + ": 2.5e9}'</code> "
                 "(values like <code>2.5e9</code> or <code>604M</code>), or score the metric with "
                 "<code>ts2 score</code>, which records its FLOPs in run.json.</p>")
    return body


def _write_report(merged, out, title, protocol, labels, groups, scatter, n_heatmaps, extra_sections, prompts,
                  figures, pareto, extra_files, verdict=None, dataset_note=None, dataset=None,
                  explorer=False) -> ReportOutputs:
    mm, ps = merged.metametrics, merged.per_seg
    written_mm = written_ps = written_sc = None
    if mm is not None:
        written_mm = atomic_write_text(out / "metametrics.csv", mm.to_csv(index=False))
    if ps is not None:
        written_ps = atomic_write_text(out / "per_seg.csv", ps.to_csv(index=False))
    if merged.scores is not None:
        written_sc = atomic_write_text(out / "scores.csv", merged.scores.to_csv(index=False))
    for name, frame in extra_files.items():
        atomic_write_text(out / f"{name}.csv", frame.to_csv(index=False))
    from .tables import write_tables

    table_paths = write_tables(mm, out, labels=labels) if mm is not None else []
    front = pareto_table(mm, merged.flops, merged.roles) if mm is not None else None
    if front is not None and len(front):
        table_paths.append(atomic_write_text(out / "pareto.csv", front.to_csv(index=False)))
    figs = make_figures(merged, out / "figures", protocol=protocol, labels=labels, groups=groups, scatter=scatter,
                        n_heatmaps=n_heatmaps, prompts=prompts, kinds=figures, pareto=pareto)
    overview = _overview(merged, labels)
    if dataset_note:
        overview += f"<p class='note'>{dataset_note}</p>"
    sections: list[tuple[str, str]] = [("Overview", overview)]
    if verdict is not None and len(verdict.table):
        vprotos = list(dict.fromkeys(verdict.table["protocol"]))
        vp = protocol if protocol in vprotos else ("paper" if "paper" in vprotos else vprotos[0])
        sections.append(("Verdict", verdict_html(verdict, vp, labels, merged.confidence)))
    if mm is not None:
        sections.append(("Meta-metrics", _metametrics_section(merged, labels, front, figures)))
    sections.extend(extra_sections)
    by_section: dict[str, list[ReportFigure]] = {}
    for f in figs:
        by_section.setdefault(f.section, []).append(f)
    for sec, fs in by_section.items():
        sections.append((sec, "".join(figure_html(f) for f in fs)))
    if "scatter" in figures and not scatter and merged.per_seg is not None \
            and not any(f.path.name == "scatter_rank.png" for f in figs):
        sections.append(("Per-SEG comparison", "<p>No per-SEG scatter: there is no second non-control metric to "
                         "compare the metric under evaluation with (a control is built to fail, so agreeing with "
                         "it says nothing).</p>"))
    if explorer and merged.scores is not None:
        sections.append(_explorer_section(merged, out, dataset, protocol, title))
    sections.append(("Runs", runs_html(merged.runs)))
    if merged.notes:
        sections.append(("Notes", "<ul>" + "".join(f"<li class='note'>{html.escape(n)}</li>" for n in merged.notes)
                         + "</ul>"))
    html_path = atomic_write_text(out / "report.html", render_html(title, sections))
    return ReportOutputs(out, html_path, tuple(table_paths), tuple(f.path for f in figs), written_mm, written_ps,
                         written_sc, merged.notes)


def _fmt_flops(f: float) -> str:
    from .plots import si_flops

    return "0" if f == 0 else (si_flops(f) or "-")
