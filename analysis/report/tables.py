"""Paper-style tables (Table 2 layout): metrics as columns, meta-metric x subset rows, in %.

The best value of each row is bold (every tied best, after rounding to the printed precision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data.result_sets import atomic_write_text

from ..metametrics import PAPER_META_METRICS
from ..pipeline import AnalysisResult
from ..units import DELTA_NOTE, PERCENT, delta_above_100

__all__ = ["paper_table", "to_markdown", "to_latex", "write_tables", "seg_count_text", "seg_counts"]

_TEX_NAMES = {"rank": r"rank$_m$", "sep": r"sep$_m$", "delta": r"delta$_m$", "kendall": r"$\tau_b$",
              "pair_acc": "pair acc."}


def _long_frame(source: AnalysisResult | pd.DataFrame) -> pd.DataFrame:
    if isinstance(source, AnalysisResult):
        return source.metametrics_frame()
    need = {"metric", "protocol", "meta_metric", "subset", "value"}
    missing = sorted(need - set(source.columns))
    if missing:
        raise ValueError(f"expected a metametrics table with columns {sorted(need)}, missing {missing}")
    return source


def paper_table(source: AnalysisResult | pd.DataFrame, protocol: str | None = None,
                meta_metrics: Sequence[str] = PAPER_META_METRICS,
                labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Values in % with a ``(meta_metric, subset)`` row index and one column per metric.

    ``source`` is an :class:`AnalysisResult` or a long ``metametrics.csv`` frame; ``protocol``
    defaults to the first one present; ``labels`` renames metric columns. Metrics and subsets
    keep their order of appearance (``Avg`` first).
    """
    mm = _long_frame(source)
    protos = list(dict.fromkeys(mm["protocol"]))
    if protocol is None:
        if not protos:
            raise ValueError("expected at least one protocol in the metametrics table, got none")
        protocol = protos[0]
    elif protocol not in protos:
        raise ValueError(f"expected a protocol among {protos}, got {protocol!r}")
    d = mm[(mm["protocol"] == protocol) & mm["meta_metric"].isin(list(meta_metrics))]
    metrics = list(dict.fromkeys(d["metric"]))
    subsets = list(dict.fromkeys(d["subset"]))
    subsets = (["Avg"] if "Avg" in subsets else []) + [x for x in subsets if x != "Avg"]
    rows = [(mmn, sub) for mmn in meta_metrics for sub in subsets]
    wide = d.pivot_table(index=["meta_metric", "subset"], columns="metric", values="value", aggfunc="first",
                         dropna=False)
    table = wide.reindex(index=pd.MultiIndex.from_tuples(rows, names=["meta_metric", "subset"]), columns=metrics) * 100.0
    table = table.dropna(how="all")
    if labels:
        table.columns = [labels.get(c, c) for c in table.columns]
    table.columns.name = None
    return table


def seg_count_text(counts, subset: str = "Avg", note: str = " (per metric: column SEGs)") -> str:
    """``Avg over 12 SEGs`` (one count) or ``Avg over 1 to 164 SEGs (per metric: column SEGs)``.

    Examples
    --------
    >>> seg_count_text([12, 12]), seg_count_text([1, 164])
    ('Avg over 12 SEGs', 'Avg over 1 to 164 SEGs (per metric: column SEGs)')
    """
    c = sorted({int(x) for x in counts})
    if not c:
        return f"{subset} over 0 SEGs"
    if len(c) == 1:
        return f"{subset} over {c[0]} SEG{'s' if c[0] != 1 else ''}"
    return f"{subset} over {c[0]} to {c[-1]} SEGs{note}"


def seg_counts(source: AnalysisResult | pd.DataFrame, protocol: str, subset: str = "Avg",
               meta_metrics: Sequence[str] = PAPER_META_METRICS) -> dict[str, int]:
    """SEGs behind each metric's ``subset`` values under ``protocol`` (the most over ``meta_metrics``;
    0 when the table has no ``n_segs`` column)."""
    mm = _long_frame(source)
    if "n_segs" not in mm.columns:
        return {}
    d = mm[(mm["protocol"] == protocol) & (mm["subset"] == subset) & mm["meta_metric"].isin(list(meta_metrics))]
    return {str(m): int(v) for m, v in d.groupby("metric", sort=False)["n_segs"].max().items()}


def _cells(row: np.ndarray, decimals: int, bold: tuple[str, str]) -> list[str]:
    r = np.round(row.astype(float), decimals)
    best = np.nanmax(r) if np.any(~np.isnan(r)) else np.nan
    out = []
    for v in r:
        if np.isnan(v):
            out.append("-")
        else:
            s = f"{v:.{decimals}f}"
            out.append(f"{bold[0]}{s}{bold[1]}" if v == best else s)
    return out


def to_markdown(table: pd.DataFrame, decimals: int = 1) -> str:
    """GitHub markdown, best of each row bold."""
    head = "| | | " + " | ".join(table.columns) + " |"
    sep = "|---|---|" + "---:|" * len(table.columns)
    lines = [head, sep]
    last = None
    for (mm, sub), row in zip(table.index, table.to_numpy(), strict=True):
        label = mm if mm != last else ""
        last = mm
        lines.append(f"| {label} | {sub} | " + " | ".join(_cells(row, decimals, ("**", "**"))) + " |")
    return "\n".join(lines) + "\n"


def _tex_escape(s: str) -> str:
    return s.replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("%", r"\%").replace("&", r"\&").replace("#", r"\#")


def to_latex(table: pd.DataFrame, decimals: int = 1, caption: str | None = None) -> str:
    """A ``tabular`` (booktabs rules), best of each row in ``\\textbf``."""
    cols = "ll" + "r" * len(table.columns)
    lines = [r"\begin{tabular}{" + cols + "}", r"\toprule",
             " & & " + " & ".join(_tex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
    last = None
    for (mm, sub), row in zip(table.index, table.to_numpy(), strict=True):
        if last is not None and mm != last:
            lines.append(r"\midrule")
        label = _TEX_NAMES.get(mm, _tex_escape(mm)) if mm != last else ""
        last = mm
        lines.append(f"{label} & {_tex_escape(sub)} & " + " & ".join(_cells(row, decimals, (r"\textbf{", "}"))) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    body = "\n".join(lines) + "\n"
    if caption:
        body = "% " + caption.replace("\n", " ") + "\n" + body
    return body


def write_tables(source: AnalysisResult | pd.DataFrame, out_dir: str | Path, labels: Mapping[str, str] | None = None,
                 stem: str = "table", meta_metrics: Sequence[str] = PAPER_META_METRICS, decimals: int = 1) -> list[Path]:
    """``<stem>.md``, ``<stem>.tex`` and ``<stem>.csv`` in ``out_dir``, one block per protocol, values in % (the
    printed paper table: ``unit`` column ``%`` in the CSV, "values in %" in the captions, and the delta_m note
    of :mod:`analysis.units` when a delta_m value prints above 100).

    ``source``: an :class:`AnalysisResult` or a long ``metametrics.csv`` frame.
    """
    mm = _long_frame(source)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, tex, frames = [], [], []
    for name in dict.fromkeys(mm["protocol"]):
        t = paper_table(mm, name, meta_metrics, labels)
        counts = seg_counts(mm, name, meta_metrics=meta_metrics)
        segs = ""
        if counts:
            per = ", ".join(f"{(labels or {}).get(m, m)} {n}" for m, n in counts.items())
            segs = f"{seg_count_text(counts.values(), note='')}; SEGs per metric: {per}. "
        # the printed table's own delta_m values (its CSV has no CIs): the note where one reads above 100
        delta = " " + DELTA_NOTE if delta_above_100(mm.loc[(mm["protocol"] == name)
                                                          & (mm["meta_metric"] == "delta"), "value"]) else ""
        md.append(f"### protocol={name}\n\n{segs}Values in %; best of each row in bold.{delta}\n\n"
                  + to_markdown(t, decimals))
        tex.append(to_latex(t, decimals, caption=f"protocol={name}; {segs}values in %{delta}"))
        f = t.reset_index()
        f.insert(0, "protocol", name)
        f.insert(3, "unit", PERCENT)  # a CSV has no caption: the unit of every value in the row, said in the row
        frames.append(f)
    paths = [out / f"{stem}.md", out / f"{stem}.tex", out / f"{stem}.csv"]
    atomic_write_text(paths[0], "\n".join(md))
    atomic_write_text(paths[1], "\n".join(tex))
    csv = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    atomic_write_text(paths[2], csv.to_csv(index=False, float_format="%.4f"))
    return paths
