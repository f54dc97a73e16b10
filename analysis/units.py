"""The one unit convention of meta-metric values, and the note that explains delta_m above 100 %.

**Convention.** Meta-metric values (rank_m, sep_m, delta_m, Kendall's tau, pair accuracy, their
CIs, chance levels and differences) are *fractions* (``0.467``) in every file and Python object:
the CSV files (``metametrics.csv``, ``per_seg.csv``, ``verdict.csv``, ...), DataFrames,
dataclasses, ``Analysis.metametrics`` and ``Analysis.compare``. They are *percent* (``46.7``),
rounded to 0.1, only where a person reads them: the terminal summary, the HTML report, the
notebook table and the SEG explorer, each with the unit in its header or caption. The paper-style
``table.md``/``.tex``/``.csv`` are such printed tables and say "values in %" in their caption.

**delta_m above 100 %.** delta_m (paper eq. 5) is the mean gap between the mean scores of
adjacent error levels divided by the standard deviation of the metric's scores over all images
(``delta_norm``). It is a gap measured in standard deviations, not a share of a maximum: 100 %
means adjacent levels lie one standard deviation apart on average, and a metric whose scores
spread mostly *between* error levels reads above it (the paper's Table 2 has values up to 110.6).

Examples
--------
>>> pct(0.4674), pct(-0.00001), pct_header("rank_m")
('46.7', '0.0', 'rank_m (%)')
>>> delta_above_100([0.93, 1.065]), delta_above_100([0.93, float("nan")])
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["UNIT_CONVENTION", "DELTA_NOTE", "PERCENT", "pct", "pct_or_blank", "pct_header", "delta_above_100", "delta_numbers"]

#: The unit of every printed meta-metric value.
PERCENT = "%"

#: The convention in one sentence, for captions of printed tables.
UNIT_CONVENTION = ("values in % (fractions x 100; files and Python objects keep fractions: 0.467 in "
                   "metametrics.csv is 46.7 here)")

#: Why a printed delta_m can exceed 100 % (shown wherever one does).
DELTA_NOTE = ("delta_m can exceed 100 %: it is the mean gap between the mean scores of adjacent error "
              "levels divided by the standard deviation of the metric's scores over all images (paper eq. 5), "
              "a gap in standard deviations rather than a share of a maximum; above 100 % the levels lie more "
              "than one standard deviation apart on average.")


def pct(v: float) -> str:
    """``0.1234`` -> ``"12.3"``: the one rounding rule of every printed percentage; never ``"-0.0"``."""
    x = round(100 * float(v), 1)
    return f"{x + 0.0 if x != 0 else 0.0:.1f}"


def pct_or_blank(v: float | None) -> str:
    """:func:`pct`, or ``""`` for a missing or non-finite value (a blank table cell)."""
    if v is None or not np.isfinite(v):
        return ""
    return pct(v)


def pct_header(name: str) -> str:
    """A printed column header with its unit: ``"rank_m"`` -> ``"rank_m (%)"``."""
    return f"{name} ({PERCENT})"


def delta_above_100(values: Iterable[float]) -> bool:
    """Whether any finite delta_m number (a value or a CI bound, as a fraction) is above 1, i.e.
    printed above 100 %: the condition for showing :data:`DELTA_NOTE` under a printed table."""
    arr = np.asarray(list(values), dtype=float)
    return bool(np.any(arr[np.isfinite(arr)] > 1.0))


def delta_numbers(frame, columns: Iterable[str] = ("value", "ci_low", "ci_high")) -> list[float]:
    """The delta_m numbers (fractions) of a long table with a ``meta_metric`` column (the
    verdict table, ``metametrics.csv``): its ``columns`` on the ``delta`` rows, those present."""
    if not len(frame) or "meta_metric" not in frame.columns:
        return []
    d = frame[frame["meta_metric"] == "delta"]
    return [float(v) for c in columns if c in d.columns for v in d[c]]
