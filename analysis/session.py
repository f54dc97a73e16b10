"""One analysis of a score table as an object: what ``ts2 analyze`` computes, writes and prints.

:func:`run_analysis` reads a score table (a file or a DataFrame), joins an optional reference
table and dataset, computes the meta-metrics (:func:`analysis.pipeline.analyze`), and, as asked,
the paired comparison of two metrics and the significance-grouped ranking
(:mod:`analysis.compare`). The :class:`Analysis` it returns holds them as tidy DataFrames, draws
the figures of :mod:`analysis.report.plots`, writes the files of ``ts2 analyze`` (:meth:`Analysis.write`)
or a whole report (:meth:`Analysis.to_report`), and shows the Table-2-style table in Jupyter.

``ts2 analyze`` (:mod:`ts2.commands.analyze`) and ``ts2.analyze`` both call :func:`run_analysis`,
so the command line and Python give the same numbers and the same files. Never imports torch.

>>> import pandas as pd
>>> df = pd.DataFrame({"seg_id": ["0"] * 3, "node": ["0", "1", "2"], "m": [0.9, 0.6, 0.1]})
>>> a = run_analysis(df, protocols=["graph"], bootstrap=0, chance=0, ranking=False)
>>> float(a.metametrics.query("meta_metric == 'rank' and subset == 'Avg'")["value"].iloc[0])
1.0
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from seg_data import SEGDataset

from .column_store import ColumnStore
from .pipeline import AnalysisResult
from .settings import AnalysisSettings, ComparisonSettings
from .units import DELTA_NOTE, UNIT_CONVENTION, delta_above_100, delta_numbers
from .verdict import NOTHING_TO_COMPARE

__all__ = ["Analysis", "run_analysis", "auto_reference", "PLOT_KINDS"]

log = logging.getLogger(__name__)

#: What :meth:`Analysis.plot` draws (one function of :mod:`analysis.report.plots` each).
PLOT_KINDS = ("histograms", "heatmap", "scatter", "pareto")


def auto_reference(dataset_path: str | Path | None, scores: str | Path | pd.DataFrame) -> Path | None:
    """The released per-image scores of the paper (``released/scores_subset.csv``) when they lie in
    the dataset folder ``dataset_path`` and are not ``scores`` itself (``reference=auto``)."""
    if not dataset_path:
        return None
    p = Path(str(dataset_path))
    cand = (p if p.is_dir() else p.parent) / "released" / "scores_subset.csv"
    if not cand.is_file():
        return None
    if not isinstance(scores, pd.DataFrame) and cand.resolve() == Path(str(scores)).resolve():
        return None
    return cand


@dataclass(frozen=True, eq=False)
class Analysis:
    """The meta-metrics of a score table, with what ``ts2 analyze`` computed beside them.

    Attributes
    ----------
    result : AnalysisResult
        Every protocol's estimates, CIs, chance levels and per-SEG values.
    extra : mapping of str to DataFrame
        ``compare`` (the pair asked for), ``ranking`` and ``pairs`` when computed (written as
        ``<name>.csv``).
    scores : DataFrame
        The score table analysed (``seg_id``, ``node``, [``file_name``], one column per metric,
        reference metrics joined), as read: for the figures and the report.
    roles : mapping of str to str
        Metric -> ``metric`` | ``control`` | ``reference`` (from ``run.json`` beside a score file).
    """

    result: AnalysisResult
    scores: pd.DataFrame
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    roles: Mapping[str, str] = field(default_factory=dict)
    dataset_name: str | None = None
    score_files: tuple[str, ...] = ()
    dataset_path: str | None = None  # the dataset's folder, recorded in analysis.json
    prompts: Mapping[str, str] = field(default_factory=dict)
    verdict_result: Any = None  # analysis.verdict.Verdict (None: not computed, e.g. one metric only)
    settings: AnalysisSettings = AnalysisSettings()  # how it was computed
    comparison: ComparisonSettings = ComparisonSettings()  # how metrics were compared and ranked
    dataset: Any = field(default=None, repr=False)  # the SEGDataset analysed (the report's explorer draws it)

    @property
    def permutations(self) -> int:
        return self.comparison.permutations

    @property
    def table_meta_metrics(self) -> tuple[str, ...]:
        return self.comparison.table_meta_metrics

    @property
    def ranking_alpha(self) -> float:
        return self.comparison.ranking.alpha

    # -- tidy tables -----------------------------------------------------------------------------
    @property
    def metametrics(self) -> pd.DataFrame:
        """One row per metric, protocol, meta-metric and subset: value, CI, SEG count, chance level
        and chance-adjusted value (:meth:`AnalysisResult.metametrics_frame`; ``metametrics.csv``)."""
        return self.result.metametrics_frame()

    @property
    def per_seg(self) -> pd.DataFrame:
        """One row per metric, protocol, meta-metric and SEG (``per_seg.csv``)."""
        return self.result.per_seg_frame()

    @property
    def ranking(self) -> pd.DataFrame:
        """Metrics ranked per protocol and meta-metric with Holm-corrected significance groups
        (``ranking.csv``; empty with fewer than two metrics or ``ranking`` off)."""
        return self.extra.get("ranking", pd.DataFrame())

    @property
    def pairs(self) -> pd.DataFrame:
        """Every pairwise test behind :attr:`ranking` (``pairs.csv``)."""
        return self.extra.get("pairs", pd.DataFrame())

    @property
    def verdict(self) -> pd.DataFrame:
        """Every metric under evaluation against every reference and control: its place and Holm
        group per meta-metric, the paired difference with its CI, p and Holm-adjusted p
        (:func:`analysis.verdict.verdict`; ``verdict.csv``). Empty when not computed."""
        return self.verdict_result.table if self.verdict_result is not None else pd.DataFrame()

    def verdict_lines(self) -> list[str]:
        """One summary line per metric under evaluation (what ``ts2 analyze`` prints last), with
        the direction warning where a metric's rank_m CI lies wholly below 0."""
        return self.verdict_result.summary_lines() if self.verdict_result is not None else []

    @property
    def metrics(self) -> tuple[str, ...]:
        return self.result.metrics

    def compare(self, a: str, b: str, protocol: str | None = None, n_permutations: int | None = None) -> pd.DataFrame:
        """The paired comparison of metrics ``a`` and ``b`` on the same SEGs, per protocol
        (all protocols when ``protocol`` is None): difference, bootstrap CI, permutation p-value
        (:func:`analysis.compare.compare_metrics`, seeded by the analysis' ``seed``).

        Raises
        ------
        KeyError
            ``a``, ``b`` or ``protocol`` is not in the analysis (the valid names are listed).
        """
        from .compare import compare_metrics

        for m in (a, b):
            if m not in self.result.metrics:
                raise KeyError(f"expected a metric among {list(self.result.metrics)}, got {m!r}")
        protos = list(self.result.protocols) if protocol is None else [self.result.get(protocol).protocol.name]
        n = self.permutations if n_permutations is None else int(n_permutations)
        return pd.concat([compare_metrics(self.result, a, b, protocol=p, n_permutations=n, seed=self.result.seed)
                          for p in protos], ignore_index=True)

    # -- text and HTML ---------------------------------------------------------------------------
    def summary(self, verdict: bool = True) -> str:
        """The text ``ts2 analyze`` prints: a table per protocol (values in %, CIs), the chance
        levels, the comparison asked for, the best ranking group and (``verdict``) one verdict
        line per metric under evaluation."""
        from .report.outputs import compare_text, summary_text

        result = self.result
        shown = list(self.table_meta_metrics) or ["rank", "sep", "delta"]
        absent = [m for m in shown if m not in result.meta_metrics]
        if absent:
            log.warning("table_meta_metrics names %s, not among the meta-metrics computed (meta_metrics=%s): "
                        "left out of the printed table", absent, list(result.meta_metrics))
            shown = [m for m in shown if m in result.meta_metrics] or list(result.meta_metrics[:3])
        text = summary_text(result, meta_metrics=shown)
        if "compare" in self.extra:
            text += "\n" + compare_text(self.extra["compare"], min_segs_ci=result.min_segs_ci)
        if "ranking" in self.extra:
            text += best_group_text(self.extra["ranking"], self.ranking_alpha)
        return text + (self.verdict_text(above=text) if verdict else "")

    def verdict_text(self, above: str = "") -> str:
        """The verdict as printed last by ``ts2 analyze`` and :meth:`summary`: one line per metric under
        evaluation, then one line when there was nothing to compare with (no reference, no control) and the
        delta_m note when a printed delta_m exceeds 100 % and ``above`` (the text printed before) lacks it."""
        lines = self.verdict_lines()
        if not lines:
            return ""
        text = "\nverdict (verdict.csv):\n" + "\n".join(lines) + "\n"
        if not self.has_comparisons:
            text += NOTHING_TO_COMPARE + "\n"
        if DELTA_NOTE not in above and delta_above_100(delta_numbers(self.verdict)):
            text += DELTA_NOTE + "\n"
        return text

    @property
    def has_comparisons(self) -> bool:
        """Whether the verdict compared some metric with a reference or a control."""
        v = self.verdict
        return bool(len(v)) and "against" in v and bool(v["against"].fillna("").astype(str).ne("").any())

    def __repr__(self) -> str:
        return (f"Analysis(metrics={list(self.result.metrics)}, protocols={list(self.result.protocols)}, "
                f"bootstrap={self.result.bootstrap}, chance={self.result.chance})")

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        """The Table-2-style table of every protocol (values in %, :mod:`analysis.units`; CIs below, chance levels),
        as in ``report.html`` (:func:`analysis.report.page.metametrics_html`)."""
        import html

        from .report.page import metametrics_html

        mm = self.metametrics
        parts = [f"<p>TS2 meta-metrics of {html.escape(', '.join(self.result.metrics))}; "
                 f"{self.result.bootstrap} SEG bootstrap resamples, {100 * self.result.confidence:g}% CIs; "
                 f"{html.escape(UNIT_CONVENTION)}</p>"]
        for p in self.result.protocols:
            parts.append(f"<h4>protocol: {html.escape(p)}</h4>" + metametrics_html(mm, p, roles=self.roles))
        return "".join(parts)

    # -- figures ---------------------------------------------------------------------------------
    def plot(self, kind: str = "histograms", *, metrics: Sequence[str] | None = None, protocol: str | None = None,
             seg_id: str | None = None, meta_metric: str = "rank", flops: Mapping[str, float] | None = None,
             labels: Mapping[str, str] | None = None):
        """A matplotlib ``Figure`` of this analysis (the report's figures, one at a time).

        Parameters
        ----------
        kind : {"histograms", "heatmap", "scatter", "pareto"}
            ``histograms``: score distributions per error count (:func:`analysis.report.plots.score_histograms`);
            ``heatmap``: one SEG's scores, nodes by error count (``seg_id``; default the first SEG);
            ``scatter``: per-SEG ``meta_metric`` of two ``metrics`` (default the first two);
            ``pareto``: ``meta_metric`` against ``flops`` (metric -> FLOPs per image, required).
        metrics : sequence of str, optional
            The metrics drawn (default: all).
        protocol : str, optional
            Protocol of the meta-metrics drawn (default: the first).

        Raises
        ------
        ValueError
            Unknown ``kind``, or what the kind needs is missing (two metrics, ``flops``).
        KeyError
            Unknown metric, protocol or SEG.
        """
        from .report import plots
        from .report.plots_pareto import pareto_figure

        if kind not in PLOT_KINDS:
            raise ValueError(f"expected kind one of {list(PLOT_KINDS)}, got {kind!r}")
        ms = list(self.result.metrics) if metrics is None else [str(m) for m in metrics]
        for m in ms:
            if m not in self.result.metrics:
                raise KeyError(f"expected a metric among {list(self.result.metrics)}, got {m!r}")
        pname = self.result.get(protocol).protocol.name if protocol is not None else next(iter(self.result.protocols))
        if kind == "histograms":
            return plots.score_histograms(self.scores, ms, labels=labels)
        if kind == "heatmap":
            ids = list(dict.fromkeys(self.scores["seg_id"].astype(str)))
            sid = ids[0] if seg_id is None else str(seg_id)
            if sid not in ids:
                raise KeyError(f"expected a seg_id among the {len(ids)} SEGs of the scores, got {seg_id!r}")
            ps = self.per_seg
            vals = ps[(ps["protocol"] == pname) & (ps["meta_metric"] == "rank") & (ps["seg_id"] == sid)]
            return plots.seg_heatmap(self.scores, sid, ms, lower_is_better=sorted(self.result.lower_is_better),
                                     seg_values=dict(zip(vals["metric"], vals["value"], strict=True)), labels=labels,
                                     prompt=self.prompts.get(sid))
        if kind == "scatter":
            if len(ms) < 2:
                raise ValueError(f"expected two metrics for a scatter, got {ms}")
            return plots.rank_scatter(self.per_seg, ms[0], ms[1], meta_metric=meta_metric, protocol=pname,
                                      labels=labels)
        if not flops:
            raise ValueError("expected flops={metric: FLOPs per image, ...} for a Pareto figure, got none")
        pts = self.metametrics
        pts = pts[(pts["protocol"] == pname) & pts["metric"].isin(ms)].copy()
        pts["flops"] = pts["metric"].map(dict(flops))
        pts["role"] = pts["metric"].map(lambda m: self.roles.get(m, "metric"))
        return pareto_figure(pts, meta_metric, labels=labels)

    # -- files -----------------------------------------------------------------------------------
    def write(self, output_dir: str | Path) -> list[Path]:
        """Write what ``ts2 analyze`` writes (``metametrics.csv``, ``per_seg.csv``,
        ``table.md/.tex/.csv``, ``analysis.json`` and the ``extra`` frames) into ``output_dir``,
        as one result set (:func:`analysis.report.outputs.write_outputs`)."""
        from .report.outputs import write_outputs

        return write_outputs(self.result, output_dir, dict(self.extra), roles=dict(self.roles),
                             dataset=self.dataset_name, score_files=list(self.score_files),
                             dataset_path=self.dataset_path)

    def to_report(self, output_dir: str | Path, *, title: str = "TS2 report", figures: Sequence[str] | None = None,
                  labels: Mapping[str, str] | None = None, flops: Mapping[str, float] | None = None,
                  figure_protocol: str | None = None, heatmaps: int = 2, scatter: Sequence[str] | None = None):
        """Write the report (``report.html`` with figures, ``scores.csv``, ``pareto.csv``, the SEG
        explorer ``explorer.html`` linked from it, the synthetic-data caveat when the dataset is
        generated: what ``ts2 report`` writes) and the files of ``ts2 analyze``
        (:meth:`write`, byte for byte) into ``output_dir``, as one result set. Returns
        :class:`analysis.report.page.ReportOutputs`."""
        from seg_data.result_sets import result_set

        from .report import page as rp
        from .report.settings import ReportSettings

        merged = self._merged(flops)
        with result_set(output_dir, "ts2.analyze to_report"):
            settings = ReportSettings(title=title, figure_protocol=figure_protocol, labels=dict(labels or {}),
                                      scatter=None if scatter is None else tuple(scatter), heatmaps=heatmaps,
                                      figures=None if figures is None else tuple(figures), explorer=True)
            out = rp.write_report(merged, output_dir, settings, rp.ReportContent(
                verdict=self.verdict_result, dataset=self.dataset, prompts=dict(self.prompts) or None))
            self.write(output_dir)  # after the report: the analysis files are exactly those of ts2 analyze
        return out


    def _merged(self, flops: Mapping[str, float] | None = None):
        """This analysis as the :class:`analysis.report.merged.MergedResults` the report and explorer draw."""
        from .report.merged import MergedResults, RunInfo

        return MergedResults(
            scores=self.scores, metametrics=self.metametrics, per_seg=self.per_seg, flops=dict(flops or {}),
            lower_is_better=self.result.lower_is_better,
            runs=(RunInfo(label=Path(self.score_files[0]).name if self.score_files else self.result.source,
                             dirs=tuple(self.score_files), overrides={}, columns={m: m for m in self.result.metrics},
                             n_images=len(self.scores)),),
            notes=tuple(self.result.notes), roles=dict(self.roles), dataset=self.dataset_name,
            confidence=self.result.confidence)

    def explore(self, path: str | Path, dataset: SEGDataset | None = None, *, protocol: str | None = None,
                title: str = "SEG explorer"):
        """Write the SEG explorer of this analysis (:func:`analysis.report.explorer.write_explorer`: one
        self-contained HTML page; ``dataset`` adds the real graphs and image thumbnails) to ``path``.
        Returns the explorer's result (page size, SEG and image counts)."""
        from .report.explorer import write_explorer

        return write_explorer(self._merged(), Path(path), dataset, protocol=protocol, title=title)


def _names(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def run_analysis(scores: str | Path | pd.DataFrame, dataset: SEGDataset | None = None,
                 settings: AnalysisSettings | None = None, comparison: ComparisonSettings | None = None, *,
                 metrics: Sequence[str] | None = None, reference: str | Path | pd.DataFrame | None = "auto",
                 roles: Mapping[str, str] | None = None, progress: bool = True,
                 store: bool | ColumnStore | None = True, **changes: Any) -> Analysis:
    """Analyse a score table: what ``ts2 analyze`` and ``ts2.analyze`` both call.

    Parameters
    ----------
    scores : path or DataFrame
        Wide (``seg_id, node, [file_name], one column per metric``) or long score table.
    dataset : SEGDataset, optional
        The SEGs to join the scores to on ``file_name`` (real edges and subsets).
    settings : AnalysisSettings, optional
        How the meta-metrics are computed (:class:`analysis.settings.AnalysisSettings`; default:
        those of ``conf/analysis/default.yaml``).
    comparison : ComparisonSettings, optional
        How metrics are compared and ranked: ``permutations``, ``compare``, ``ranking``,
        ``table_meta_metrics`` (:class:`analysis.settings.ComparisonSettings`; default: those of
        ``conf/analyze.yaml``).
    metrics : sequence of str, optional
        The score columns to analyse (default: every one).
    reference : "auto", path, DataFrame or None
        A second score table analysed beside (joined on ``file_name``; a clashing column becomes
        ``NAME_reference``). ``"auto"`` (default): the paper's released per-image scores
        (``released/scores_subset.csv``) when they lie in the dataset's folder, whichever way the
        dataset was given (a path or a loaded :class:`SEGDataset`); a reference that cannot be
        read or joined is then a logged warning. A reference you name must join.
    roles : mapping of str to str, optional
        Metric -> ``metric`` | ``control`` | ``reference``, over those of the ``run.json`` beside a
        score file (a DataFrame has none): reports draw controls as a floor, not as competitors.
    progress : bool
        Progress bars over the chance levels' permutations (``progress`` of ``ts2 analyze``).
    store : bool or ColumnStore
        True (default): each column's SEG values and chance levels are kept in the analysis store
        of the cache folder and reused when the same column is analysed again with the same
        structure and settings (:mod:`analysis.column_store`; the same results, faster); False or
        None: everything is computed; a :class:`~analysis.column_store.ColumnStore`: that one.
    **changes
        Single settings of either object replaced (``bootstrap=0``, ``permutations=999``,
        ``ranking={"enabled": False}``, ...).

    Raises
    ------
    TypeError
        A keyword that is no setting (the valid ones listed).
    ValueError
        A malformed score table (missing ``seg_id``/``node``, non-numeric scores: the file, row and
        column named), ``compare`` not two metric names, an unknown metric, a bad setting.
    FileNotFoundError
        A score or reference file that does not exist.
    """
    from seg_data.results import run_record_beside

    from .pipeline import analyze
    from .scores_io import prepare_inputs, read_scores
    from .settings import split_changes

    a_changes, c_changes = split_changes(changes)
    settings = (settings if settings is not None else AnalysisSettings()).updated(**a_changes)
    comparison = (comparison if comparison is not None else ComparisonSettings()).updated(**c_changes)
    source = scores if isinstance(scores, pd.DataFrame) else str(scores)
    table = read_scores(source, metrics=_names(metrics) or None, dataset=dataset)
    run = None if isinstance(scores, pd.DataFrame) else run_record_beside(str(scores))
    roles_given = dict(roles or {})
    roles = _metric_roles(table.metrics, roles_given, run)
    required = not (isinstance(reference, str) and reference == "auto")
    if not required:
        reference = auto_reference(_dataset_folder(dataset), scores)
    table, ref_name = _join_reference(table, reference, required, settings.lower_is_better, roles, roles_given)
    inputs = prepare_inputs(table, dataset, settings.subsets, settings.max_walks)
    result = analyze(inputs, settings=settings, progress=progress, store=open_store(store))
    extra = _asked_comparison(result, comparison, settings.seed)
    vd = _ranking_and_verdict(result, roles, comparison, settings.seed, extra)
    return Analysis(result=result, scores=table.frame, extra=extra, roles=roles,
                    dataset_name=getattr(dataset, "name", None) or (run.dataset if run else None),
                    score_files=_score_files_read(scores, reference, ref_name), dataset_path=_dataset_folder(dataset),
                    prompts={s.seg_id: s.prompt for s in dataset} if dataset is not None else {},
                    verdict_result=vd, settings=settings, comparison=comparison, dataset=dataset)


def _asked_comparison(result: AnalysisResult, comparison: ComparisonSettings, seed: int) -> dict[str, pd.DataFrame]:
    """``{"compare": frame}`` of the two metrics ``comparison.compare`` names, every protocol
    (:func:`analysis.compare.compare_metrics`); empty when none is asked for."""
    if not comparison.compare:
        return {}
    from .compare import compare_metrics

    a, b = comparison.compare
    return {"compare": pd.concat([compare_metrics(result, a, b, protocol=p, n_permutations=comparison.permutations,
                                                  seed=seed) for p in result.protocols], ignore_index=True)}


def _score_files_read(scores, reference, ref_name: str | None) -> tuple[str, ...]:
    """The score files an analysis read, for ``analysis.json``: the user's table, then the
    reference table when one was read from a file (frames have no path)."""
    files = [] if isinstance(scores, pd.DataFrame) else [str(scores)]
    if ref_name is not None and not isinstance(reference, pd.DataFrame):
        files.append(ref_name)
    return tuple(files)


def open_store(store: bool | ColumnStore | None) -> ColumnStore | None:
    """The analysis store ``store`` stands for (``run_analysis``'s parameter); a cache folder that
    is not a folder is logged and the analysis computes everything."""
    if store is None or store is False:
        return None
    if store is True:
        try:
            return ColumnStore.at()
        except OSError as e:
            log.warning("analysis store not used: %s", e)
            return None
    return store


def _metric_roles(metrics: Sequence[str], given: Mapping[str, str], run) -> dict[str, str]:
    """Each metric's role: the caller's, else the ``run.json``'s, else ``metric``."""
    from seg_data.results import ROLES

    bad = {m: r for m, r in given.items() if r not in ROLES}
    if bad:
        raise ValueError(f"expected roles among {list(ROLES)}, got {bad}")
    return {m: given.get(m, run.roles.get(m, "metric") if run else "metric") for m in metrics}


def _dataset_folder(dataset) -> str | None:
    """The folder a dataset was read from (None for a generated or in-memory one)."""
    root = getattr(dataset, "root", None)
    return None if root is None else str(Path(root).resolve())


def _join_reference(table, reference, required: bool, lower_is_better: Sequence[str], roles: dict[str, str],
                    roles_given: Mapping[str, str]):
    """``table`` with the reference score table joined (its metrics added to ``roles`` as
    ``reference``) and ``lower_is_better`` applied; ``(table, reference name or None)``. A
    reference that cannot be read or joined raises when ``required``, else logs a warning."""
    from .scores_io import apply_lower_is_better, identical_to_reference, read_scores, with_reference

    ref_table = None
    ref_name = None if reference is None else ("<frame>" if isinstance(reference, pd.DataFrame) else str(reference))
    if reference is not None:
        try:
            ref_table = read_scores(reference if isinstance(reference, pd.DataFrame) else str(reference))
        except ValueError as e:
            if required:
                raise
            log.warning("not analysing the reference metrics of %s (reference=auto): %s", ref_name, e)
            ref_name = None
    # lower_is_better applies to every column of that name: yours, the reference's, or both.
    table, ref_table = apply_lower_is_better(list(lower_is_better), table, ref_table)
    if ref_table is not None:
        try:
            same = identical_to_reference(table, ref_table)  # a copy of a reference is that reference
            table = with_reference(table, ref_table)
            log.info("analysing the reference metrics of %s beside %s", ref_name, table.source)
            roles |= {m: roles_given.get(m, "reference") for m in table.metrics if m not in roles or m in same}
        except ValueError as e:
            if required:  # a reference you named must join; the automatic one never fails a run
                raise
            log.warning("not analysing the reference metrics of %s (reference=auto; reference=null turns "
                        "this off): %s", ref_name, e)
            ref_name = None
    return table, ref_name


def _ranking_and_verdict(result: AnalysisResult, roles: Mapping[str, str], comparison: ComparisonSettings,
                         seed: int, extra: dict[str, pd.DataFrame]):
    """The significance-grouped ranking (into ``extra``, when enabled and >= 2 metrics) and the
    verdict (``extra["verdict"]``; it reuses the ranking's tests). Returns the verdict."""
    from .compare import rank_cells
    from .verdict import verdict

    rk, permutations = comparison.ranking, comparison.permutations
    if rk.enabled and len(result.metrics) >= 2:
        # All cells at once: their permutation tests share the sign draws (rank_cells).
        cells = [(mm, rk.subset, p) for p in result.protocols for mm in rk.meta_metrics if mm in result.meta_metrics]
        done = rank_cells(result, cells, alpha=rk.alpha, n_permutations=permutations, seed=seed)
        rankings, pairs = [r for r, _ in done], [t for _, t in done]
        if rankings:
            extra["ranking"] = pd.concat(rankings, ignore_index=True)
            extra["pairs"] = pd.concat(pairs, ignore_index=True)
    # Always, as ts2 analyze (with one metric it only places it); it reuses the ranking's tests and
    # computes the places the ranking left out.
    vd = verdict(result, roles, meta_metrics=list(rk.meta_metrics) or ["rank", "sep", "delta"], subset=rk.subset,
                 alpha=rk.alpha, n_permutations=permutations, seed=seed,
                 ranking=(extra["ranking"], extra["pairs"]) if "ranking" in extra else None)
    extra["verdict"] = vd.table
    if "ranking" in extra:  # ranking off: the places stay in verdict.csv only
        extra["ranking"], extra["pairs"] = vd.ranking, vd.pairs
    return vd


def best_group_text(ranking: pd.DataFrame, alpha: float) -> str:
    """The summary's line naming the best significance group of the first ranked cell (its
    protocol, meta-metric, subset): the metrics not significantly different from the best."""
    first = ranking[(ranking["meta_metric"] == ranking["meta_metric"].iloc[0])
                    & (ranking["protocol"] == ranking["protocol"].iloc[0])]
    best = ", ".join(first[first["group"] == 1]["metric"])
    return (f"\nbest group ({first['protocol'].iloc[0]}, {first['meta_metric'].iloc[0]}, "
            f"{first['subset'].iloc[0]}; not significantly different, Holm alpha={alpha}): {best}\n")

