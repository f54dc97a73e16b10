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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data.result_sets import atomic_write_text, input_fingerprints, published_path, result_set
from seg_data.results import ANALYSIS_FILE, PER_SEG_COLUMNS, AnalysisRecord

from ..chance import NULL_DESCRIPTION
from ..pipeline import AnalysisResult
from ..units import DELTA_NOTE, delta_above_100, pct_header
from ..units import pct as _pct  # one rounding rule for every printed percentage
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


@dataclass(frozen=True)
class TextTable:
    """A fixed-width text table as the terminal summary prints it: a title line, the header,
    one line per row (columns padded to their widest cell), an optional foot, a blank line."""

    title: str
    header: list[str]
    rows: list[list[str]]
    foot: str = ""

    def lines(self) -> list[str]:
        widths = [max(len(str(r[j])) for r in [self.header] + self.rows) for j in range(len(self.header))]
        out = [self.title, "  ".join(h.ljust(w) for h, w in zip(self.header, widths, strict=True))]
        out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in self.rows]
        return out + ([self.foot] if self.foot else []) + [""]


@dataclass(frozen=True)
class SummaryCells:
    """The cells one protocol's summary shows: metric rows ``i``, meta-metric columns ``kk``
    (indices into ``result.meta_metrics``), subset column ``g`` of the protocol's arrays."""

    result: AnalysisResult
    name: str
    kk: list[int]
    g: int

    @property
    def pr(self):
        return self.result.protocols[self.name]

    def n_segs(self) -> list[int]:
        """SEGs behind each metric's shown values (the most over the shown meta-metrics)."""
        return [int(self.pr.n_segs[i, self.kk, self.g].max()) if self.kk else 0 for i in range(len(self.result.metrics))]

    def too_few(self, i: int, k: int) -> bool:
        """The cell's CI is withheld: fewer SEGs than ``min_segs_ci``."""
        return bool(self.pr.n_segs[i, k, self.g] < self.result.min_segs_ci)

    def value_text(self, i: int, k: int, with_ci: bool) -> str:
        pr, g = self.pr, self.g
        return _fmt(pr.estimates[i, k, g], pr.ci_low[i, k, g], pr.ci_high[i, k, g], with_ci, self.too_few(i, k))

    def any_withheld(self) -> bool:
        return any(self.too_few(i, k) and not np.isnan(self.pr.estimates[i, k, self.g])
                   for i in range(len(self.result.metrics)) for k in self.kk)

    def delta_numbers(self, with_ci: bool) -> list[float]:
        """The printed delta_m values (and CI bounds, when shown), as fractions."""
        if "delta" not in self.result.meta_metrics:
            return []
        k = self.result.meta_metrics.index("delta")
        if k not in self.kk:
            return []
        arrays = (self.pr.estimates, self.pr.ci_low, self.pr.ci_high) if with_ci else (self.pr.estimates,)
        return [float(v) for a in arrays for v in a[:, k, self.g]]

    def chance_text(self, arrays, i: int, k: int) -> str:
        """``chance +-mc [low, high] -> adjusted`` of one cell, in %."""
        ch, lo, hi, mc, adj = (a[i, k, self.g] for a in arrays)
        return (f"{_fmt(ch, np.nan, np.nan, False)}{_mc(mc)} [{_pct(lo) if np.isfinite(lo) else '-'}, "
                f"{_pct(hi) if np.isfinite(hi) else '-'}] -> {_fmt(adj, np.nan, np.nan, False)}")


def _value_table(c: SummaryCells, mms: list[str], subset: str) -> TextTable:
    """One protocol's values (with CIs when bootstrapped), the reason for any withheld CI and,
    when a printed delta_m exceeds 100 %, why it can (:data:`analysis.units.DELTA_NOTE`)."""
    r = c.result
    with_ci = r.bootstrap > 0
    ci = f", {r.confidence * 100:g}% CI over {r.bootstrap} SEG resamples" if with_ci else ""
    n = c.n_segs()
    rows = [[m, str(n[i])] + [c.value_text(i, k, with_ci) for k in c.kk] for i, m in enumerate(r.metrics)]
    feet = []
    if with_ci and c.any_withheld():
        feet.append(f"n/a: no CI for a value from fewer than {r.min_segs_ci} SEGs (min_segs_ci={r.min_segs_ci})")
    if delta_above_100(c.delta_numbers(with_ci)):
        feet.append(DELTA_NOTE)
    return TextTable(f"protocol={c.name}: {seg_count_text(n, subset)}, values in %{ci}",
                     ["metric", "SEGs"] + [pct_header(m) for m in mms], rows, "\n".join(feet))


def _chance_table(c: SummaryCells, mms: list[str]) -> TextTable | None:
    """One protocol's chance levels and chance-adjusted values (None without chance levels)."""
    if c.pr.chance is None:
        return None
    arrays = c.pr.chance_arrays()
    rows = [[m] + [c.chance_text(arrays, i, k) for k in c.kk] for i, m in enumerate(c.result.metrics)]
    return TextTable(f"protocol={c.name}: chance level +-Monte-Carlo error [{c.result.confidence * 100:g}% band] -> "
                     f"chance-adjusted value, in % ({c.pr.chance.n_perm} permutations; null: {NULL_DESCRIPTION})",
                     ["metric"] + [pct_header(m) for m in mms], rows)


def summary_text(result: AnalysisResult, meta_metrics=("rank", "sep", "delta"), subset: str = "Avg") -> str:
    """A small fixed-width table per protocol: one line per metric, ``subset`` values in %
    (:mod:`analysis.units`: the unit in every column header).

    The header and the column ``SEGs`` give the SEGs behind each metric's values (those where
    the shown meta-metrics are defined, not the dataset's count). A CI withheld because a cell has
    fewer than ``min_segs_ci`` SEGs shows as ``[n/a]``, with the reason under the table; a printed
    delta_m (value or CI bound) above 100 % gets :data:`analysis.units.DELTA_NOTE` under the table.

    With chance levels, a second table per protocol gives each cell's chance level with its
    Monte-Carlo error, its band and the chance-adjusted value ``(v - chance) / (max - chance)``
    (in %; "-" for delta, unbounded), and names the null (:data:`analysis.chance.NULL_DESCRIPTION`).
    """
    mms = [m for m in meta_metrics if m in result.meta_metrics]
    kk = [result.meta_metrics.index(mm) for mm in mms]
    lines: list[str] = []
    for name, pr in result.protocols.items():
        cells = SummaryCells(result, name, kk, list(pr.group_names).index(subset))
        for table in (_value_table(cells, mms, subset), _chance_table(cells, mms)):
            if table is not None:
                lines += table.lines()
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
