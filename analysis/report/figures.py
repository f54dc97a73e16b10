"""The report's figures and its machine-readable Pareto table, chosen by metric role.

* ``pareto``: one figure per meta-metric against FLOPs per image, when at least two non-control
  metrics have a cost; the frontier is computed over the non-control metrics only (:func:`pareto_table`, written as ``pareto.csv``); controls are
  drawn grey with a dashed floor at the best control's value.
* ``histograms``: the metrics of interest beside the reference each agrees with most (every
  metric when there is no reference), controls marked.
* ``heatmaps``: for each metric of interest, its best and worst SEGs by its own per-SEG rank_m;
  the title names the metric.
* ``scatter``: per-SEG rank_m of the first metric of interest against the metric it agrees with
  most (a reference when there is one, else another non-control metric; never a control: with
  no such metric there is no scatter, and the report says so).

This module never imports torch.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from .merged import MergedResults

__all__ = ["FIGURE_KINDS", "ReportFigure", "agreement", "best_worst_segs", "make_figures", "pareto_table"]

log = logging.getLogger(__name__)

FIGURE_KINDS = ("pareto", "histograms", "heatmaps", "scatter")
# Heatmaps for at most this many metrics of interest (two figures each): a 19-metric
# reproduction would otherwise draw 38 of them.
MAX_HEATMAP_METRICS = 6


@dataclass(frozen=True)
class ReportFigure:
    """A written figure: file and caption."""

    path: Path
    caption: str
    section: str


SAFE_NAME_MAX = 40  # characters of a name kept in a figure's file name (a 300-character SEG id: ENAMETOOLONG)


def _safe(s: str) -> str:
    """A name as part of a file name: letters, digits, ``_.-`` only, at most :data:`SAFE_NAME_MAX`
    of them; a name that had to be changed gets a short hash of itself, so two names that sanitise
    alike (``a/b`` and ``a_b``) never share a file.

    Examples
    --------
    >>> _safe("clipscore"), _safe("a_b"), _safe("a/b")
    ('clipscore', 'a_b', 'a_b-3ec69c85')
    """
    text = str(s)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
    if safe == text and len(safe) <= SAFE_NAME_MAX:
        return safe
    import hashlib

    return f"{safe[:SAFE_NAME_MAX]}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def pareto_table(metametrics: pd.DataFrame, flops: Mapping[str, float], roles: Mapping[str, str]) -> pd.DataFrame:
    """Pareto membership of every metric with a cost, per protocol, meta-metric and subset.

    A metric is on the frontier when no other non-control metric is at most as costly and at
    least as good, one of them strictly (:func:`analysis.pareto.pareto_mask`). Controls never
    are: they are left out of the comparison (``on_frontier`` False, ``why`` "control").

    Returns
    -------
    DataFrame
        ``protocol, meta_metric, subset, metric, role, flops, value, on_frontier, why``; ``why``
        is ``control``, ``no value`` (undefined meta-metric) or empty.
    """
    from ..pareto import pareto_mask

    cols = ["protocol", "meta_metric", "subset", "metric", "role", "flops", "value", "on_frontier", "why"]
    d = metametrics.assign(flops=metametrics["metric"].map(flops)).dropna(subset=["flops"])
    rows = []
    for (proto, mm, sub), g in d.groupby(["protocol", "meta_metric", "subset"], sort=False):
        role = g["metric"].map(lambda m: roles.get(m, "metric")).to_numpy()
        val = g["value"].to_numpy(float)
        ok = (role != "control") & np.isfinite(val)
        front = np.zeros(len(g), bool)
        if ok.any():
            front[ok] = pareto_mask(val[ok], g["flops"].to_numpy(float)[ok])
        for i, (m, f) in enumerate(zip(g["metric"], g["flops"], strict=True)):
            why = "control" if role[i] == "control" else ("" if np.isfinite(val[i]) else "no value")
            rows.append((proto, mm, sub, m, role[i], float(f), val[i], bool(front[i]), why))
    return pd.DataFrame(rows, columns=cols)


def agreement(per_seg: pd.DataFrame, metric: str, others: Iterable[str], protocol: str,
              meta_metric: str = "rank") -> pd.Series:
    """Spearman correlation of ``metric``'s per-SEG values with each of ``others`` (SEGs where
    both are defined), sorted from most to least agreeing; NaN when fewer than 3 SEGs are shared
    or one side is constant."""
    from scipy.stats import spearmanr

    d = per_seg[(per_seg["protocol"] == protocol) & (per_seg["meta_metric"] == meta_metric)]
    wide = d.pivot_table(index="seg_id", columns="metric", values="value", aggfunc="first")
    out = {}
    for o in others:
        if o == metric or metric not in wide or o not in wide:
            continue
        w = wide[[metric, o]].dropna()
        ok = len(w) >= 3 and w[metric].nunique() > 1 and w[o].nunique() > 1
        out[o] = float(spearmanr(w[metric], w[o]).statistic) if ok else np.nan
    return pd.Series(out, dtype=float).sort_values(ascending=False, na_position="last", kind="stable")


def best_worst_segs(per_seg: pd.DataFrame, metric: str, protocol: str, k: int,
                    eligible: Iterable[str] | None = None) -> tuple[list[str], list[str], pd.Series]:
    """Best and worst ``k`` SEGs of one metric by its per-SEG rank_m (only ``eligible`` SEGs;
    ties keep SEG order); also the per-SEG values."""
    d = per_seg[(per_seg["meta_metric"] == "rank") & (per_seg["protocol"] == protocol) & (per_seg["metric"] == metric)]
    if eligible is not None:
        d = d[d["seg_id"].astype(str).isin(set(eligible))]
    val = d.set_index(d["seg_id"].astype(str))["value"].astype(float).dropna()
    if val.empty:
        return [], [], val
    order = val.sort_values(kind="stable")
    k = min(k, len(order) // 2 if len(order) > 1 else 1)
    return list(order.index[::-1][:k]), list(order.index[:k]), val


def _label(labels: Mapping[str, str], merged: MergedResults, m: str) -> str:
    base = labels.get(m, m)
    return f"{base} (control)" if merged.role(m) == "control" else base


def _chance(mm: pd.DataFrame) -> pd.DataFrame | None:
    need = {"chance", "chance_low", "chance_high"}
    return mm if mm is not None and need <= set(mm.columns) else None


def make_figures(merged: MergedResults, out_dir: str | Path, protocol: str | None = None,
                 labels: Mapping[str, str] | None = None, groups: Mapping[str, str] | None = None,
                 scatter: Sequence[str] | None = None, n_heatmaps: int = 2, max_hist_per_figure: int = 9,
                 prompts: Mapping[str, str] | None = None, kinds: Sequence[str] = FIGURE_KINDS,
                 pareto: Sequence[str] | None = None) -> list[ReportFigure]:
    """Write the report figures into ``out_dir`` (PNG) and return them with captions.

    Parameters
    ----------
    protocol : str, optional
        Protocol of the meta-metrics drawn (default: ``paper`` if present, else the first).
    kinds : sequence of str
        Which figures: any of ``pareto``, ``histograms``, ``heatmaps``, ``scatter`` (default all).
    pareto : sequence of str, optional
        Meta-metrics that get a Pareto figure (default: every one in the meta-metrics).
    scatter : (str, str), optional
        The two metrics of the per-SEG rank_m scatter (default: the first metric of interest and
        the metric whose per-SEG rank_m agrees with it most, a reference when there is one).
    n_heatmaps : int
        Number of best and of worst SEGs drawn per metric of interest (by its own rank_m).

    Raises
    ------
    ValueError
        Unknown figure kinds, protocol, Pareto meta-metrics or scatter metrics.
    """
    unknown = sorted(set(kinds) - set(FIGURE_KINDS))
    if unknown:
        raise ValueError(f"expected figure kinds among {list(FIGURE_KINDS)}, got {unknown}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = _ReportFigures(merged, out, _figure_protocol(merged.metametrics, protocol), dict(labels or {}),
                            groups=groups, scatter=scatter, n_heatmaps=n_heatmaps,
                            max_hist_per_figure=max_hist_per_figure, prompts=prompts, pareto=pareto)
    return [fig for kind in FIGURE_KINDS if kind in kinds for fig in _DRAW[kind](report)]


def _figure_protocol(mm: pd.DataFrame | None, protocol: str | None) -> str | None:
    """The protocol the figures show: ``protocol`` when given (it must be in the meta-metrics), else
    ``paper`` when present, else the first; ``None`` without meta-metrics.

    Raises
    ------
    ValueError
        ``protocol`` is not among the meta-metrics' protocols.
    """
    if mm is None or not len(mm):
        return protocol
    protocols = list(dict.fromkeys(mm["protocol"]))
    if protocol is None:
        return "paper" if "paper" in protocols else protocols[0]
    if protocol not in protocols:
        raise ValueError(f"expected a protocol among {protocols} for the figures, got {protocol!r}")
    return protocol


@dataclass(frozen=True)
class _ReportFigures:
    """The figures of one report: what they draw from (the merged results, the protocol shown, the
    caller's labels and options) and what several kinds share (the scored metrics of interest, the
    references, and the reference each metric of interest agrees with most); one method per kind
    of :data:`FIGURE_KINDS`, each returning its written figures (none when it has nothing to draw)."""

    merged: MergedResults
    out: Path
    protocol: str | None
    labels: dict[str, str]
    groups: Mapping[str, str] | None = None
    scatter: Sequence[str] | None = None
    n_heatmaps: int = 2
    max_hist_per_figure: int = 9
    prompts: Mapping[str, str] | None = None
    pareto: Sequence[str] | None = None

    def label(self, m: str) -> str:
        return _label(self.labels, self.merged, m)

    def _scored(self, metrics: Iterable[str]) -> list[str]:
        sc = self.merged.scores
        return [m for m in metrics if sc is not None and m in sc.columns]

    @cached_property
    def interest(self) -> list[str]:
        """The metrics of interest that have per-image scores."""
        return self._scored(self.merged.of_interest)

    @cached_property
    def references(self) -> list[str]:
        """The reference metrics that have per-image scores."""
        return self._scored(self.merged.references)

    @cached_property
    def closest(self) -> dict[str, str]:
        """Each metric of interest -> the reference whose per-SEG rank_m agrees with it most."""
        ps = self.merged.per_seg
        if not self.references or ps is None or self.protocol is None:
            return {}
        agree = {m: agreement(ps, m, self.references, self.protocol) for m in self.interest}
        return {m: str(a.index[0]) for m, a in agree.items() if len(a)}

    def pareto_figures(self) -> list[ReportFigure]:
        """One figure per meta-metric against FLOPs per image (none without costs)."""
        if self.merged.metametrics is None or not self.merged.flops:
            return []
        level = "95%" if self.merged.confidence is None else f"{100 * self.merged.confidence:g}%"
        return _pareto_figures(self.merged, self.out, self.protocol, self.labels, self.groups, self.pareto, level)

    def histograms(self) -> list[ReportFigure]:
        """Score distributions per error level, :attr:`max_hist_per_figure` metrics a figure: the
        metrics of interest beside their closest reference (every scored metric without references)."""
        from . import plots

        if self.references:
            drawn = list(dict.fromkeys([x for m in self.interest for x in (m, self.closest.get(m)) if x]))
            beside = "; each metric of interest beside the reference metric whose per-SEG rank_m agrees with it most"
        else:
            drawn, beside = self._scored(self.merged.metrics), ""
        figs = []
        for i in range(0, len(drawn), self.max_hist_per_figure):
            chunk = drawn[i:i + self.max_hist_per_figure]
            fig = plots.score_histograms(self.merged.scores, chunk, labels={m: self.label(m) for m in chunk})
            p = plots.save_figure(fig, self.out / f"histograms_{i // self.max_hist_per_figure + 1}.png")
            figs.append(ReportFigure(p, "Score distributions per error count (the populations sep_m's KS statistic "
                                     "compares)" + beside + ". A metric that separates errors moves its mass to "
                                     "lower scores row by row; a control should not.", "Score distributions"))
        return figs

    def heatmaps(self) -> list[ReportFigure]:
        """For each metric of interest (at most :data:`MAX_HEATMAP_METRICS`), its best and worst
        SEGs by its own per-SEG rank_m, two figures a SEG pair."""
        sc, ps = self.merged.scores, self.merged.per_seg
        if self.n_heatmaps <= 0 or sc is None or ps is None or not self.interest or self.protocol is None:
            return []
        eligible = _multi_level_segs(sc)
        figs = []
        for m in self._heatmap_metrics():
            best, worst, vals_m = best_worst_segs(ps, m, self.protocol, self.n_heatmaps, eligible=eligible)
            rows = self._heatmap_rows(m)
            figs += [self._seg_heatmap(m, kind, sid, rows, vals_m[sid])
                     for kind, ids in (("best", best), ("worst", worst)) for sid in ids]
        return figs

    def _heatmap_metrics(self) -> list[str]:
        """The metrics of interest that get heatmaps: all, or the :data:`MAX_HEATMAP_METRICS` with
        the best Avg rank_m (a 19-metric reproduction would otherwise draw 38 figures)."""
        if len(self.interest) <= MAX_HEATMAP_METRICS:
            return self.interest
        avg = self.merged.metametrics
        avg = avg[(avg["protocol"] == self.protocol) & (avg["meta_metric"] == "rank") & (avg["subset"] == "Avg")]
        top = avg.set_index("metric")["value"].reindex(self.interest).sort_values(ascending=False, kind="stable")
        chosen = [m for m in top.index[:MAX_HEATMAP_METRICS]]
        log.info("heatmaps drawn for the %d metrics of interest with the best Avg rank_m (of %d)",
                 len(chosen), len(self.interest))
        return chosen

    def _heatmap_rows(self, m: str) -> list[str]:
        """A heatmap's rows: every scored metric, ``m`` first, then its closest reference, controls
        last (they are the floor)."""
        controls = set(self.merged.controls)
        drawn_all = self._scored(self.merged.metrics)
        rows = [m] + [x for x in drawn_all if x != m and x not in controls] + [x for x in drawn_all if x in controls]
        if self.closest.get(m):
            rows.remove(self.closest[m])
            rows.insert(1, self.closest[m])
        return rows

    def _seg_heatmap(self, m: str, kind: str, sid: str, rows: list[str], value: float) -> ReportFigure:
        """The heatmap of SEG ``sid``, one of the ``kind`` (best/worst) SEGs of ``m`` (its rank_m ``value``)."""
        from . import plots

        sc, ps = self.merged.scores, self.merged.per_seg
        vals = ps[(ps["protocol"] == self.protocol) & (ps["meta_metric"] == "rank") & (ps["seg_id"] == sid)]
        name = self.label(m)
        fig = plots.seg_heatmap(sc, sid, rows, lower_is_better=sorted(self.merged.lower_is_better),
                                seg_values=dict(zip(vals["metric"], vals["value"], strict=True)),
                                labels={x: self.label(x) for x in rows}, prompt=_seg_prompt(sc, self.prompts, sid),
                                title=f"{kind.capitalize()} SEG for {name}: SEG {sid} "
                                      f"({name} rank$_m$ {100 * value:.0f}%)")
        p = plots.save_figure(fig, self.out / f"heatmap_{_safe(m)}_{kind}_seg{_safe(sid)}.png")
        return ReportFigure(p, f"SEG {sid}, one of the {self.n_heatmaps} {kind} SEGs of {name} by its per-SEG "
                            f"rank_m ({self.protocol} protocol): cells coloured from each metric's worst (red) to "
                            "best (blue) score within the SEG, nodes ordered by error count.",
                            f"Per-SEG heatmaps: {name}")

    def scatter_figure(self) -> list[ReportFigure]:
        """The per-SEG rank_m scatter of :meth:`scatter_pair` (none without a pair)."""
        from . import plots

        if self.merged.per_seg is None or self.protocol is None:
            return []
        pair = self.scatter_pair()
        if not pair:
            return []
        fig = plots.rank_scatter(self.merged.per_seg, pair[0], pair[1], protocol=self.protocol,
                                 labels={m: self.label(m) for m in pair})
        p = plots.save_figure(fig, self.out / "scatter_rank.png")
        return [ReportFigure(p, f"Per-SEG rank_m of {self.label(pair[0])} against {self.label(pair[1])} "
                             f"({self.protocol} protocol), one point per SEG"
                             + ("" if self.scatter else ", the metric whose per-SEG rank_m agrees with it most")
                             + ". The axes keep each metric's own range.", "Per-SEG comparison")]

    def scatter_pair(self) -> list[str]:
        """The scatter's two metrics: the caller's (:meth:`_checked_pair`), else
        :meth:`_agreeing_pair`; empty when there is no such pair."""
        ps = self.merged.per_seg
        ranked = [m for m in self.merged.metrics if ((ps["metric"] == m) & (ps["meta_metric"] == "rank")).any()]
        return self._checked_pair(ranked) if self.scatter else self._agreeing_pair(ranked)

    def _checked_pair(self, ranked: list[str]) -> list[str]:
        """The caller's scatter pair.

        Raises
        ------
        ValueError
            It is not two metrics among the ``ranked`` ones (those with per-SEG rank_m values).
        """
        pair = list(self.scatter)
        if len(pair) != 2 or any(m not in ranked for m in pair):
            raise ValueError(f"expected scatter=[a,b] with two metrics among {ranked}, got {pair}")
        return pair

    def _agreeing_pair(self, ranked: list[str]) -> list[str]:
        """The first ranked metric of interest and the metric that agrees with it most: a reference
        if there is one, else another non-control metric; never a control (a control is built to
        fail, so "the metric that agrees most" with it says nothing). Empty without such metrics."""
        first = next((m for m in self.merged.of_interest if m in ranked), None)
        others = [m for m in ranked if m != first]
        controls = set(self.merged.controls)
        pool = ([m for m in others if self.merged.role(m) == "reference"]
                or [m for m in others if m not in controls])
        if not (first and pool):
            return []
        agree = agreement(self.merged.per_seg, first, pool, self.protocol)
        return [first, str(agree.index[0])] if len(agree) else []


#: The drawing of each figure kind (in the order of :data:`FIGURE_KINDS`).
_DRAW = {"pareto": _ReportFigures.pareto_figures, "histograms": _ReportFigures.histograms,
         "heatmaps": _ReportFigures.heatmaps, "scatter": _ReportFigures.scatter_figure}


def _multi_level_segs(scores: pd.DataFrame) -> pd.Index:
    """The SEGs whose images sit on more than one error level. A SEG on one level has nothing to
    order (SEG 103 of TS2): its rank_m is 0 or undefined by convention, which says nothing about
    the metrics, so it is never a best or worst SEG."""
    from . import plots

    lv = plots.add_levels(scores[["seg_id", "node"]])
    multi = lv.groupby(lv["seg_id"].astype(str))["level"].nunique()
    return multi.index[multi > 1]


def _seg_prompt(scores: pd.DataFrame, prompts: Mapping[str, str] | None, sid: str) -> str | None:
    """The prompt of SEG ``sid``: from ``prompts`` (the dataset), else the score table's ``prompt`` column."""
    prompt = (prompts or {}).get(sid)
    if prompt is None and "prompt" in scores.columns:
        pr = scores.loc[scores["seg_id"].astype(str) == sid, "prompt"].dropna()
        prompt = str(pr.iloc[0]) if len(pr) else None
    return prompt


def _pareto_figures(merged, out: Path, protocol, labels, groups, pareto, level) -> list[ReportFigure]:
    from . import plots
    from .plots_pareto import pareto_figure

    mm = merged.metametrics
    pts = mm[mm["protocol"] == protocol].copy()
    if pareto is not None:
        missing = sorted(set(pareto) - set(pts["meta_metric"]))
        if missing:
            raise ValueError(f"expected Pareto meta-metrics among {sorted(set(pts['meta_metric']))}, got {missing}")
        pts = pts[pts["meta_metric"].isin(list(pareto))]
    pts["flops"] = pts["metric"].map(merged.flops)
    pts["role"] = pts["metric"].map(merged.role)
    with_cost = pts.dropna(subset=["flops"])
    no_cost = sorted(set(pts["metric"]) - set(with_cost["metric"]))
    figs = []
    for mmname in dict.fromkeys(pts["meta_metric"]):
        costed = with_cost.loc[with_cost["meta_metric"] == mmname]
        own = costed.loc[costed["role"] != "control", "metric"].unique()
        # A frontier needs two costed non-control metrics (the controls are only its floor): with
        # one there is nothing to trade off, and the report says so in a sentence instead.
        if len(own) < 2:
            log.info("Pareto figure of %s skipped: FLOPs per image known for %d metric(s), %d non-control (%s)",
                     mmname, costed["metric"].nunique(), len(own), ", ".join(own) or "-")
            continue
        fig = pareto_figure(pts, mmname, labels=labels, groups=groups)
        p = plots.save_figure(fig, out / f"pareto_{mmname}.png")
        cap = (f"{mmname} ({protocol} protocol) against FLOPs per image; the solid staircase is the Pareto frontier "
               "of the non-control metrics (none is both cheaper and better); grey crosses are controls and the "
               f"dashed line the best control's value (the floor a metric must clear); whiskers are {level} "
               "bootstrap CIs" + ("; the shaded band is the chance level (scores permuted within each SEG)"
                                  if _chance(pts) is not None else "") + ". Members are listed in pareto.csv.")
        if no_cost:
            cap += f" Not shown (no FLOPs estimate): {', '.join(no_cost)}."
        figs.append(ReportFigure(p, cap, "Pareto frontiers"))
    return figs
