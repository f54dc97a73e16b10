"""Writing an analysis to a folder, and a short text summary for the terminal.

Files: ``metametrics.csv``, ``per_seg.csv``, ``table.md``/``.tex``/``.csv``, ``analysis.json``
(settings, protocol options, notes), and when asked ``compare.csv``, ``ranking.csv``,
``pairs.csv``. Every file is written to a temporary name first and renamed, so a crash never
leaves a half-written file behind.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data.result_sets import atomic_write_text, input_fingerprints, published_path, result_set
from seg_data.results import ANALYSIS_FILE, PER_SEG_COLUMNS, AnalysisRecord

from ..chance import NULL_DESCRIPTION
from ..pipeline import AnalysisResult
from ..verdict import pct as _pct  # one rounding rule for every printed percentage
from .tables import seg_count_text, write_tables

__all__ = ["analysis_record", "write_outputs", "write_frame", "per_seg_csv", "summary_text", "compare_text"]


def write_frame(frame: pd.DataFrame, path: Path) -> Path:
    return atomic_write_text(path, frame.to_csv(index=False))


def _csv_cells(rows: Iterable[Iterable], lineterminator: str) -> list[str]:
    """Each row of text fields as ``DataFrame.to_csv`` writes it (the standard csv writer,
    minimal quoting; a missing value empty), with a trailing delimiter and no line end."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=lineterminator, delimiter=",", quotechar='"',
                        quoting=csv.QUOTE_MINIMAL, doublequote=True, escapechar=None)
    out = []
    for row in rows:
        buf.seek(0)
        buf.truncate()
        # The trailing empty field keeps a row of one empty field from being written as '""'.
        writer.writerow(["" if x is None or (isinstance(x, float) and math.isnan(x)) else x for x in row] + [""])
        out.append(buf.getvalue()[:-len(lineterminator)])
    return out


def _float_texts(values: np.ndarray) -> np.ndarray:
    """``values`` as ``DataFrame.to_csv`` writes a float column (``astype(str)``, NaN empty), as an
    object array of the same shape. Each distinct value is formatted once: per-SEG values repeat
    a lot, and the shortest-repr formatting is the writer's largest cost."""
    x = np.ascontiguousarray(values, dtype=np.float64).ravel()
    # Distinct bit patterns, not values: -0.0 and 0.0 are written differently.
    bits, inverse = np.unique(x.view(np.int64), return_inverse=True)
    distinct = bits.view(np.float64)
    text = np.empty(len(distinct), dtype=object)
    text[:] = distinct.astype(str).tolist()  # to_csv's formatting; tolist: Python strs at C speed
    text[np.isnan(distinct)] = ""
    return text[inverse.reshape(-1)].reshape(np.shape(values))


def per_seg_csv(result: AnalysisResult) -> str:
    """``per_seg.csv``: the text of ``result.per_seg_frame().to_csv(index=False)``, built without
    the frame.

    The long table repeats one (metric, protocol, meta-metric) prefix over every SEG and one
    (SEG, subset) part under every prefix, so each is quoted once (by the csv writer pandas
    uses) and each distinct value formatted once; pandas' row-by-row writer took seconds on
    a million rows.
    """
    lt = os.linesep  # to_csv's default line end
    out = [_csv_cells([PER_SEG_COLUMNS], lt)[0][:-1] + lt]
    for pname, pr in result.protocols.items():
        sv = pr.seg_values
        n_m, n_k, n_s = sv.values.shape
        if n_s == 0:
            continue
        segs = _csv_cells(zip(sv.seg_ids, [s or "" for s in sv.subsets], strict=True), lt)
        heads = _csv_cells([(m, pname, mm) for m in result.metrics for mm in result.meta_metrics], lt)
        vals = _float_texts(sv.values).reshape(n_m * n_k, n_s)
        for head, row in zip(heads, vals, strict=True):
            out.append(head + (lt + head).join(map(str.__add__, segs, row)) + lt)
    return "".join(out)


def write_outputs(result: AnalysisResult, out_dir: str | Path, extra: dict[str, pd.DataFrame] | None = None,
                  roles: dict[str, str] | None = None, dataset: str | None = None,
                  score_files: list[str] | tuple[str, ...] = (), dataset_path: str | None = None) -> list[Path]:
    """Write every output of ``result`` (and ``extra`` frames as ``<name>.csv``) to ``out_dir``,
    as one set (:func:`seg_data.result_sets.result_set`: a killed writer leaves a folder that reads
    as interrupted). ``roles`` (metric -> role, default ``metric``) and the ``dataset`` name go
    into ``analysis.json``, with the absolute paths of the ``score_files`` read (the user's table,
    then any reference table), so a report can draw their per-image scores, and the dataset's
    folder ``dataset_path`` (so ``ts2 explore`` finds prompts and images without ``path=``)."""
    with result_set(out_dir, "ts2 analyze") as stage:
        paths = _write_outputs(result, stage, extra, roles or {}, dataset, score_files, dataset_path)
        return [published_path(p) for p in paths]


def _write_outputs(result: AnalysisResult, out: Path, extra: dict[str, pd.DataFrame] | None,
                   roles: dict[str, str], dataset: str | None, score_files, dataset_path=None) -> list[Path]:
    paths = [write_frame(result.metametrics_frame(), out / "metametrics.csv"),
             atomic_write_text(out / "per_seg.csv", per_seg_csv(result))]
    paths += write_tables(result, out)
    for name, frame in (extra or {}).items():
        paths.append(write_frame(frame, out / f"{name}.csv"))
    p = atomic_write_text(out / ANALYSIS_FILE, analysis_record(result, roles, dataset, score_files,
                                                                       dataset_path).to_json())
    paths.append(p)
    return paths


def analysis_record(result: AnalysisResult, roles: dict[str, str] | None = None, dataset: str | None = None,
                    score_files: list[str] | tuple[str, ...] = (), dataset_path: str | None = None) -> AnalysisRecord:
    """The ``analysis.json`` record of ``result`` (:class:`seg_data.results.AnalysisRecord`): its
    settings, protocol options, SEG counts and exclusions per protocol, notes, the metrics'
    ``roles`` (default ``metric``), the ``dataset`` name and the ``score_files`` read, with their
    fingerprints (a reader refuses the folder when one has changed since)."""
    roles = roles or {}
    protocols = result.protocols.items()
    return AnalysisRecord(
        source=result.source, metrics=tuple(result.metrics), lower_is_better=frozenset(result.lower_is_better),
        roles={m: roles.get(m, "metric") for m in result.metrics}, dataset=dataset,
        dataset_path=None if dataset_path is None else str(Path(dataset_path).resolve()),
        score_files=tuple(str(Path(f).resolve()) for f in score_files),
        inputs=input_fingerprints(score_files), meta_metrics=tuple(result.meta_metrics),
        protocols={name: pr.protocol.to_dict() for name, pr in protocols},
        subsets={name: list(pr.group_names) for name, pr in protocols}, subset_source=result.subset_source,
        n_segs={name: len(pr.seg_values.seg_ids) for name, pr in protocols},
        excluded_segs={name: list(pr.excluded) for name, pr in protocols},
        delta_sigma={name: dict(zip(result.metrics, map(_num, pr.seg_values.sigma), strict=True))
                     for name, pr in protocols},
        bootstrap=result.bootstrap, seed=result.seed, confidence=result.confidence, ci_method=result.ci_method,
        bootstrap_scheme=result.bootstrap_scheme, chance_permutations=result.chance,
        min_segs_ci=result.min_segs_ci, notes=tuple(result.notes),
        chance_null=NULL_DESCRIPTION if result.chance else None)


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _fmt(v: float, lo: float, hi: float, with_ci: bool, na: bool = False) -> str:
    """``v [lo, hi]`` in %; ``v [n/a]`` when ``na`` (a CI withheld: too few SEGs)."""
    if np.isnan(v):
        return "-"
    s = _pct(v)
    if with_ci and not (np.isnan(lo) or np.isnan(hi)):
        s += f" [{_pct(lo)}, {_pct(hi)}]"
    elif with_ci and na:
        s += " [n/a]"
    return s


def _mc(e: float) -> str:
    """`` +-e`` in points (two decimals: the Monte-Carlo error is usually below 1), or nothing."""
    return f" +-{100 * float(e):.2f}" if np.isfinite(e) else ""


def summary_text(result: AnalysisResult, meta_metrics=("rank", "sep", "delta"), subset: str = "Avg") -> str:
    """A small fixed-width table per protocol: one line per metric, ``subset`` values in %.

    The header and the column ``SEGs`` give the SEGs behind each metric's values (those where
    the shown meta-metrics are defined, not the dataset's count). A CI withheld because a cell has
    fewer than ``min_segs_ci`` SEGs shows as ``[n/a]``, with the reason under the table.

    With chance levels, a second table per protocol gives each cell's chance level with its
    Monte-Carlo error, its band and the chance-adjusted value ``(v - chance) / (max - chance)``
    (in %; "-" for delta, unbounded), and names the null (:data:`analysis.chance.NULL_DESCRIPTION`).
    """
    with_ci = result.bootstrap > 0
    mms = [m for m in meta_metrics if m in result.meta_metrics]
    lines = []

    def block(title: str, header: list[str], cells: list[list[str]], foot: str = "") -> None:
        lines.append(title)
        widths = [max(len(str(r[j])) for r in [header] + cells) for j in range(len(header))]
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for r in cells:
            lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
        if foot:
            lines.append(foot)
        lines.append("")

    level = f"{result.confidence * 100:g}%"
    for name, pr in result.protocols.items():
        g = list(pr.group_names).index(subset)
        kk = [result.meta_metrics.index(mm) for mm in mms]
        n = [int(pr.n_segs[i, kk, g].max()) if kk else 0 for i in range(len(result.metrics))]
        ci = f", {level} CI over {result.bootstrap} SEG resamples" if with_ci else ""
        na = with_ci and any(pr.n_segs[i, k, g] < result.min_segs_ci and not np.isnan(pr.estimates[i, k, g])
                             for i in range(len(result.metrics)) for k in kk)
        cells = [[m, str(n[i])] + [_fmt(pr.estimates[i, k, g], pr.ci_low[i, k, g], pr.ci_high[i, k, g], with_ci,
                                        pr.n_segs[i, k, g] < result.min_segs_ci) for k in kk]
                 for i, m in enumerate(result.metrics)]
        foot = (f"n/a: no CI for a value from fewer than {result.min_segs_ci} SEGs (min_segs_ci={result.min_segs_ci})"
                if na else "")
        block(f"protocol={name}: {seg_count_text(n, subset)}, values in %{ci}", ["metric", "SEGs"] + mms, cells, foot)
        if pr.chance is not None:
            ch, lo, hi, mc, adj = pr.chance_arrays()
            cells = [[m] + [f"{_fmt(ch[i, k, g], np.nan, np.nan, False)}{_mc(mc[i, k, g])} "
                            f"[{_pct(lo[i, k, g]) if np.isfinite(lo[i, k, g]) else '-'}, "
                            f"{_pct(hi[i, k, g]) if np.isfinite(hi[i, k, g]) else '-'}] -> "
                            f"{_fmt(adj[i, k, g], np.nan, np.nan, False)}" for k in kk]
                     for i, m in enumerate(result.metrics)]
            block(f"protocol={name}: chance level +-Monte-Carlo error [{level} band] -> chance-adjusted value, "
                  f"in % ({pr.chance.n_perm} permutations; null: {NULL_DESCRIPTION})", ["metric"] + mms, cells)
    return "\n".join(lines)


def compare_text(frame: pd.DataFrame, meta_metrics=("rank", "sep", "delta"), subset: str = "Avg",
                 min_segs_ci: int | None = None) -> str:
    """One line per (protocol, meta-metric) of a :func:`analysis.compare.compare_metrics` frame;
    with ``min_segs_ci``, a difference of fewer SEGs says ``[n/a: ...]`` where its CI would be."""
    f = frame[(frame["subset"] == subset) & frame["meta_metric"].isin(meta_metrics)]
    lines = []
    for r in f.itertuples(index=False):
        ci = "" if np.isnan(r.ci_low) else f" [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
        if not ci and min_segs_ci is not None and r.n_segs < min_segs_ci:
            ci = f" [n/a: no CI from fewer than {min_segs_ci} SEGs (min_segs_ci)]"
        lines.append(f"{r.protocol} {r.meta_metric} {r.subset}: {r.metric_a} - {r.metric_b} = {100 * r.diff:+.1f}{ci} "
                     f"points, p = {r.p_value:.4g} (n = {r.n_segs} SEGs)")
    return "\n".join(lines) + ("\n" if lines else "")
