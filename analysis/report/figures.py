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
    from . import plots

    unknown = sorted(set(kinds) - set(FIGURE_KINDS))
    if unknown:
        raise ValueError(f"expected figure kinds among {list(FIGURE_KINDS)}, got {unknown}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs: list[ReportFigure] = []
    labels = dict(labels or {})
    mm = merged.metametrics
    if mm is not None and len(mm):
        protocols = list(dict.fromkeys(mm["protocol"]))
        if protocol is None:
            protocol = "paper" if "paper" in protocols else protocols[0]
        elif protocol not in protocols:
            raise ValueError(f"expected a protocol among {protocols} for the figures, got {protocol!r}")
    metrics = merged.metrics
    controls = set(merged.controls)
    level = "95%" if merged.confidence is None else f"{100 * merged.confidence:g}%"
    if "pareto" in kinds and mm is not None and merged.flops:
        figs += _pareto_figures(merged, out, protocol, labels, groups, pareto, level)
    sc, ps = merged.scores, merged.per_seg
    interest = [m for m in merged.of_interest if sc is not None and m in sc.columns]
    refs = [m for m in merged.references if sc is not None and m in sc.columns]
    closest: dict[str, str] = {}
    if refs and ps is not None and protocol is not None:
        for m in interest:
            agree = agreement(ps, m, refs, protocol)
            if len(agree):
                closest[m] = str(agree.index[0])
    # histograms per error level: the metrics of interest beside their closest reference
    if refs:
        hist_metrics = list(dict.fromkeys([x for m in interest for x in (m, closest.get(m)) if x]))
    else:
        hist_metrics = [m for m in metrics if sc is not None and m in sc.columns]
    for i in range(0, len(hist_metrics) if "histograms" in kinds else 0, max_hist_per_figure):
        chunk = hist_metrics[i:i + max_hist_per_figure]
        fig = plots.score_histograms(sc, chunk, labels={m: _label(labels, merged, m) for m in chunk})
        p = plots.save_figure(fig, out / f"histograms_{i // max_hist_per_figure + 1}.png")
        beside = ("; each metric of interest beside the reference metric whose per-SEG rank_m agrees with it most"
                  if refs else "")
        figs.append(ReportFigure(p, "Score distributions per error count (the populations sep_m's KS statistic "
                                 "compares)" + beside + ". A metric that separates errors moves its mass to lower "
                                 "scores row by row; a control should not.", "Score distributions"))
    if "heatmaps" in kinds and n_heatmaps > 0 and sc is not None and ps is not None and interest \
            and protocol is not None:
        figs += _heatmaps(merged, out, protocol, labels, prompts, n_heatmaps, interest, closest, controls)
    if "scatter" in kinds and ps is not None and protocol is not None:
        figs += _scatter_figure(merged, out, protocol, labels, scatter, controls)
    return figs


def _scatter_figure(merged: MergedResults, out: Path, protocol: str, labels: Mapping[str, str],
                    scatter: Sequence[str] | None, controls: set[str]) -> list[ReportFigure]:
    """The per-SEG rank_m scatter (none or one figure), apart to keep :func:`make_figures` short."""
    from . import plots

    ps, metrics = merged.per_seg, merged.metrics
    figs: list[ReportFigure] = []
    ranked = [m for m in metrics if ((ps["metric"] == m) & (ps["meta_metric"] == "rank")).any()]
    if scatter:
        pair = list(scatter)
        bad = [m for m in pair if m not in ranked]
        if len(pair) != 2 or bad:
            raise ValueError(f"expected scatter=[a,b] with two metrics among {ranked}, got {pair}")
    else:
        first = next((m for m in merged.of_interest if m in ranked), None)
        others = [m for m in ranked if m != first]
        # a reference if there is one, else another non-control metric; never a control: a
        # control is built to fail, so "the metric that agrees most" with it says nothing
        pool = ([m for m in others if merged.role(m) == "reference"]
                or [m for m in others if m not in controls])
        agree = agreement(ps, first, pool, protocol) if first and pool else pd.Series(dtype=float)
        pair = [first, str(agree.index[0])] if len(agree) else []
    if pair:
        fig = plots.rank_scatter(ps, pair[0], pair[1], protocol=protocol,
                                 labels={m: _label(labels, merged, m) for m in pair})
        p = plots.save_figure(fig, out / "scatter_rank.png")
        figs.append(ReportFigure(p, f"Per-SEG rank_m of {_label(labels, merged, pair[0])} against "
                                 f"{_label(labels, merged, pair[1])} ({protocol} protocol), one point per SEG"
                                 + ("" if scatter else ", the metric whose per-SEG rank_m agrees with it most")
                                 + ". The axes keep each metric's own range.", "Per-SEG comparison"))
    return figs


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


def _heatmaps(merged, out: Path, protocol, labels, prompts, k, interest, closest, controls) -> list[ReportFigure]:
    from . import plots

    sc, ps = merged.scores, merged.per_seg
    # A SEG whose images sit on one error level has nothing to order (SEG 103 of TS2): its
    # rank_m is 0 or undefined by convention, which says nothing about the metrics.
    lv = plots.add_levels(sc[["seg_id", "node"]])
    multi = lv.groupby(lv["seg_id"].astype(str))["level"].nunique()
    eligible = multi.index[multi > 1]
    chosen = interest
    if len(chosen) > MAX_HEATMAP_METRICS:
        avg = merged.metametrics
        avg = avg[(avg["protocol"] == protocol) & (avg["meta_metric"] == "rank") & (avg["subset"] == "Avg")]
        top = avg.set_index("metric")["value"].reindex(chosen).sort_values(ascending=False, kind="stable")
        chosen = [m for m in top.index[:MAX_HEATMAP_METRICS]]
        log.info("heatmaps drawn for the %d metrics of interest with the best Avg rank_m (of %d)",
                 len(chosen), len(interest))
    # Rows: every scored metric, the chosen one first, controls last (they are the floor).
    drawn_all = [m for m in merged.metrics if m in sc.columns]
    figs = []
    for m in chosen:
        rows = [m] + [x for x in drawn_all if x != m and x not in controls] + [x for x in drawn_all if x in controls]
        if closest.get(m):
            rows.remove(closest[m])
            rows.insert(1, closest[m])
        best, worst, vals_m = best_worst_segs(ps, m, protocol, k, eligible=eligible)
        for kind, ids in (("best", best), ("worst", worst)):
            for sid in ids:
                vals = ps[(ps["protocol"] == protocol) & (ps["meta_metric"] == "rank") & (ps["seg_id"] == sid)]
                vals = dict(zip(vals["metric"], vals["value"], strict=True))
                prompt = (prompts or {}).get(sid)
                if prompt is None and "prompt" in sc.columns:
                    pr = sc.loc[sc["seg_id"].astype(str) == sid, "prompt"].dropna()
                    prompt = str(pr.iloc[0]) if len(pr) else None
                name = _label(labels, merged, m)
                fig = plots.seg_heatmap(sc, sid, rows, lower_is_better=sorted(merged.lower_is_better),
                                        seg_values=vals, labels={x: _label(labels, merged, x) for x in rows},
                                        prompt=prompt,
                                        title=f"{kind.capitalize()} SEG for {name}: SEG {sid} "
                                              f"({name} rank$_m$ {100 * vals_m[sid]:.0f}%)")
                p = plots.save_figure(fig, out / f"heatmap_{_safe(m)}_{kind}_seg{_safe(sid)}.png")
                figs.append(ReportFigure(p, f"SEG {sid}, one of the {k} {kind} SEGs of {name} by its per-SEG rank_m "
                                         f"({protocol} protocol): cells coloured from each metric's worst (red) to "
                                         "best (blue) score within the SEG, nodes ordered by error count.",
                                         f"Per-SEG heatmaps: {name}"))
    return figs
