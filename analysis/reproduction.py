"""The paper's Table 2 reproduced from the released per-image scores (``ts2 reproduce``, ``ts2.reproduce``).

Reads ``metadata.csv`` and ``released/scores_subset.csv`` from a TS2 release folder (or another
score file / URL), analyses the released scores in every configured protocol and writes the
tables per protocol, the list of cells that differ from the printed Table 2 with their known
reasons, and the report with the Pareto frontiers at the paper's FLOPs row (see
:func:`reproduce`). Never imports torch.
"""

from __future__ import annotations

import html
import logging
from pathlib import Path
from typing import Any

import pandas as pd

from seg_data.result_sets import published_path, result_set

from .settings import AnalysisSettings, resolve_settings

__all__ = ["SCORES_IN_RELEASE", "locate_inputs", "reproduce", "missing_published_columns", "discrepancies_markdown",
           "discrepancies_html", "failure_code_notes"]

log = logging.getLogger(__name__)

SCORES_IN_RELEASE = Path("released") / "scores_subset.csv"




def locate_inputs(path: str | Path | None, scores: str | None = None, revision: str | None = None) -> tuple[Path, str]:
    """The release folder (holding ``metadata.csv``) and the score file to analyse.

    Raises
    ------
    FileNotFoundError
        ``path`` without ``metadata.csv``, or no score file where expected.
    RuntimeError
        ``path`` is null and the download fails (offline).
    """
    if path is None:
        from seg_data.ts2_release import download_ts2

        root = download_ts2(revision=revision)
    else:
        root = Path(path).expanduser()
        if root.is_file():
            root = root.parent
        if not (root / "metadata.csv").is_file():
            raise FileNotFoundError(f"expected a TS2 release folder with metadata.csv at {root}, found none")
    if scores:
        if str(scores).startswith(("http://", "https://")):
            return root, str(scores)
        sp = Path(scores).expanduser()
        if not sp.is_file():
            raise FileNotFoundError(f"expected the per-image score file scores={scores}, found none")
        return root, str(sp)
    sp = root / SCORES_IN_RELEASE
    if not sp.is_file():
        raise FileNotFoundError(
            f"expected the released per-image scores at {sp}, found none; pass scores=FILE_OR_URL "
            "(a wide table: seg_id, node, file_name, one column per metric)")
    return root, str(sp)


def failure_code_notes(res) -> dict[str, tuple[str, ...]]:
    """Protocol -> its notes on failure-code cells (VIEScore's ``-1``: how many, read how), from an
    :class:`analysis.pipeline.AnalysisResult`."""
    return {name: r.failure_notes for name, r in res.protocols.items()}


def discrepancies_markdown(table: pd.DataFrame, notes: dict[str, tuple[str, ...]] | None = None) -> str:
    """The discrepancy list as Markdown: a summary line per protocol, its failure-code notes
    (:func:`failure_code_notes`), then the differing cells."""
    from .paper_table2 import LABELS

    lines = ["# Reproduction of Table 2 vs the printed values", ""]
    for proto, d in table.groupby("protocol", sort=False):
        n, ok = len(d), int(d["match"].sum())
        lines.append(f"## protocol `{proto}`: {ok} of {n} printed cells reproduced (to the printed 0.1)")
        lines.append("")
        for note in (notes or {}).get(str(proto), ()):
            lines += [f"- {note}", ""]
        bad = d[~d["match"]]
        if bad.empty:
            lines += ["Every cell matches.", ""]
            continue
        lines.append("| metric | meta-metric | subset | printed | reproduced | difference (pp) | known reason |")
        lines.append("|---|---|---|---:|---:|---:|---|")
        for r in bad.itertuples(index=False):
            lines.append(f"| {LABELS.get(r.metric, r.metric)} | {r.meta_metric} | {r.subset} | {r.printed:.1f} | "
                         f"{r.reproduced:.2f} | {r.difference:+.2f} | {r.known or '-'} |")
        lines.append("")
    return "\n".join(lines)


def discrepancies_html(table: pd.DataFrame, notes: dict[str, tuple[str, ...]] | None = None) -> str:
    """The discrepancy list as HTML for the report (see :func:`discrepancies_markdown`)."""
    from .paper_table2 import LABELS

    parts = ["<p>Every Table 2 cell of the released metrics, reproduced from the released per-image scores. "
             "A cell matches when it equals the print after rounding to 0.1. The <code>paper</code> protocol "
             "follows the authors' code; the <code>graph</code> protocol follows the paper's equations, so its "
             "differences measure the effect of the protocol, not errors. Full list: "
             "<code>discrepancies.csv</code>.</p>"]
    for proto, d in table.groupby("protocol", sort=False):
        bad = d[~d["match"]]
        parts.append(f"<h3>protocol {html.escape(str(proto))}: {int(d['match'].sum())} of {len(d)} cells match</h3>")
        parts += [f"<p>{html.escape(n)}</p>" for n in (notes or {}).get(str(proto), ())]
        if bad.empty:
            continue
        rows = ["<tr><th>metric</th><th>meta-metric</th><th>subset</th><th>printed</th><th>reproduced</th>"
                "<th>difference (pp)</th><th>known reason</th></tr>"]
        for r in bad.itertuples(index=False):
            rows.append(f"<tr><td>{html.escape(LABELS.get(r.metric, r.metric))}</td><td>{r.meta_metric}</td>"
                        f"<td>{r.subset}</td><td>{r.printed:.1f}</td><td>{r.reproduced:.2f}</td>"
                        f"<td>{r.difference:+.2f}</td><td>{html.escape(r.known or '-')}</td></tr>")
        parts.append("<table>" + "".join(rows) + "</table>")
    return "".join(parts)


def printed_figure4_html(fig_dir: Path) -> str:
    """The paper's Figure 4 redrawn from the printed Table 2 (Avg/subset rank_m and sep_m of all 19
    metrics at the printed FLOPs row; no CIs, the paper gives none), as embedded figures."""
    from .paper_table2 import FAMILIES, LABELS, table2
    from .report import page as rp
    from .report import plots
    from .report.plots_pareto import pareto_figure

    t = table2()
    parts = []
    for mm in ("rank", "sep"):
        fig = pareto_figure(t, mm, labels=LABELS, groups=FAMILIES,
                                  title=f"Printed Table 2: {plots.META_LABELS[mm]} vs the paper's FLOPs row")
        path = plots.save_figure(fig, fig_dir / f"pareto_printed_{mm}.png")
        parts.append(rp.figure_html(rp.ReportFigure(
            path, f"{mm}_m of all 19 metrics as printed in Table 2 against the printed FLOPs per image; the "
                  "frontier computed from the printed numbers.", "Figure 4")))
    return "".join(parts)


def reproduce(path: str | Path | None, output_dir: str | Path, settings: AnalysisSettings | None = None, *,
              scores: str | None = None, revision: str | None = None, figures=None, pareto=None,
              **analysis: Any) -> dict:
    """Run the reproduction (the Python API of ``ts2 reproduce``); returns what was written.

    ``settings`` (:class:`analysis.settings.AnalysisSettings`; default: those of
    ``conf/analysis/default.yaml``) analyses the released scores, every setting used as
    ``ts2 analyze`` uses it (``chance`` adds chance levels to ``metametrics.csv`` and the report;
    the printed-table comparison reads the values only); ``analysis`` keyword arguments replace
    single settings (an unknown name is a ``TypeError``). The figures show the first protocol.

    Returns
    -------
    dict
        ``report`` (ReportOutputs), ``discrepancies`` (DataFrame of :func:`compare_with_printed`),
        ``tables`` (protocol -> list of paths), ``discrepancy_files``.
    """
    from seg_data import load_ts2_release

    from .paper_table2 import compare_with_printed
    from .pipeline import analyze
    from .scores_io import read_score_frame

    settings = resolve_settings(settings, analysis)
    root, score_src = locate_inputs(path, scores, revision)
    try:
        frame, declared_lower = read_score_frame(score_src, allow_url=True)
    except OSError as e:  # a URL whose server is down or answers an error (URLError, HTTPError), ...
        reason = getattr(e, "reason", None) or e.strerror or e
        raise FileNotFoundError(f"expected the per-image score file scores={score_src} to be readable, got: "
                                f"{reason}") from e
    ds = load_ts2_release(root)
    log.info("analysing %s (%d rows) with protocols %s, %d bootstrap resamples", score_src, len(frame),
             settings.protocol_names(), settings.bootstrap)
    if declared_lower:  # directions the file declares (a long table's higher_is_better, a run.json beside it)
        settings = settings.updated(lower_is_better=sorted({*settings.lower_is_better, *declared_lower}))
    res = analyze(frame, ds, settings)
    mm, ps = res.metametrics_frame(), res.per_seg_frame()
    missing = missing_published_columns(frame, score_src)
    for why in missing.values():
        log.warning("%s: its printed Table 2 cells are not reproduced", why)
    disc = compare_with_printed(mm, missing=missing)
    # One result set: the tables, the discrepancy list and the report, swapped in whole.
    with result_set(output_dir, "ts2 reproduce") as out:
        r = _write_reproduction(res, frame, ds, root, score_src, disc, mm, ps, out, output_dir,
                                settings.protocol_names(), figures, pareto)
        r["tables"] = {proto: [published_path(p) for p in paths] for proto, paths in r["tables"].items()}
        r["discrepancy_files"] = [published_path(p) for p in r["discrepancy_files"]]
        r["missing"] = missing
        r["failure_codes"] = failure_code_notes(res)
        return r


def _write_reproduction(res, frame, ds, root, score_src, disc, mm, ps, out: Path, output_dir, protocols, figures,
                        pareto) -> dict:
    from .paper_table2 import FAMILIES, FLOPS, LABELS
    from .report import page as rp
    from .report.settings import ReportSettings
    from .report.tables import write_tables

    disc.to_csv(out / "discrepancies.csv", index=False)
    fail = failure_code_notes(res)
    (out / "discrepancies.md").write_text(discrepancies_markdown(disc, fail) + "\n", encoding="utf-8")
    tables: dict[str, list[Path]] = {}
    for proto in dict.fromkeys(mm["protocol"]):
        tables[proto] = write_tables(mm[mm["protocol"] == proto], out, labels=LABELS, stem=f"table_{proto}")
    scores_frame = frame.copy()
    merged = rp.MergedResults(
        scores=scores_frame, metametrics=mm, per_seg=ps,
        flops={m: FLOPS[m] for m in res.metrics if m in FLOPS}, lower_is_better=res.lower_is_better,
        runs=(rp.RunInfo(label=Path(score_src).name, dirs=(str(root),), overrides={},
                         columns={m: m for m in res.metrics}, n_images=len(frame)),),
        notes=tuple(res.notes), dataset=getattr(ds, "name", None) or "TS2", confidence=res.confidence)
    extra = [("Discrepancies with the printed Table 2", discrepancies_html(disc, fail))]
    kinds = rp.FIGURE_KINDS if figures is None else tuple(figures)
    if "pareto" in kinds:
        extra.append(("Figure 4 from the printed Table 2 (all 19 metrics)", printed_figure4_html(out / "figures")))
    settings = ReportSettings(title="TS2: reproduction of the paper's Table 2", figure_protocol=protocols[0],
                              labels=LABELS, figures=kinds, pareto=None if pareto is None else tuple(pareto),
                              explorer=False)
    report = rp.write_report(merged, output_dir, settings, rp.ReportContent(
        prompts={s.seg_id: s.prompt for s in ds}, groups=FAMILIES, extra_sections=tuple(extra)))
    return {"report": report, "discrepancies": disc, "tables": tables,
            "discrepancy_files": [out / "discrepancies.csv", out / "discrepancies.md"]}


def missing_published_columns(frame: pd.DataFrame, source: str) -> dict[str, str]:
    """Released metrics (:data:`analysis.paper_table2.RELEASED_METRICS`) absent from, or without
    any score in, a table holding the others: metric -> why, for the summary and the discrepancies.
    A table with none of them (another metric's scores) misses nothing."""
    from .paper_table2 import RELEASED_METRICS

    present = [m for m in RELEASED_METRICS if m in frame.columns]
    if not present:
        return {}
    out = {m: f"published column {m!r} missing from {source}" for m in RELEASED_METRICS if m not in frame.columns}
    for m in present:
        if pd.to_numeric(frame[m], errors="coerce").isna().all():
            out[m] = f"published column {m!r} of {source} has no score"
    return out
