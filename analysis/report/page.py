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

from ..units import DELTA_NOTE, UNIT_CONVENTION, delta_above_100, delta_numbers, pct_header, pct_or_blank
from .figures import FIGURE_KINDS, ReportFigure, make_figures, pareto_table
from .merged import MergedResults, RunInfo
from .mm_table import metametrics_html
from .settings import ReportSettings

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
    """``0.1234`` -> ``"12.3"`` (:func:`analysis.units.pct_or_blank`: blank when missing or not finite)."""
    return pct_or_blank(v)


def _level(confidence: float | None) -> str:
    return "confidence interval (level not recorded)" if confidence is None else \
        f"{100 * confidence:g}% confidence interval"


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
    rows = ["<tr><th>metric</th><th>SEG view: %s (%s, Avg), in %%</th><th>SEG rank</th><th>human view: %s (%s), in %%</th>"
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
    if not t["against"].fillna("").astype(str).ne("").any():
        return _standing_html(t, protocol, labels, confidence)
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
    head = (f"<tr><th>meta-metric</th><th>{pct_header('value')}</th><th>place (group)</th><th>against</th>"
            f"<th>{pct_header('its value')}</th><th>difference [CI] (points)</th><th>p</th><th>Holm p</th>"
            "<th>verdict</th></tr>")
    for m in dict.fromkeys(t["metric"]):
        d = t[t["metric"] == m]
        parts.append(f"<h3>{html.escape(labels.get(m, m))}</h3><p>{html.escape(summary_line(d, v.alpha))}</p>")
        rows = [head]
        for mm, g in d.groupby("meta_metric", sort=False):
            h = g.iloc[0]
            first = (f"<td rowspan={len(g)}>{html.escape(mm)}_m</td><td rowspan={len(g)}>{_value_ci(h)}"
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
    if delta_above_100(delta_numbers(t, ("value", "ci_low", "ci_high", "against_value"))):
        parts.append(f"<p class='foot'>{html.escape(DELTA_NOTE)}</p>")
    return "".join(parts)


def _value_ci(row) -> str:
    """A verdict row's value in %, with its CI in small type when it has one."""
    ci = (f" <small>[{_fmt_pct(row['ci_low'])}, {_fmt_pct(row['ci_high'])}]</small>"
          if np.isfinite(row["ci_low"]) else "")
    return f"{_fmt_pct(row['value'])}{ci}"


def _standing_html(t, protocol: str, labels: Mapping[str, str], confidence: float | None) -> str:
    """The verdict of a protocol where nothing was compared (no reference, no control): said once, then each
    metric's value, place and Holm group per meta-metric in one table (no comparison columns to leave empty)."""
    from ..verdict import NOTHING_TO_COMPARE

    mms = list(dict.fromkeys(t["meta_metric"]))
    head = "<tr><th>metric</th>" + "".join(f"<th>{pct_header(html.escape(mm) + '_m')} (place, group)</th>"
                                            for mm in mms) + "</tr>"
    rows = [head]
    for m, d in t.groupby("metric", sort=False):
        cells = []
        for mm in mms:
            h = d[d["meta_metric"] == mm].iloc[0]
            cells.append(f"<td>{_value_ci(h)} <small>({int(h['position'])} of {int(h['n_metrics'])}, "
                         f"group {int(h['group'])} of {int(h['n_groups'])})</small></td>")
        rows.append(f"<tr><td>{html.escape(labels.get(m, m))}</td>{''.join(cells)}</tr>")
    note = (f"<p class='note'>Protocol <b>{html.escape(protocol)}</b>, subset "
            f"{html.escape(str(t['subset'].iloc[0]))}: {html.escape(NOTHING_TO_COMPARE)}. Values with the "
            f"{_level(confidence)}; place among all {int(t['n_metrics'].iloc[0])} metrics and Holm significance "
            "group (group 1: the best metric and every metric not significantly different from it).</p>")
    foot = (f"<p class='foot'>{html.escape(DELTA_NOTE)}</p>"
            if delta_above_100(delta_numbers(t, ("value", "ci_low", "ci_high"))) else "")
    return note + "<table class='verdict'>" + "".join(rows) + "</table>" + foot


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


@dataclass(frozen=True)
class ReportContent:
    """What a report shows besides its settings (:class:`analysis.report.settings.ReportSettings`) and the
    merged results: the verdict, the dataset (its SEGs for the explorer; its caveat when synthetic), the SEG
    prompts of the heatmaps, metric groups of the Pareto figure, extra sections and extra files.

    Attributes
    ----------
    verdict : analysis.verdict.Verdict or None
        Adds the Verdict section after the overview and writes ``verdict.csv``, ``ranking.csv``, ``pairs.csv``.
    dataset : SEGDataset or None
        Drawn by the explorer; a synthetic one puts :func:`synthetic_dataset_note` in the overview.
    prompts : mapping or None
        SEG id -> prompt, shown above each heatmap.
    groups : mapping or None
        Metric -> group label (the Pareto figure's colours).
    extra_sections : tuple of (heading, html)
        Placed after the table (e.g. the discrepancy list of ``ts2 reproduce``).
    extra_files : mapping of name to DataFrame
        Written as ``<name>.csv`` beside the report.
    """

    verdict: object = None
    dataset: object = None
    prompts: Mapping[str, str] | None = None
    groups: Mapping[str, str] | None = None
    extra_sections: tuple[tuple[str, str], ...] = ()
    extra_files: Mapping[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def dataset_note(self) -> str | None:
        return synthetic_dataset_note(getattr(self.dataset, "metadata", None))

    def files(self) -> dict[str, pd.DataFrame]:
        """Every extra file, the verdict's tables included."""
        out = dict(self.extra_files)
        if self.verdict is not None:
            v = self.verdict
            out.update({"verdict": v.table, "ranking": v.ranking, "pairs": v.pairs})
        return out


def write_report(merged: MergedResults, output_dir: str | Path, settings: ReportSettings | None = None,
                 content: ReportContent | None = None) -> ReportOutputs:
    """Write ``report.html``, the merged ``metametrics.csv``/``per_seg.csv``/``scores.csv``,
    ``pareto.csv``, the paper-style ``table.md``/``.tex``/``.csv``, ``figures/*.png`` and the content's
    extra files (name -> frame, as ``<name>.csv``) into ``output_dir``, as one result set
    (:func:`seg_data.result_sets.result_set`), drawn as ``settings`` says (default:
    ``conf/report/default.yaml``'s) from ``content`` (:class:`ReportContent`). With ``settings.explorer`` and
    per-image scores, the SEG explorer (:func:`analysis.report.explorer.write_explorer`, drawing the content's
    dataset when given) is written as ``explorer.html`` and linked from the page; when it cannot be built, a
    note says why.
    """
    settings = settings or ReportSettings()
    content = content or ReportContent()
    unknown = sorted(set(settings.labels) - set(merged.metrics))
    if unknown:  # a typo'd metric name would otherwise leave its label unused without a word
        # a note: shown in the report, and logged by ts2 report with the others
        merged = replace(merged, notes=(*merged.notes, f"labels name no metric of the report: {unknown}; "
                                                        f"expected keys among {merged.metrics}"))
    figures = FIGURE_KINDS if settings.figures is None else tuple(settings.figures)
    with result_set(output_dir, "ts2 report") as stage:
        report = ReportPage(merged, stage, settings.title, settings.figure_protocol, dict(settings.labels), figures,
                            settings.scatter, content.verdict, content.dataset_note, content.dataset,
                            settings.explorer)
        figs = make_figures(merged, stage / "figures", protocol=settings.figure_protocol, labels=report.labels,
                            groups=content.groups, scatter=settings.scatter, n_heatmaps=settings.heatmaps,
                            prompts=content.prompts, kinds=figures, pareto=settings.pareto)
        return _published(_write_report(report, figs, content.extra_sections, content.files()))


def _published(res: ReportOutputs) -> ReportOutputs:
    """``res`` with every path where it will be once the result set is swapped in."""
    def pub(p):
        return None if p is None else published_path(p)

    return replace(res, output_dir=pub(res.output_dir), html=pub(res.html), tables=tuple(map(pub, res.tables)),
                   figures=tuple(map(pub, res.figures)), metametrics=pub(res.metametrics),
                   per_seg=pub(res.per_seg), scores=pub(res.scores))


@dataclass(frozen=True)
class ReportPage:
    """What the sections of ``report.html`` are drawn from: the merged results, the stage folder
    ``out`` the files go to, and the choices of :func:`write_report` (``figures``: the figure
    kinds asked for). Each ``*_section`` method is one section of the page (or none, when it has
    nothing to show)."""

    merged: MergedResults
    out: Path
    title: str
    protocol: str | None
    labels: Mapping[str, str]
    figures: tuple[str, ...]
    scatter: Sequence[str] | None
    verdict: object = None
    dataset_note: str | None = None
    dataset: object = None
    explorer: bool = False

    def label(self, m: str) -> str:
        return self.labels.get(m, m)

    def overview_section(self) -> tuple[str, str]:
        """Dataset, SEG/image counts, the metrics by role, and the dataset's own note."""
        merged = self.merged
        parts = [f"<p><b>Dataset:</b> {html.escape(merged.dataset or 'not recorded (give path= or dataset=)')}"]
        if merged.scores is not None:
            parts.append(f"; {merged.scores['seg_id'].nunique()} SEGs, {len(merged.scores)} images")
        parts.append("</p><ul>")
        for role, text in _ROLE_LINES.items():
            ms = [self.label(m) for m in merged.metrics if merged.role(m) == role]
            if ms:
                parts.append(f"<li>{text}: {html.escape(', '.join(ms))}</li>")
        body = "".join(parts) + "</ul>"
        if self.dataset_note:
            body += f"<p class='note'>{self.dataset_note}</p>"
        return "Overview", body

    def verdict_section(self) -> tuple[str, str] | None:
        """The verdict of the report's protocol (else ``paper``, else the first with a verdict)."""
        v = self.verdict
        if v is None or not len(v.table):
            return None
        vprotos = list(dict.fromkeys(v.table["protocol"]))
        vp = self.protocol if self.protocol in vprotos else ("paper" if "paper" in vprotos else vprotos[0])
        return "Verdict", verdict_html(v, vp, self.labels, self.merged.confidence)

    def metametrics_section(self, front: pd.DataFrame | None) -> tuple[str, str] | None:
        """How to read the tables (units, CIs, chance), one table per protocol, the FLOPs and the
        Pareto notes (:class:`CostNotes`)."""
        mm = self.merged.metametrics
        if mm is None:
            return None
        chance = ("; <i>chance</i>: the expected value when scores carry no information (each metric's own "
                  "scores permuted within each SEG) &plusmn; its Monte-Carlo error, <i>adj.</i>: "
                  "(value &minus; chance) / (max &minus; chance)" if {"chance", "adjusted"} <= set(mm.columns) else "")
        body = (f"<p>{html.escape(_UNITS_SENTENCE)}, {_level(self.merged.confidence)} (bootstrap over SEGs) below "
                "each value when computed; the best non-control value of each row in bold; controls shaded"
                + chance + ". The same table is in <code>table.md</code>, <code>table.tex</code> and "
                "<code>table.csv</code>; every cell with its CI is in <code>metametrics.csv</code>.</p>")
        for p in dict.fromkeys(mm["protocol"]):
            body += f"<h3>protocol: {html.escape(p)}</h3>" + metametrics_html(mm, p, self.labels, self.merged.roles)
        return "Meta-metrics", body + CostNotes(self.merged, self.labels, "pareto" in self.figures).html(front)

    def figure_sections(self, figs: Sequence[ReportFigure]) -> list[tuple[str, str]]:
        """One section per figure section name, in the order the figures were made."""
        by_section: dict[str, list[ReportFigure]] = {}
        for f in figs:
            by_section.setdefault(f.section, []).append(f)
        return [(sec, "".join(figure_html(f) for f in fs)) for sec, fs in by_section.items()]

    def no_scatter_section(self, figs: Sequence[ReportFigure]) -> tuple[str, str] | None:
        """Why a per-SEG scatter asked for was not drawn (no second non-control metric)."""
        if "scatter" not in self.figures or self.scatter or self.merged.per_seg is None \
                or any(f.path.name == "scatter_rank.png" for f in figs):
            return None
        return ("Per-SEG comparison", "<p>No per-SEG scatter: there is no second non-control metric to "
                "compare the metric under evaluation with (a control is built to fail, so agreeing with "
                "it says nothing).</p>")

    def explorer_section(self) -> tuple[str, str] | None:
        """Write ``explorer.html`` beside the page; the section linking to it (or saying why not)."""
        if not self.explorer or self.merged.scores is None:
            return None
        from .explorer import write_explorer

        try:
            res = write_explorer(self.merged, self.out / "explorer.html", self.dataset, protocol=self.protocol,
                                 title=f"{self.title}: SEG explorer")
        except ValueError as e:
            log.warning("no SEG explorer: %s", e)
            return "SEG explorer", f"<p class='note'>No explorer: {html.escape(str(e))}</p>"
        return "SEG explorer", (
            f"<p><a href='explorer.html'>explorer.html</a>: {res.n_segs} SEGs, {res.n_images} images "
            f"({res.n_thumbnails} thumbnails, {res.size_bytes / 2**20:.1f} MB), one page that opens from disk. "
            "SEGs worst first by a metric's rank_m or sep_m (filter by subset, or where one metric fails and another "
            "passes); a SEG's graph with its walks, the worst walk highlighted, its images and scores; two metrics "
            "side by side.</p>")

    def notes_section(self) -> tuple[str, str] | None:
        if not self.merged.notes:
            return None
        return "Notes", "<ul>" + "".join(f"<li class='note'>{html.escape(n)}</li>" for n in self.merged.notes) + "</ul>"

    def sections(self, figs: Sequence[ReportFigure], front: pd.DataFrame | None,
                 extra_sections: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Every section in page order (``extra_sections`` after the tables); absent ones left out."""
        found = [self.overview_section(), self.verdict_section(), self.metametrics_section(front),
                 *extra_sections, *self.figure_sections(figs), self.no_scatter_section(figs),
                 self.explorer_section(), ("Runs", runs_html(self.merged.runs)), self.notes_section()]
        return [sec for sec in found if sec is not None]


_ROLE_LINES = {"metric": "Metrics under evaluation",
               "reference": "Reference metrics (published scores, for comparison)",
               "control": "Controls (built to fail: the floor a metric must clear; never on a Pareto frontier, "
                          "never choosing heatmaps)"}
#: The report's statement of the unit convention (:data:`analysis.units.UNIT_CONVENTION`).
_UNITS_SENTENCE = UNIT_CONVENTION[0].upper() + UNIT_CONVENTION[1:]


@dataclass(frozen=True)
class CostNotes:
    """What the report says about the metrics' costs: the FLOPs per image, where the Pareto
    frontier members are, and why a Pareto figure (or a metric's place on it) is missing.

    ``pareto_asked``: the Pareto figures were among the figure kinds asked for."""

    merged: MergedResults
    labels: Mapping[str, str]
    pareto_asked: bool

    def _own(self, costed: bool) -> list[str]:
        """Non-control metrics with (``costed``) or without a known FLOPs count."""
        return [m for m in self.merged.metrics if (m in self.merged.flops) == costed and self.merged.role(m) != "control"]

    def flops_line(self) -> str:
        flops = self.merged.flops
        if not flops:
            return ""
        return "<p>FLOPs per image: " + ", ".join(
            f"{html.escape(self.labels.get(m, m))} {_fmt_flops(f)}" for m, f in flops.items()) + "</p>"

    def lone_costed_note(self) -> str:
        costed = self._own(True)
        if not self.pareto_asked or len(costed) != 1:
            return ""
        return (f"<p class='note'>No Pareto figures: {html.escape(self.labels.get(costed[0], costed[0]))} is "
                "the only non-control metric with a known cost, so there is no frontier to draw (it is on "
                "it alone); the controls' values are in the table above.</p>")

    def missing_cost_note(self) -> str:
        missing = self._own(False)
        if not self.pareto_asked or not missing:
            return ""
        return ("<p class='note'>No Pareto figure" + (" position" if self.merged.flops else "") + " for "
                + html.escape(", ".join(self.labels.get(m, m) for m in missing))
                + ": no cost is known. Give FLOPs per image on the command line, e.g. "
                "<code>ts2 report results=DIR 'flops={" + html.escape(missing[0]) + ": 2.5e9}'</code> "
                "(values like <code>2.5e9</code> or <code>604M</code>), or score the metric with "
                "<code>ts2 score</code>, which records its FLOPs in run.json.</p>")

    def html(self, front: pd.DataFrame | None) -> str:
        members = ("<p>Pareto frontier members (non-control metrics, per meta-metric and subset) are listed in "
                   "<code>pareto.csv</code>.</p>" if front is not None and len(front) else "")
        return self.flops_line() + members + self.lone_costed_note() + self.missing_cost_note()


def _write_frames(out: Path, frames: Mapping[str, pd.DataFrame | None]) -> dict[str, Path | None]:
    """Each frame as ``<name>.csv`` in ``out`` (None for an absent frame): name -> path written."""
    return {name: None if frame is None else atomic_write_text(out / f"{name}.csv", frame.to_csv(index=False))
            for name, frame in frames.items()}


def _write_report(report: ReportPage, figs: Sequence[ReportFigure], extra_sections: Sequence[tuple[str, str]],
                  extra_files: Mapping[str, pd.DataFrame]) -> ReportOutputs:
    """Write the merged tables, the paper-style tables, ``pareto.csv`` and ``report.html`` into ``report.out``."""
    merged, out = report.merged, report.out
    written = _write_frames(out, {"metametrics": merged.metametrics, "per_seg": merged.per_seg,
                                  "scores": merged.scores, **extra_files})
    from .tables import write_tables

    mm = merged.metametrics
    table_paths = write_tables(mm, out, labels=report.labels) if mm is not None else []
    front = pareto_table(mm, merged.flops, merged.roles) if mm is not None else None
    if front is not None and len(front):
        table_paths.append(atomic_write_text(out / "pareto.csv", front.to_csv(index=False)))
    sections = report.sections(figs, front, extra_sections)
    html_path = atomic_write_text(out / "report.html", render_html(report.title, sections))
    return ReportOutputs(out, html_path, tuple(table_paths), tuple(f.path for f in figs), written["metametrics"],
                         written["per_seg"], written["scores"], merged.notes)


def _fmt_flops(f: float) -> str:
    from .plots import si_flops

    return "0" if f == 0 else (si_flops(f) or "-")
