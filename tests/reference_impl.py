"""Plain-loop reference implementation (scipy per walk), for tests and the speed benchmark.

Written independently of :mod:`analysis.metametrics`: every walk is materialised as Python
lists and handed to :func:`scipy.stats.spearmanr`, :func:`scipy.stats.kendalltau`,
:func:`scipy.stats.ks_2samp`; pairwise accuracy is a double loop. Slow by design (about the
speed of the paper's own code); the vectorised engine must agree with it.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats

from analysis.protocols import Protocol
from analysis.walks import SegNodes, protocol_walks

__all__ = ["reference_walk", "reference_seg", "reference_seg_values"]


def _ranks_corr(x: np.ndarray, y: np.ndarray, method: str) -> float:
    if method == "average":
        return float(stats.spearmanr(x, y).statistic)
    return float(stats.pearsonr(stats.rankdata(x, method=method), stats.rankdata(y, method=method)).statistic)


def reference_walk(levels: Sequence[float], scores: Sequence[float], protocol: Protocol) -> dict[str, float]:
    """Every meta-metric of one walk (raw delta), by the plain rules of ``protocol``."""
    lv = np.asarray(levels, dtype=float)
    sc = np.asarray(scores, dtype=float)
    keep = ~np.isnan(sc)
    lv, sc = lv[keep], sc[keep]
    n = len(sc)
    pools: dict[float, list[float]] = {}
    for l_, s_ in zip(lv, sc, strict=True):
        pools.setdefault(l_, []).append(s_)
    levels_present = sorted(pools)
    one_level = len(levels_present) <= 1
    degenerate = 0.0 if protocol.degenerate_walk == "zero" else np.nan
    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # ordering: Spearman and Kendall
        if n < 2:
            out["rank"] = out["kendall"] = np.nan
        elif one_level:
            out["rank"] = out["kendall"] = degenerate
        elif len(set(sc.tolist())) == 1:
            out["rank"] = out["kendall"] = 0.0
        else:
            out["rank"] = -_ranks_corr(lv, sc, protocol.tie_method)
            out["kendall"] = -float(stats.kendalltau(lv, sc).statistic)
        # separation: KS and delta
        if n < 1:
            out["sep"] = out["delta"] = np.nan
        elif one_level:
            out["sep"] = out["delta"] = degenerate
        else:
            if protocol.ks_pairs == "all":
                pairs = list(itertools.combinations(levels_present, 2))
            else:
                # neighbouring pairs: the [1:] slice is one shorter by design
                pairs = list(zip(levels_present, levels_present[1:], strict=False))
            out["sep"] = float(np.mean([stats.ks_2samp(pools[a], pools[b], method="asymp").statistic for a, b in pairs]))
            # neighbouring pairs: the [1:] slice is one shorter by design
            out["delta"] = float(np.mean([np.mean(pools[a]) - np.mean(pools[b])
                                          for a, b in zip(levels_present, levels_present[1:], strict=False)]))
    right = total = 0.0
    for i in range(n):
        for j in range(n):
            if lv[i] < lv[j]:
                total += 1
                right += 1.0 if sc[i] > sc[j] else 0.5 if sc[i] == sc[j] else 0.0
    out["pair_acc"] = right / total if total else np.nan
    return out


def reference_seg(seg: SegNodes, column: np.ndarray, protocol: Protocol,
                  meta_metrics: Sequence[str] = ("rank", "sep", "delta", "kendall", "pair_acc")) -> dict[str, float]:
    """SEG value of each meta-metric (raw delta) for one score column, walk by walk."""
    node_index = {lbl: i for i, lbl in enumerate(seg.labels)}
    vals: dict[str, list[tuple[float, float]]] = {m: [] for m in meta_metrics}
    for walk in protocol_walks(seg, protocol.walks, protocol.root_duplication):
        levels: list[float] = []
        scores: list[float] = []
        for node in walk:
            i = node_index[node]
            for r in seg.rows[i]:
                levels.append(float(seg.levels[i]))
                scores.append(float(column[r]))
        w = float(np.sum(~np.isnan(np.asarray(scores, dtype=float)))) if protocol.walk_weighting == "samples" else 1.0
        res = reference_walk(levels, scores, protocol)
        for m in meta_metrics:
            if not np.isnan(res[m]):
                vals[m].append((res[m], w))
    out = {}
    for m in meta_metrics:
        wsum = sum(w for _, w in vals[m])
        out[m] = sum(v * w for v, w in vals[m]) / wsum if wsum > 0 else np.nan
    return out


def reference_seg_values(segs: Sequence[SegNodes], scores: np.ndarray, protocol: Protocol,
                         meta_metrics: Sequence[str] = ("rank", "sep", "delta", "kendall", "pair_acc")) -> np.ndarray:
    """``(n_metrics, n_meta, n_segs)`` SEG values (raw delta), one SEG and column at a time."""
    out = np.full((scores.shape[1], len(meta_metrics), len(segs)), np.nan)
    for j in range(scores.shape[1]):
        for s, seg in enumerate(segs):
            res = reference_seg(seg, scores[:, j], protocol, meta_metrics)
            out[j, :, s] = [res[m] for m in meta_metrics]
    return out
