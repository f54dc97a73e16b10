"""The analysis as one call: score table (+ dataset) -> meta-metrics per protocol, with CIs.

>>> import pandas as pd
>>> df = pd.DataFrame({"seg_id": ["0"] * 3, "node": ["0", "1", "2"], "m": [0.9, 0.6, 0.1]})
>>> r = analyze(df, protocols=["graph"], bootstrap=0)
>>> r.value("m", "rank", protocol="graph"), r.value("m", "pair_acc", protocol="graph")
(1.0, 1.0)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data import SEGDataset
from seg_data.results import METAMETRICS_COLUMNS, PER_SEG_COLUMNS

from .aggregate import (
    SegValues,
    group_means,
    normaliser_moments,
    score_std,
)
from .chance import ChanceLevels, chance_adjusted
from .column_store import ChanceRequest, ColumnStore, column_results
from .inputs import AnalysisInputs, prepare_inputs
from .metametrics import get_meta_metric
from .protocols import Protocol, get_protocol
from .release import TS2_LAST_SEG, is_ts2_release
from .score_table import ScoreTable
from .scores_io import read_scores
from .settings import CI_METHODS, MIN_SEGS_CI, AnalysisSettings, resolve_settings
from .stats import (
    BOOTSTRAP_SCHEMES,
    bca_ci,
    bootstrap_group_means,
    check_bootstrap_size,
    percentile_ci,
    stratified_counts,
    withhold_small_cis,
)
from .walks import build_walk_table, seg_image_rows

__all__ = ["ProtocolResult", "AnalysisResult", "analyze", "run_protocol", "included_segs", "MIN_SEGS_CI"]

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class ProtocolResult:
    """Everything computed under one protocol.

    ``estimates``/``n_segs``/``ci_low``/``ci_high`` are ``(metric, meta_metric, group)``
    arrays, groups named by ``group_names`` (``Avg`` first); ``replicates`` is
    ``(bootstrap, metric, meta_metric, group)`` or None when ``bootstrap == 0``. ``chance``
    holds the chance levels (:mod:`analysis.chance`), None when ``chance == 0``; ``excluded``
    the SEG ids the protocol left out (the TS2 release's SEG 164 under ``paper``).
    """

    seg_values: SegValues
    group_names: tuple[str, ...]
    estimates: np.ndarray
    n_segs: np.ndarray
    replicates: np.ndarray | None
    ci_low: np.ndarray
    ci_high: np.ndarray
    chance: ChanceLevels | None = None
    excluded: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what this protocol withheld (CIs of cells with too few SEGs)
    failure_notes: tuple[str, ...] = ()  # how this protocol read failure-code cells (failure_notes())
    missing: tuple[str, ...] = ()  # one line per metric with missing scores (missing_notes())

    @property
    def protocol(self) -> Protocol:
        return self.seg_values.protocol

    def chance_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(chance, chance_low, chance_high, chance_mc_error, adjusted)`` shaped like ``estimates``
        (NaN without chance)."""
        if self.chance is None:
            nan = np.full(self.estimates.shape, np.nan)
            return nan, nan, nan, nan, nan
        adj = np.stack([chance_adjusted(self.estimates[:, k], self.chance.mean[:, k], get_meta_metric(name).maximum)
                        for k, name in enumerate(self.seg_values.meta_metrics)], axis=1)
        return self.chance.mean, self.chance.low, self.chance.high, self.chance.mc_error, adj


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
    chance: int = 0
    ci_method: str = "percentile"
    bootstrap_scheme: str = "rescaled"
    min_segs_ci: int = MIN_SEGS_CI

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
        """Long table: ``metric, protocol, meta_metric, subset, value, ci_low, ci_high, n_segs,
        chance, chance_low, chance_high, chance_mc_error, adjusted`` (the last five NaN without
        chance levels)."""
        rows = []
        for pname, pr in self.protocols.items():
            ch, ch_lo, ch_hi, ch_mc, adj = pr.chance_arrays()
            for i, m in enumerate(self.metrics):
                for k, mm in enumerate(self.meta_metrics):
                    for g, sub in enumerate(pr.group_names):
                        rows.append((m, pname, mm, sub, pr.estimates[i, k, g], pr.ci_low[i, k, g], pr.ci_high[i, k, g],
                                     int(pr.n_segs[i, k, g]), ch[i, k, g], ch_lo[i, k, g], ch_hi[i, k, g],
                                     ch_mc[i, k, g], adj[i, k, g]))
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
    """SEG ids analysed under ``protocol``.

    ``include_seg_164=false`` (the paper protocol) leaves out SEG ``"164"`` only when the data
    is the TS2 release (:func:`analysis.release.is_ts2_release`), as the paper's code did; every
    other dataset keeps all its SEGs. When applied it is logged and recorded
    (``ProtocolResult.excluded``, ``analysis.json``).
    """
    ids = inputs.structure.seg_ids
    if not protocol.include_seg_164 and is_ts2_release(inputs.structure):
        log.info("protocol %s: the TS2 release (SEGs 0-164) is analysed without SEG 164, as the paper's code did "
                 "(protocol.include_seg_164=true keeps it)", protocol.name)
        return [i for i in ids if i != TS2_LAST_SEG]
    return ids


def _withheld_note(protocol: str, withheld: np.ndarray, n_segs: np.ndarray, metrics: Sequence[str],
                   meta_metrics: Sequence[str], groups: Sequence[str], min_segs: int) -> str:
    cells = np.argwhere(withheld)
    per_metric: dict[str, int] = {}
    for i, k, g in cells:
        per_metric[metrics[i]] = max(per_metric.get(metrics[i], 0), int(n_segs[i, k, g]))
    shown = ", ".join(f"{m} ({n} SEG{'s' if n != 1 else ''} at most)" for m, n in list(per_metric.items())[:8])
    more = f" and {len(per_metric) - 8} more metric(s)" if len(per_metric) > 8 else ""
    return (f"protocol {protocol}: no CI (n/a) for {len(cells)} cell(s) with fewer than {min_segs} SEGs "
            f"(min_segs_ci={min_segs}): {shown}{more}")


def failure_notes(inputs: AnalysisInputs, protocol: Protocol) -> tuple[str, ...]:
    """One note per metric with cells holding a failure code, saying how ``protocol`` reads them.

    Examples
    --------
    >>> from analysis.scores_io import prepare_inputs, read_scores
    >>> t = read_scores(pd.DataFrame({"seg_id": ["0"] * 3, "node": ["0", "1", "2"], "viescore": [0.8, -1, 0.2]}))
    >>> failure_notes(prepare_inputs(t), get_protocol("graph"))
    ("protocol graph: 1 cell(s) of 'viescore' hold a failure code (-1): read as missing (failure_codes=missing)",)
    """
    how = ("analysed as the score written, as the authors' code did (failure_codes=score)"
           if protocol.failure_codes == "score" else "read as missing (failure_codes=missing)")
    return tuple(f"protocol {protocol.name}: {n} cell(s) of {m!r} hold a failure code "
                 f"({', '.join(f'{c:g}' for c in inputs.failure_codes.get(m, ()))}): {how}"
                 for m, n in inputs.failure_counts().items())


def missing_notes(scores: np.ndarray, structure, wt, protocol: str, metrics: Sequence[str]) -> tuple[str, ...]:
    """One note per metric with missing scores among the analysed SEGs' images, under one protocol.

    A cell is missing when it is NaN after the protocol read the table (a blank cell, a NaN, or
    a failure code read as missing). The note counts the missing cells among the images of
    the SEGs ``wt`` analyses, the SEGs holding one or more of them, and the walks of ``wt`` that
    pass through one (those walks lose a step; a SEG whose walks are all lost drops out of the
    metric's averages).

    Examples
    --------
    >>> from analysis.scores_io import prepare_inputs, read_scores
    >>> from analysis.walks import build_walk_table
    >>> t = read_scores(pd.DataFrame({"seg_id": ["0"] * 4 + ["1"] * 3, "node": ["0", "1a", "1b", "2", "0", "1", "2"],
    ...                               "m": [0.9, np.nan, 0.5, 0.2, 0.8, 0.5, 0.1]}))
    >>> i = prepare_inputs(t)
    >>> wt = build_walk_table(i.structure, "dag", False)
    >>> missing_notes(i.scores, i.structure, wt, "graph", i.metrics)
    ("protocol graph: metric 'm' has 1 of 7 cells missing (blank, NaN or a failure code read as missing), in 1 of 2 SEGs; 1 of 3 walks pass through one",)
    """
    kept = set(wt.seg_ids)
    segs = [s for s in structure.segs if s.seg_id in kept]
    # The analysed images' rows once, each with its SEG: every metric's counts are then sums over
    # one mask (two array operations per SEG and metric took half a second at 100k images).
    rows, seg_of, _ = seg_image_rows(segs)
    n_cells = len(rows)
    missing = np.isnan(np.asarray(scores, dtype=float)[rows])  # (n_cells, n_metrics)
    out = []
    for j, m in enumerate(metrics):
        n_miss = int(missing[:, j].sum())
        if not n_miss:
            continue
        n_segs = len(np.unique(seg_of[missing[:, j]]))
        miss = np.isnan(scores[:, j])
        walks = sum(int((miss[np.where(b.rows >= 0, b.rows, 0)] & (b.rows >= 0)).any(axis=1).sum())
                    for b in wt.buckets)
        out.append(f"protocol {protocol}: metric {m!r} has {n_miss} of {n_cells} cells missing (blank, NaN or a "
                   f"failure code read as missing), in {n_segs} of {len(segs)} SEGs; {walks} of {wt.n_walks} "
                   "walks pass through one")
    return tuple(out)


def _check_interval_settings(ci_method: str, bootstrap_scheme: str) -> None:
    if ci_method not in CI_METHODS:
        raise ValueError(f"expected ci_method one of {list(CI_METHODS)}, got {ci_method!r}")
    if bootstrap_scheme not in BOOTSTRAP_SCHEMES:
        raise ValueError(f"expected bootstrap_scheme one of {list(BOOTSTRAP_SCHEMES)}, got {bootstrap_scheme!r}")


def _magnitude_cells(inputs: AnalysisInputs, meta_metrics: Sequence[str]) -> list[tuple[int, int]]:
    """The (metric, meta-metric) cells reported as a magnitude under ``lower_is_better_delta=magnitude``:
    each lower-is-better metric's normalised meta-metrics (delta)."""
    return [(i, k) for k, name in enumerate(meta_metrics) if get_meta_metric(name).normalised
            for i, m in enumerate(inputs.metrics) if m in inputs.lower_is_better]


def _normalised(meta_metrics: Sequence[str]) -> tuple[int, ...]:
    """The indices of the meta-metrics divided by the score normaliser (sigma)."""
    return tuple(k for k, name in enumerate(meta_metrics) if get_meta_metric(name).normalised)


@dataclass(frozen=True)
class _GroupMeans:
    """Every cell (metric, meta-metric, group) as the mean of its SEG values over the group, recomputed
    with each SEG counted a given number of times: a bootstrap replicate, or a jackknife's leave-one-out.

    With the normaliser's ``moments``, each recomputation divides the ``normalised`` meta-metrics by
    its own std (holding it fixed made delta's CI cover 82% instead of 95%); the ``magnitude`` cells
    are reported as magnitudes (rule 6 of the paper's protocol).
    """

    values: np.ndarray  # (metric, meta-metric, SEG)
    groups: list
    sigma: np.ndarray
    moments: object | None
    normalised: tuple[int, ...]
    magnitude: tuple[tuple[int, int], ...]

    def __call__(self, counts: np.ndarray) -> np.ndarray:
        """Every cell recomputed with SEG ``j`` counted ``counts[b, j]`` times: ``(B, metric, mm, group)``."""
        n_m, n_k, n_s = self.values.shape
        out = bootstrap_group_means(self.values.reshape(n_m * n_k, n_s), counts, self.groups).reshape(
            len(counts), n_m, n_k, len(self.groups))
        if self.moments is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                ratio = self.sigma[None, :] / self.moments.std(counts)  # (B, metric)
            for k in self.normalised:
                out[:, :, k, :] *= ratio[:, :, None]
        for i, k in self.magnitude:
            out[:, i, k] = np.abs(out[:, i, k])
        return out


def _interval(ci_method: str, reps: np.ndarray, est: np.ndarray, recompute: _GroupMeans, confidence: float):
    """The bootstrap interval of every cell: percentile, or BCa (its acceleration from the jackknife,
    each SEG left out once)."""
    if ci_method == "bca":
        n_s = recompute.values.shape[2]
        return bca_ci(reps, est, recompute(1.0 - np.eye(n_s)), confidence)
    return percentile_ci(reps, confidence)


def run_protocol(inputs: AnalysisInputs, protocol: Protocol, settings: AnalysisSettings, progress: bool = True,
                 store: ColumnStore | None = None) -> ProtocolResult:
    """All meta-metrics of all metrics under one protocol, with bootstrap CIs and chance levels as
    ``settings`` ask (its ``meta_metrics``, ``bootstrap``, ``seed``, ``confidence``, ``chance``,
    ``ci_method``, ``bootstrap_scheme``, ``min_segs_ci``; the inputs are prepared already).

    A cell computed from fewer than ``min_segs_ci`` SEGs gets no CI (NaN), recorded in the
    result's ``notes``. ``progress``: a progress bar over the chance levels' permutations.
    ``store``: per-column SEG values and chance levels are read from it where it has them and kept
    in it otherwise (:mod:`analysis.column_store`; the same bits either way).
    """
    meta_metrics, bootstrap, seed = settings.meta_metrics, settings.bootstrap, settings.seed
    confidence, chance, ci_method = settings.confidence, settings.chance, settings.ci_method
    bootstrap_scheme, min_segs_ci = settings.bootstrap_scheme, settings.min_segs_ci
    _check_interval_settings(ci_method, bootstrap_scheme)
    fail_notes = failure_notes(inputs, protocol)
    inputs = inputs.for_protocol(protocol)  # failure codes: scores or missing, as the protocol says
    seg_ids = included_segs(inputs, protocol)
    kept = set(seg_ids)  # once: a set per SEG made this quadratic (8 s at 7,800 SEGs)
    excluded = tuple(i for i in inputs.structure.seg_ids if i not in kept)
    wt = build_walk_table(inputs.structure, protocol.walks, protocol.root_duplication, seg_ids, inputs.max_walks)
    sigma = score_std(inputs.scores, inputs.structure, seg_ids, protocol.delta_norm)
    want_chance = ChanceRequest(int(chance), int(seed), float(confidence), tuple(sorted(inputs.lower_is_better)),
                                progress) if chance and wt.n_segs else None
    sv, levels = column_results(store, inputs.scores, inputs.structure, wt, sigma, protocol, inputs.metrics,
                                meta_metrics, want_chance)
    groups = sv.groups()
    est, counts = group_means(sv.values, groups)
    n_m, n_k, n_s = sv.values.shape
    magnitude = _magnitude_cells(inputs, meta_metrics) if protocol.lower_is_better_delta == "magnitude" else []
    moments = normaliser_moments(inputs.scores, inputs.structure, sv.seg_ids, protocol.delta_norm) \
        if bootstrap and n_s else None
    recompute = _GroupMeans(sv.values, groups, sigma, moments, _normalised(meta_metrics), tuple(magnitude))

    # Rule 6 of the paper's protocol: a lower-is-better metric's delta is reported as a magnitude.
    for i, k in magnitude:
        est[i, k] = np.abs(est[i, k])
    reps = None
    lo = hi = np.full(est.shape, np.nan)
    notes: tuple[str, ...] = ()
    if bootstrap and n_s:
        check_bootstrap_size(int(bootstrap), n_s, n_m * n_k, len(groups))
        reps = recompute(stratified_counts(sv.subsets, int(bootstrap), np.random.default_rng(seed), bootstrap_scheme))
        ci = _interval(ci_method, reps, est, recompute, confidence)
        lo, hi, withheld = withhold_small_cis(ci.low, ci.high, counts, min_segs_ci)
        if withheld.any():
            notes = (_withheld_note(protocol.name, withheld, counts, inputs.metrics, meta_metrics,
                                    [name for name, _ in groups], min_segs_ci),)
    return ProtocolResult(sv, tuple(name for name, _ in groups), est, counts, reps, lo, hi, levels, excluded,
                          notes, fail_notes, missing_notes(inputs.scores, inputs.structure, wt, protocol.name,
                                                           inputs.metrics))


def analyze(scores: ScoreTable | AnalysisInputs | pd.DataFrame | str | Path, dataset: SEGDataset | None = None,
            settings: AnalysisSettings | None = None, *, metrics: Sequence[str] | None = None, progress: bool = True,
            store: ColumnStore | None = None, **changes) -> AnalysisResult:
    """TS2 meta-metrics of a score table.

    Parameters
    ----------
    scores : path, DataFrame, ScoreTable or AnalysisInputs
        Wide or long score table (see :mod:`analysis.scores_io`).
    dataset : SEGDataset, optional
        Structure to join on ``file_name``; without it, SEGs come from the labels.
    settings : AnalysisSettings, optional
        How the meta-metrics are computed: protocols, meta-metrics, bootstrap, seed, confidence,
        chance levels, CI method and scheme, ``min_segs_ci``, subsets, ``lower_is_better``,
        ``max_walks`` (:class:`analysis.settings.AnalysisSettings`, whose defaults are the command
        line's). ``subsets``, ``lower_is_better`` and ``max_walks`` are read when ``scores`` is not
        prepared yet.
    metrics : sequence of str, optional
        The score columns to analyse (default: all), when ``scores`` is not read yet.
    progress : bool
        Progress bars over the chance levels' permutations (one per protocol).
    store : ColumnStore, optional
        Keeps each column's SEG values and chance levels by content and reuses them when only other
        columns changed (:mod:`analysis.column_store`); the result is the same bits with or without it.
    **changes
        Single settings replaced (``bootstrap=0``, ``protocols=["graph"]``, ...; an unknown name is a
        ``TypeError`` listing the valid ones).

    Notes
    -----
    The intervals: ``ci_method="percentile"`` (default) or ``"bca"`` (bias and acceleration from
    a leave-one-SEG-out jackknife); ``bootstrap_scheme="rescaled"`` (default; Rao & Wu: ``n - 1``
    draws weighing ``n / (n - 1)``) or ``"plain"``. ``benchmarks/coverage.py`` measured both
    (docs/analysis.md): BCa gained nothing (delta on bounded scores 92.0% vs 92.5% on the same 800
    datasets); the percentile interval with the rescaled bootstrap covers 93.9-95.1% in every
    required cell over 4000 datasets. A cell of fewer than ``min_segs_ci`` SEGs gets NaN bounds.

    Returns
    -------
    AnalysisResult
    """
    settings = resolve_settings(settings, changes)
    if isinstance(scores, AnalysisInputs):
        inputs = scores
    else:
        table = scores if isinstance(scores, ScoreTable) else read_scores(scores, metrics, settings.lower_is_better,
                                                                          dataset)
        inputs = prepare_inputs(table, dataset, settings.subsets, settings.max_walks)
    mms = settings.meta_metrics
    for name in mms:
        get_meta_metric(name)
    results: dict[str, ProtocolResult] = {}
    for p in settings.protocols:
        protocol = get_protocol(p)
        if protocol.name in results:
            raise ValueError(f"expected distinct protocol names, got {protocol.name!r} twice")
        results[protocol.name] = run_protocol(inputs, protocol, settings, progress, store)
    notes = tuple(inputs.notes) + tuple(n for r in results.values() for n in r.failure_notes + r.missing + r.notes)
    return AnalysisResult(inputs.metrics, inputs.lower_is_better, mms, results, settings.bootstrap, settings.seed,
                          settings.confidence, inputs.source, inputs.subset_source, notes, settings.chance,
                          settings.ci_method, settings.bootstrap_scheme, settings.min_segs_ci)
