"""The report's Table-2-style meta-metric table as HTML (:func:`metametrics_html`).

One protocol's rows of ``metametrics.csv``: metrics as columns (controls marked and shaded),
meta-metric x subset rows, values in % (:mod:`analysis.units`) with the CI below and, when the
columns ``chance``/``adjusted`` are present, the chance level and the chance-adjusted value.
A :class:`MetaMetricTable` knows the table's columns and what its cells may need explaining;
a :class:`Footnotes` collects what the cells actually used, so that only those footnotes print.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..chance import NULL_DESCRIPTION
from ..units import DELTA_NOTE, delta_above_100, pct_or_blank

__all__ = ["metametrics_html", "MetaMetricTable", "Footnotes"]

_ROLE_TAGS = {"control": "<br><small>control</small>", "reference": "<br><small>reference</small>"}


def _first(r):
    """A ``.loc`` hit as one row (a duplicated key gives a frame: its first row)."""
    return r.iloc[0] if isinstance(r, pd.DataFrame) else r


def _printed_numbers(recs) -> list[float]:
    """Every value and CI bound of a row's cells (absent ones left out), as fractions."""
    return [float(r[c]) for r in recs if r is not None for c in ("value", "ci_low", "ci_high")
            if c in r.index and _finite(r[c])]


def _finite(v) -> bool:
    return v is not None and bool(np.isfinite(float(v)))


@dataclass
class Footnotes:
    """What the table's cells needed explaining, gathered while they are drawn.

    Attributes
    ----------
    blank : set of str
        Labels of metrics with an undefined (blank) cell.
    withheld : bool
        Some value has no CI because too few SEGs were behind it (``min_segs_ci``).
    chance_shown : bool
        Some cell shows a chance level.
    delta_above_100 : bool
        Some delta_m value or CI bound prints above 100 % (:data:`analysis.units.DELTA_NOTE`).
    """

    blank: set[str] = field(default_factory=set)
    withheld: bool = False
    chance_shown: bool = False
    delta_above_100: bool = False

    def html(self, random_ctrl: str | None) -> str:
        """The footnotes under the table, in the order of their marks (*, dagger, double dagger, delta)."""
        foot = ""
        if self.blank:
            foot = ("<p class='foot'><sup>*</sup> Blank: the value is undefined for "
                    + html.escape(", ".join(sorted(self.blank)))
                    + " (e.g. delta_m of a metric whose scores do not vary within the SEGs: there is no spread to "
                    "normalise the gap by; such SEGs are left out, and a cell with none left is blank).</p>")
        if self.withheld:
            foot += ("<p class='foot'><sup>&dagger;</sup> n/a: no confidence interval for a value from fewer SEGs "
                     "than <code>min_segs_ci</code> (default 10): a bootstrap over so few SEGs gives intervals of no "
                     "meaning (zero width with one SEG).</p>")
        if self.chance_shown:
            foot += (f"<p class='foot'><sup>&Dagger;</sup> chance: the expected value under the null &ldquo;"
                     f"{html.escape(NULL_DESCRIPTION)}&rdquo;, &plusmn; its Monte-Carlo error (points; 0 where the "
                     "expectation is exact); a discrete "
                     "metric keeps its per-SEG ties, so its chance level can sit below what a random metric with the "
                     "same overall score distribution reads"
                     + ("; <i>random</i>: the scored random control's value in that row" if random_ctrl else "")
                     + "; adj.: (value &minus; chance) / (max &minus; chance).</p>")
        if self.delta_above_100:
            foot += f"<p class='foot'>{html.escape(DELTA_NOTE)}</p>"
        return foot


class MetaMetricTable:
    """One protocol's meta-metric table: its columns (metrics), rows (meta-metric x subset) and cells.

    Parameters
    ----------
    mm : DataFrame
        ``metametrics.csv`` rows (values as fractions); those of ``protocol`` are drawn.
    labels, roles : mapping
        Metric -> shown name; metric -> role (controls are shaded and never "best").
    """

    def __init__(self, mm: pd.DataFrame, protocol: str, labels: Mapping[str, str] | None = None,
                 roles: Mapping[str, str] | None = None):
        self.labels, self.roles = dict(labels or {}), dict(roles or {})
        d = mm[mm["protocol"] == protocol]
        self.metrics = list(dict.fromkeys(d["metric"]))
        self.controls = {m for m in self.metrics if self.roles.get(m) == "control"}
        self.meta_metrics = list(dict.fromkeys(d["meta_metric"]))
        subsets = list(dict.fromkeys(d["subset"]))
        self.subsets = (["Avg"] if "Avg" in subsets else []) + [s for s in subsets if s != "Avg"]
        self.index = d.set_index(["meta_metric", "subset", "metric"])
        self.has_chance = {"chance", "adjusted"} <= set(d.columns)
        # The chance level keeps each metric's own per-SEG ties; a scored `random` control is another
        # bar (a random metric with a discrete metric's overall distribution can read higher): show it beside.
        self.random_ctrl = "random" if "random" in self.metrics else None
        # With a bootstrap, a value without an interval had too few SEGs for one (min_segs_ci): say so.
        self.has_ci = "ci_low" in d.columns and bool(np.isfinite(pd.to_numeric(d["ci_low"], errors="coerce")).any())
        self.notes = Footnotes()

    def label(self, m: str) -> str:
        return self.labels.get(m, m)

    def _cls(self, m: str) -> str:
        return " class=ctrl" if m in self.controls else ""

    def header(self) -> str:
        """The header row; the unit of every value is stated here, once for the table."""
        heads = "".join(f"<th{self._cls(m)}>{html.escape(self.label(m))}"
                        f"{_ROLE_TAGS.get(self.roles.get(m, 'metric'), '')}</th>" for m in self.metrics)
        return f"<tr><th>meta-metric (values in %)</th><th>subset</th>{heads}</tr>"

    def _lookup(self, key: tuple):
        try:
            return _first(self.index.loc[key])
        except KeyError:
            return None

    def row(self, k: str, s: str) -> str:
        """The row of meta-metric ``k`` on subset ``s`` ('' when no metric has a value there)."""
        recs = {m: self._lookup((k, s, m)) for m in self.metrics}
        values = {m: float(r["value"]) for m, r in recs.items() if r is not None and _finite(r["value"])}
        if not values:
            return ""
        if k == "delta" and delta_above_100(_printed_numbers(recs.values())):
            self.notes.delta_above_100 = True
        # Best after rounding to the printed 0.1, like table.md (printed ties all bold); a control is never "best".
        own = [round(100 * v, 1) for m, v in values.items() if m not in self.controls]
        best = max(own) if own else None
        cells = "".join(self.cell(k, s, m, recs[m], best) for m in self.metrics)
        return f"<tr><td>{html.escape(k)}</td><td>{html.escape(s)}</td>{cells}</tr>"

    def cell(self, k: str, s: str, m: str, r, best: float | None) -> str:
        """One metric's cell: the value (bold when best), its CI or why none, its chance level."""
        if r is None or not _finite(r["value"]):
            self.notes.blank.add(self.label(m))
            return f"<td{self._cls(m)}>&nbsp;<sup>*</sup></td>"
        v = float(r["value"])
        txt = pct_or_blank(v)
        if m not in self.controls and round(100 * v, 1) == best:
            txt = f"<b>{txt}</b>"
        txt += self._interval(r)
        if self.has_chance and _finite(r["chance"]):
            random_key = (k, s, self.random_ctrl) if self.random_ctrl not in (None, m) else None
            txt += self._chance(r, random_key)
            self.notes.chance_shown = True
        return f"<td{self._cls(m)}>{txt}</td>"

    def _interval(self, r) -> str:
        """``[lo, hi]`` under the value, or, with a bootstrap, why there is none (too few SEGs)."""
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if _finite(lo) and _finite(hi):
            return f"<br><small>[{pct_or_blank(float(lo))}, {pct_or_blank(float(hi))}]</small>"
        if not self.has_ci:
            return ""
        n = r.get("n_segs")
        seg_text = f"{int(n)} SEG{'s' if int(n) != 1 else ''}" if _finite(n) else "too few SEGs"
        self.notes.withheld = True
        return f"<br><small class=na>[n/a: {seg_text}]<sup>&dagger;</sup></small>"

    def _chance(self, r, random_key: tuple | None) -> str:
        """The chance line: chance level +- its Monte-Carlo error, the scored random control's value
        (``random_key``: ``(meta_metric, subset, random control)``, not in the control's own cell)
        and the chance-adjusted value."""
        mc = float(r["chance_mc_error"]) if "chance_mc_error" in r.index else float("nan")
        err = f" &plusmn;{100 * mc:.2f}" if np.isfinite(mc) else ""
        rnd = ""
        if random_key is not None and random_key in self.index.index:
            rv = float(_first(self.index.loc[random_key])["value"])
            rnd = f"; random {pct_or_blank(rv)}" if np.isfinite(rv) else ""
        # delta has no maximum, so no chance-adjusted value: no "adj." label without a number
        adj = float(r["adjusted"])
        return (f"<br><small class=chance>chance<sup>&Dagger;</sup> {pct_or_blank(float(r['chance']))}{err}"
                f"{rnd}" + (f"; adj. {pct_or_blank(adj)}" if np.isfinite(adj) else "") + "</small>")

    def html(self) -> str:
        rows = [self.header()] + [self.row(k, s) for k in self.meta_metrics for s in self.subsets]
        return "<table class='mm'>" + "".join(rows) + "</table>" + self.notes.html(self.random_ctrl)


def metametrics_html(mm: pd.DataFrame, protocol: str, labels: Mapping[str, str] | None = None,
                     roles: Mapping[str, str] | None = None) -> str:
    """The Table-2-style table of one protocol as HTML: metrics as columns (controls marked and
    shaded), meta-metric x subset rows, values in % (unit in the header) with the CI below, and,
    when the columns ``chance``/``adjusted`` are present, the chance level and the
    chance-adjusted value; the best non-control value of each row in bold. A blank cell is an
    undefined value (marked with a footnote); a delta_m above 100 % gets the note that explains
    it (:data:`analysis.units.DELTA_NOTE`)."""
    return MetaMetricTable(mm, protocol, labels, roles).html()
