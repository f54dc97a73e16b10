"""The verdict: where each metric under evaluation stands, and how it compares with the references.

For every metric whose role (:data:`seg_data.results.ROLES`) is ``metric`` -- not a control,
not a published reference -- and every meta-metric of the verdict (default rank, sep, delta on
subset ``Avg``), the verdict table gives

* its **place**: position among all analysed metrics by the dataset value, and its Holm
  significance group (:func:`analysis.compare.rank_metrics`, every pair tested, Holm over all
  pairs of that meta-metric);
* its **paired comparison** with every reference metric and every control
  (:func:`analysis.compare.pairwise_comparisons`: difference, bootstrap CI from the shared SEG
  resamples, sign-flip permutation p-value on the per-SEG differences), Holm-adjusted within
  the family of one metric's comparisons on one (protocol, meta-metric, subset) cell.

Nothing is recomputed here: the statistics are those of :mod:`analysis.compare`, on the
:class:`~analysis.pipeline.AnalysisResult` of the analysis. ``ts2 analyze`` prints
:meth:`Verdict.summary_lines` and writes ``verdict.csv``; ``ts2 report`` renders the table.

**Direction check.** A metric whose rank_m CI (subset Avg) lies wholly below 0 orders images
reliably the wrong way round: its scores look lower-is-better. :attr:`Verdict.reversed` names
such metrics, and the summary and the report say ``lower_is_better=[NAME]``.

>>> import numpy as np, pandas as pd
>>> from analysis.pipeline import analyze
>>> rng = np.random.default_rng(0)
>>> rows = [(str(s), str(lv), f"{s}-{lv}-{j}") for s in range(20) for lv in range(3) for j in range(2)]
>>> df = pd.DataFrame(rows, columns=["seg_id", "node", "file_name"])
>>> lv = df["node"].astype(float).to_numpy()
>>> df["mine"] = -lv + rng.normal(0, 1.0, len(df))
>>> df["ref"] = -lv + rng.normal(0, 0.3, len(df))
>>> v = verdict(analyze(df, protocols=["graph"], bootstrap=200), {"ref": "reference"}, n_permutations=999)
>>> v.table.loc[v.table["meta_metric"] == "rank", ["metric", "against", "significant", "direction"]].to_string(index=False)
'metric against  significant direction\\n  mine     ref         True     below'
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .compare import pairwise_comparisons, rank_metrics
from .pipeline import AnalysisResult
from .stats import ALPHA, holm
from .units import pct  # the one rounding rule of every printed percentage (re-exported)

__all__ = ["VERDICT_COLUMNS", "Verdict", "verdict", "reversed_metrics", "summary_line", "pct"]

log = logging.getLogger(__name__)

VERDICT_COLUMNS = ["protocol", "meta_metric", "subset", "metric", "value", "ci_low", "ci_high", "position",
                   "n_metrics", "group", "n_groups", "against", "against_role", "against_value", "diff",
                   "diff_ci_low", "diff_ci_high", "p_value", "p_holm", "significant", "direction", "n_segs"]


@dataclass(frozen=True)
class Verdict:
    """The verdict of an analysis (see the module docstring).

    Attributes
    ----------
    table : DataFrame
        :data:`VERDICT_COLUMNS`, one row per (protocol, meta-metric, metric under evaluation,
        comparator); the place columns (``value`` ... ``n_groups``) repeat on the rows of one
        metric and cell. ``against_role`` is ``reference`` or ``control``; ``direction`` is
        ``above``/``below`` (significant after Holm at ``alpha``), ``not different``, or ``n/a``
        (no test: the value is undefined on one side, e.g. delta_m of a constant control). A metric
        with no reference and no control gets one row with empty comparison columns.
    ranking, pairs : DataFrame
        The :func:`analysis.compare.rank_metrics` outputs the places come from.
    alpha : float
        Family-wise error rate of the Holm corrections.
    reversed : tuple of str
        Metrics under evaluation whose rank_m CI (subset Avg) lies wholly below 0 under some
        protocol (:func:`reversed_metrics`).
    lower_is_better : tuple of str
        Metrics that were analysed as lower-is-better (their scores negated).
    """

    table: pd.DataFrame
    ranking: pd.DataFrame
    pairs: pd.DataFrame
    alpha: float
    reversed: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()

    @property
    def metrics(self) -> list[str]:
        """The metrics under evaluation, in table order."""
        return list(dict.fromkeys(self.table["metric"]))

    def summary_lines(self, protocol: str | None = None) -> list[str]:
        """One line per metric under evaluation (:func:`summary_line`), for ``protocol`` (default
        every protocol of the table, prefixed by its name when there are several)."""
        protos = list(dict.fromkeys(self.table["protocol"])) if protocol is None else [protocol]
        # The rows of each (protocol, metric) at once, in table order, instead of two full-table
        # masks per line.
        at = self.table.groupby(["protocol", "metric"], sort=False).indices if len(self.table) else {}
        none = np.zeros(0, dtype=int)
        out = []
        for p in protos:
            for m in self.metrics:
                line = summary_line(self.table.iloc[at.get((p, m), none)], self.alpha)
                if m in self.reversed:
                    line += "; " + direction_hint(m, m in self.lower_is_better)
                out.append(f"[{p}] {line}" if len(protos) > 1 else line)
        return out


def direction_hint(metric: str, listed: bool) -> str:
    """The sentence of the direction check for one metric (``listed``: already lower-is-better)."""
    if listed:
        return (f"WARNING: rank_m CI wholly below 0 although {metric} was analysed as lower-is-better: "
                f"its scores look higher-is-better (drop it from lower_is_better=[{metric}])")
    return (f"WARNING: rank_m CI wholly below 0: its scores look lower-is-better; "
            f"analyse it with lower_is_better=[{metric}]")


def reversed_metrics(result: AnalysisResult, metrics: Sequence[str], subset: str = "Avg") -> tuple[str, ...]:
    """Metrics among ``metrics`` whose rank_m CI on ``subset`` lies wholly below 0 under some protocol.

    A CI that is NaN (no bootstrap, too few SEGs) never flags a metric: without an interval
    there is no evidence of a reversed direction.
    """
    if "rank" not in result.meta_metrics:
        return ()
    k = result.meta_metrics.index("rank")
    out = []
    for m in metrics:
        i = result.metrics.index(m)
        for pr in result.protocols.values():
            if subset not in pr.group_names:
                continue
            hi = pr.ci_high[i, k, pr.group_names.index(subset)]
            if np.isfinite(hi) and hi < 0:
                out.append(m)
                break
    return tuple(out)


def verdict(result: AnalysisResult, roles: Mapping[str, str], meta_metrics: Sequence[str] = ("rank", "sep", "delta"),
            subset: str = "Avg", alpha: float = ALPHA, n_permutations: int = 9999, seed: int = 0,
            ranking: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> Verdict:
    """The verdict table of ``result`` (see the module docstring).

    Parameters
    ----------
    result : AnalysisResult
        An analysis with bootstrap replicates (without them the CI columns are NaN).
    roles : mapping
        Metric -> role (``metric``, ``control``, ``reference``); a metric absent is ``metric``.
    meta_metrics : sequence of str
        Meta-metrics of the verdict; those not computed in ``result`` are left out.
    subset : str
        Subset of the places and comparisons.
    alpha : float
        Family-wise error rate of both Holm corrections (groups and comparisons).
    n_permutations, seed : int
        Of the sign-flip permutation tests (:func:`analysis.compare.pairwise_comparisons`).
    ranking : (DataFrame, DataFrame), optional
        Already computed :func:`analysis.compare.rank_metrics` outputs (``ranking``, ``pairs``)
        covering the protocols and meta-metrics (``ts2 analyze`` computes them for
        ``ranking.csv``); missing cells are computed.

    Returns
    -------
    Verdict

    Raises
    ------
    ValueError
        ``alpha`` outside (0, 1); a role not among ``metric``, ``control``, ``reference``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"expected alpha in (0, 1), got {alpha!r}")
    from seg_data.results import check_role

    role = {m: check_role(roles.get(m, "metric"), f"role of {m!r}") for m in result.metrics}
    own = _with_role(result.metrics, role, "metric")
    comparators = _with_role(result.metrics, role, "reference") + _with_role(result.metrics, role, "control")
    mms = [mm for mm in meta_metrics if mm in result.meta_metrics]
    rk, pairs = (ranking if ranking is not None else (pd.DataFrame(), pd.DataFrame()))
    rk_parts, pair_parts, rows = [rk], [pairs], []
    for pname in result.protocols:
        for mm in mms:
            have = _ranking_cell(rk, pname, mm, subset)
            if not len(have) and len(result.metrics) >= 2:
                r, t = rank_metrics(result, mm, subset, protocol=pname, alpha=alpha, n_permutations=n_permutations,
                                    seed=seed)
                rk_parts.append(r)
                pair_parts.append(t)
                have = r
            rows += _cell_rows(result, pname, mm, subset, own, comparators, role, have, alpha, n_permutations, seed)
    table = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    rev = reversed_metrics(result, own, subset)
    for m in rev:
        log.warning("%s: %s", m, direction_hint(m, m in result.lower_is_better))
    ranking_all, pairs_all = _stacked(rk_parts), _stacked(pair_parts)
    return Verdict(table, ranking_all, pairs_all, float(alpha), rev,
                   tuple(m for m in own if m in result.lower_is_better))


def _with_role(metrics: Sequence[str], role: Mapping[str, str], which: str) -> list[str]:
    """The metrics of role ``which``, in the analysis' order."""
    return [m for m in metrics if role[m] == which]


def _ranking_cell(ranking: pd.DataFrame, pname: str, mm: str, subset: str) -> pd.DataFrame:
    """The rows of a :func:`analysis.compare.rank_metrics` table for one (protocol, meta-metric, subset) cell."""
    if not len(ranking):
        return ranking
    return ranking[(ranking["protocol"] == pname) & (ranking["meta_metric"] == mm) & (ranking["subset"] == subset)]


def _stacked(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The non-empty frames of ``parts`` one under the other (an empty frame when there is none)."""
    full = [p for p in parts if len(p)]
    return pd.concat(full, ignore_index=True) if full else pd.DataFrame()


def _cell_rows(result: AnalysisResult, pname: str, mm: str, subset: str, own: Sequence[str],
               comparators: Sequence[str], role: Mapping[str, str], ranking: pd.DataFrame, alpha: float,
               n_permutations: int, seed: int) -> list[tuple]:
    """The verdict rows of one (protocol, meta-metric, subset) cell."""
    pr = result.get(pname)
    k, g = result.meta_metrics.index(mm), pr.group_names.index(subset)
    standing = _Standing.of(ranking)
    tests = pairwise_comparisons(result, [(m, c) for m in own for c in comparators], mm, subset, pname,
                                 n_permutations, seed) if own and comparators else None
    by_metric: dict[str, list] = {}
    for r in tests.itertuples(index=False) if tests is not None else ():
        by_metric.setdefault(r.metric_a, []).append(r)
    rows = []
    for m in own:
        i = result.metrics.index(m)
        head = (pname, mm, subset, m, pr.estimates[i, k, g], pr.ci_low[i, k, g], pr.ci_high[i, k, g],
                standing.position(m), len(result.metrics), standing.group(m), standing.n_groups)
        if tests is None:
            rows.append(head + ("", "", np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, False, "", 0))
            continue
        rows += [head + tail for tail in _comparison_cells(by_metric.get(m, []), role, alpha)]
    return rows


@dataclass(frozen=True)
class _Standing:
    """Each metric's place and group in one cell's ranking (1 of 1 when the cell has no ranking).

    Plain dicts: per-metric frame lookups cost more than the rows."""

    positions: dict | None
    groups: dict | None
    n_groups: int

    @classmethod
    def of(cls, ranking: pd.DataFrame) -> _Standing:
        if not len(ranking):
            return cls(None, None, 1)
        return cls(dict(zip(ranking["metric"], ranking["position"], strict=True)),
                   dict(zip(ranking["metric"], ranking["group"], strict=True)), int(ranking["group"].max()))

    def position(self, m: str) -> int:
        return int(self.positions[m]) if self.positions is not None else 1

    def group(self, m: str) -> int:
        return int(self.groups[m]) if self.groups is not None else 1


def _comparison_cells(tests: Sequence, role: Mapping[str, str], alpha: float) -> list[tuple]:
    """The comparison columns of one metric's verdict rows, one per test against a reference or control,
    Holm-corrected over that metric's tests on the cell (every reference and control at once)."""
    p_holm = holm(np.array([r.p_value for r in tests], dtype=float))
    out = []
    for r, ph in zip(tests, p_holm, strict=True):
        sig = bool(np.isfinite(ph) and ph < alpha)
        # no test (a value undefined on either side, e.g. delta_m of a constant control): n/a
        direction = ("above" if r.diff > 0 else "below") if sig else ("not different" if np.isfinite(ph) else "n/a")
        out.append((r.metric_b, role[r.metric_b], r.value_b, r.diff, r.ci_low, r.ci_high, r.p_value,
                    float(ph), sig, direction, int(r.n_segs)))
    return out


#: What the verdict says, once, when no metric had a reference or a control to be compared with.
NOTHING_TO_COMPARE = ("no reference or control to compare with: the verdict gives each metric's value, place and "
                      "group only; score a control beside it (ts2.score(\"random\", ds), ts2 score "
                      "metric=random) or give reference=FILE for paired tests")


def _pct(v: float) -> str:
    return "n/a" if not np.isfinite(v) else pct(v)


def _names(rows: Sequence[Mapping]) -> str:
    return ", ".join(r["against"] for r in rows)


# How a comparison with a reference reads, by its direction, in the order the line says them.
_REFERENCE_WORDS = (("significantly below", "below"), ("significantly above", "above"),
                    ("not different from", "not different"))


def _meta_metric_phrase(mm: str, rows: Sequence[Mapping]) -> str:
    """One meta-metric's part of a :func:`summary_line`: value, interval, place and group, then the
    references the metric is below, above or not different from."""
    h = rows[0]
    ci = "" if not np.isfinite(h["ci_low"]) else f" [{_pct(h['ci_low'])}, {_pct(h['ci_high'])}]"
    txt = (f"{mm}_m {_pct(h['value'])}{ci}, place {int(h['position'])} of {int(h['n_metrics'])} "
           f"(group {int(h['group'])} of {int(h['n_groups'])})")
    refs = [r for r in rows if r["against_role"] == "reference"]
    said = []
    for word, key in _REFERENCE_WORDS:
        sel = [r for r in refs if r["direction"] == key]
        if sel:
            said.append(f"{word} {_names(sel)}")
    return txt + (", " + ", ".join(said) if said else "")


def _controls_phrase(ctrl: Sequence[Mapping]) -> str:
    """The controls' part of a :func:`summary_line` (empty without controls): above every one (where
    defined), or the controls the metric is not above."""
    if not ctrl:
        return ""
    not_above = [r for r in ctrl if r["direction"] not in ("above", "n/a")]
    if not not_above:
        return "; above every control" + ("" if all(r["direction"] != "n/a" for r in ctrl) else " where defined")
    # Two floors can look contradictory: a chance-adjusted value above 0 says the metric beats
    # a null that keeps its own ties; this floor is the scored control's value, the stricter one.
    return ("; not above control(s) " + ", ".join(f"{r['against']} ({r['meta_metric']})" for r in not_above)
            + " [floor: the scored control's own value, not the chance level]")


def summary_line(rows: pd.DataFrame, alpha: float) -> str:
    """The one-line verdict of one metric from its :class:`Verdict` table rows (one protocol).

    ``NAME: rank_m 46.7 [41.3, 52.2], 5th of 7 (group 3), significantly below clipscore,
    blip1_tifa, not different from alignscore; sep_m ...; above every control (Holm 0.05)``.
    """
    if not len(rows):
        return ""
    # A few dozen rows: plain records, not pandas masks (those cost milliseconds a line).
    recs = rows.to_dict("records")
    metric = recs[0]["metric"]
    by_mm: dict = {}  # meta-metric -> its rows, in order of first appearance
    for r in recs:
        by_mm.setdefault(r["meta_metric"], []).append(r)
    line = f"{metric}: " + "; ".join(_meta_metric_phrase(mm, d) for mm, d in by_mm.items())
    line += _controls_phrase([r for r in recs if r["against_role"] == "control"])
    if any(r["against"] != "" for r in recs):
        line += f" (Holm {alpha:g})"
    return line
