"""The analysis as one call: score table (+ dataset) -> meta-metrics per protocol, with CIs.

>>> import pandas as pd
>>> df = pd.DataFrame({"seg_id": ["0"] * 3, "node": ["0", "1", "2"], "m": [0.9, 0.6, 0.1]})
>>> r = analyze(df, protocols=["graph"], bootstrap=0)
>>> r.value("m", "rank", protocol="graph"), r.value("m", "pair_acc", protocol="graph")
(1.0, 1.0)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data import SEGDataset

from .aggregate import SegValues, compute_seg_values, group_means, score_std
from .bootstrap import bootstrap_group_means, percentile_ci, stratified_counts
from .compute import walk_values
from .metametrics import META_METRICS, get_meta_metric
from .protocols import Protocol, get_protocol
from .scores_io import AnalysisInputs, ScoreTable, prepare_inputs, read_scores
from .walks import build_walk_table

__all__ = ["ProtocolResult", "AnalysisResult", "analyze", "run_protocol", "included_segs"]

log = logging.getLogger(__name__)

METAMETRICS_COLUMNS = ["metric", "protocol", "meta_metric", "subset", "value", "ci_low", "ci_high", "n_segs"]
PER_SEG_COLUMNS = ["metric", "protocol", "meta_metric", "seg_id", "subset", "value"]


@dataclass(frozen=True)
class ProtocolResult:
    """Everything computed under one protocol.

    ``estimates``/``n_segs``/``ci_low``/``ci_high`` are ``(metric, meta_metric, group)``
    arrays, groups named by ``group_names`` (``Avg`` first); ``replicates`` is
    ``(bootstrap, metric, meta_metric, group)`` or None when ``bootstrap == 0``.
    """

    seg_values: SegValues
    group_names: tuple[str, ...]
    estimates: np.ndarray
    n_segs: np.ndarray
    replicates: np.ndarray | None
    ci_low: np.ndarray
    ci_high: np.ndarray

    @property
    def protocol(self) -> Protocol:
        return self.seg_values.protocol


@dataclass(frozen=True)
class AnalysisResult:
    """Meta-metrics of every metric under every requested protocol."""

    metrics: tuple[str, ...]
    lower_is_better: frozenset[str]
    meta_metrics: tuple[str, ...]
    protocols: dict[str, ProtocolResult]
    bootstrap: int
    seed: int
    confidence: float
    source: str = "<frame>"
    subset_source: str = "none"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def get(self, protocol: str | None = None) -> ProtocolResult:
        """The result of ``protocol`` (default: the only/first one)."""
        if protocol is None:
            return next(iter(self.protocols.values()))
        try:
            return self.protocols[protocol]
        except KeyError as e:
            raise KeyError(f"expected a protocol among {list(self.protocols)}, got {protocol!r}") from e

    def value(self, metric: str, meta_metric: str, subset: str = "Avg", protocol: str | None = None) -> float:
        """One cell as a fraction (not %)."""
        pr = self.get(protocol)
        return float(pr.estimates[self.index_of(self.metrics, metric, "metric"),
                                  self.index_of(self.meta_metrics, meta_metric, "meta-metric"),
                                  self.index_of(pr.group_names, subset, "subset")])

    @staticmethod
    def index_of(items: Sequence[str], name: str, what: str) -> int:
        try:
            return list(items).index(name)
        except ValueError as e:
            raise KeyError(f"expected a {what} among {list(items)}, got {name!r}") from e

    def metametrics_frame(self) -> pd.DataFrame:
        """Long table: ``metric, protocol, meta_metric, subset, value, ci_low, ci_high, n_segs``."""
        rows = []
        for pname, pr in self.protocols.items():
            for i, m in enumerate(self.metrics):
                for k, mm in enumerate(self.meta_metrics):
                    for g, sub in enumerate(pr.group_names):
                        rows.append((m, pname, mm, sub, pr.estimates[i, k, g], pr.ci_low[i, k, g], pr.ci_high[i, k, g],
                                     int(pr.n_segs[i, k, g])))
        return pd.DataFrame(rows, columns=METAMETRICS_COLUMNS)

    def per_seg_frame(self) -> pd.DataFrame:
        """Long table: ``metric, protocol, meta_metric, seg_id, subset, value`` (delta normalised)."""
        parts = []
        for pname, pr in self.protocols.items():
            sv = pr.seg_values
            n_m, n_k, n_s = sv.values.shape
            parts.append(pd.DataFrame({
                "metric": np.repeat(np.array(self.metrics, dtype=object), n_k * n_s),
                "protocol": pname,
                "meta_metric": np.tile(np.repeat(np.array(self.meta_metrics, dtype=object), n_s), n_m),
                "seg_id": np.tile(np.array(sv.seg_ids, dtype=object), n_m * n_k),
                "subset": np.tile(np.array([s or "" for s in sv.subsets], dtype=object), n_m * n_k),
                "value": sv.values.ravel(),
            }))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PER_SEG_COLUMNS)


def included_segs(inputs: AnalysisInputs, protocol: Protocol) -> list[str]:
    """SEG ids analysed under ``protocol`` (the paper's code leaves out SEG 164)."""
    ids = inputs.structure.seg_ids
    if not protocol.include_seg_164 and "164" in ids:
        log.info("protocol %s: SEG 164 left out, as the paper's code does (protocol.include_seg_164=true keeps it)",
                 protocol.name)
        return [i for i in ids if i != "164"]
    return ids


def run_protocol(inputs: AnalysisInputs, protocol: Protocol, meta_metrics: Sequence[str], bootstrap: int = 0,
                 seed: int = 0, confidence: float = 0.95) -> ProtocolResult:
    """All meta-metrics of all metrics under one protocol, with bootstrap CIs when asked."""
    seg_ids = included_segs(inputs, protocol)
    wt = build_walk_table(inputs.structure, protocol.walks, protocol.root_duplication, seg_ids, inputs.max_walks)
    wv, nv = walk_values(wt, inputs.scores, protocol, meta_metrics)
    sigma = score_std(inputs.scores, inputs.structure, seg_ids, protocol.delta_norm)
    sv = compute_seg_values(wt, wv, nv, sigma, protocol, inputs.metrics, meta_metrics)
    groups = sv.groups()
    est, counts = group_means(sv.values, groups)
    n_m, n_k, n_s = sv.values.shape
    reps = None
    if bootstrap and n_s:
        draws = stratified_counts(sv.subsets, int(bootstrap), np.random.default_rng(seed))
        reps = bootstrap_group_means(sv.values.reshape(n_m * n_k, n_s), draws, groups).reshape(int(bootstrap), n_m, n_k,
                                                                                               len(groups))
    if protocol.lower_is_better_delta == "magnitude":
        # Rule 6 of the paper's protocol: a lower-is-better metric's delta is reported as a magnitude.
        for k, name in enumerate(meta_metrics):
            if get_meta_metric(name).normalised:
                for i, m in enumerate(inputs.metrics):
                    if m in inputs.lower_is_better:
                        est[i, k] = np.abs(est[i, k])
                        if reps is not None:
                            reps[:, i, k] = np.abs(reps[:, i, k])
    if reps is not None:
        lo, hi = percentile_ci(reps, confidence)
    else:
        lo = hi = np.full(est.shape, np.nan)
    return ProtocolResult(sv, tuple(name for name, _ in groups), est, counts, reps, lo, hi)


def analyze(scores: ScoreTable | AnalysisInputs | pd.DataFrame | str | Path, dataset: SEGDataset | None = None,
            protocols: Iterable[str | Protocol | dict] = ("paper",), meta_metrics: Sequence[str] | None = None,
            bootstrap: int = 1000, seed: int = 0, subsets: str = "auto", confidence: float = 0.95,
            metrics: Sequence[str] | None = None, lower_is_better: Iterable[str] = ()) -> AnalysisResult:
    """TS2 meta-metrics of a score table.

    Parameters
    ----------
    scores : path, DataFrame, ScoreTable or AnalysisInputs
        Wide or long score table (see :mod:`analysis.scores_io`).
    dataset : SEGDataset, optional
        Structure to join on ``file_name``; without it, SEGs come from the labels.
    protocols : iterable
        Protocol names (``paper``, ``graph``), option mappings or :class:`Protocol` objects.
    meta_metrics : sequence of str, optional
        Registered names (default: all: rank, sep, delta, kendall, pair_acc).
    bootstrap : int
        Cluster-bootstrap replicates for the CIs; 0 leaves the CI columns NaN.
    seed : int
        Seeds the bootstrap (each protocol draws from ``default_rng(seed)``).
    subsets : str
        Where SEG subsets come from (:func:`analysis.scores_io.prepare_inputs`).
    confidence : float
        CI level.
    metrics, lower_is_better
        Passed to :func:`analysis.scores_io.read_scores` when ``scores`` is not read yet.

    Returns
    -------
    AnalysisResult
    """
    if isinstance(scores, AnalysisInputs):
        inputs = scores
    else:
        table = scores if isinstance(scores, ScoreTable) else read_scores(scores, metrics, lower_is_better)
        inputs = prepare_inputs(table, dataset, subsets)
    mms = tuple(meta_metrics) if meta_metrics is not None else tuple(META_METRICS)
    for name in mms:
        get_meta_metric(name)
    results: dict[str, ProtocolResult] = {}
    for p in protocols:
        protocol = get_protocol(p)
        if protocol.name in results:
            raise ValueError(f"expected distinct protocol names, got {protocol.name!r} twice")
        results[protocol.name] = run_protocol(inputs, protocol, mms, int(bootstrap), int(seed), float(confidence))
    return AnalysisResult(inputs.metrics, inputs.lower_is_better, mms, results, int(bootstrap), int(seed),
                          float(confidence), inputs.source, inputs.subset_source, inputs.notes)
