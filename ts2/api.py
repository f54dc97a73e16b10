"""The Python API: ``import ts2`` and score, validate and compare a metric in a notebook.

Each function builds the typed settings its command's handler builds from the config
(:class:`metrics_adapters.scoring.ScoreSettings`, :class:`analysis.settings.AnalysisSettings`,
:class:`analysis.settings.ComparisonSettings`, :class:`analysis.report.settings.ReportSettings`,
:class:`analysis.report.settings.ExploreSettings`, :class:`analysis.human.settings.HumanSettings`), here from
keyword arguments over the dataclasses' defaults, and calls the same library function. No Hydra config is composed,
except by :func:`load_metric` (and :func:`score` given a metric's name): a metric config is a Hydra config. An
unknown keyword is a ``ValueError`` with close matches. Nothing is computed here. See docs/python.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from analysis.session import Analysis
    from analysis.settings import AnalysisSettings, ComparisonSettings
    from metrics_adapters.base import Metric
    from seg_data.model import SEGDataset

__all__ = ["load_dataset", "load_metric", "score", "analyze", "report", "explore", "reproduce", "human"]

log = logging.getLogger("ts2")


# -- the API ----------------------------------------------------------------------------------------
def load_dataset(source: str | Path = "mini", *, check_images: bool = False,
                 image_roots: Sequence[str | Path] | None = None, **options: Any) -> SEGDataset:
    """A SEG dataset: ``"mini"`` (the bundled synthetic set), ``"ts2"`` (the TS2 release), or a
    path (a TS2 release folder / ``metadata.csv``, or a ts2-seg ``.yaml``/``.json`` file).

    ``options`` are the dataset's keys in ``conf/dataset/NAME.yaml`` (``n_segs=10`` for mini,
    ``path=`` for ts2), as ``ts2 data info dataset=NAME dataset.KEY=VALUE`` takes them; the same
    loader is called with the same arguments (:mod:`ts2.datasets`), no config is composed.
    ``image_roots``: folders the dataset's image paths may point into besides its own. The
    dataset's ``to_frame()`` is one row per image (``seg_id, node, level, file_name, image_path,
    prompt, subset, source``).

    Raises
    ------
    FileNotFoundError
        No dataset at the path.
    ValueError
        An unknown option, or SEGs that do not validate (every problem listed).
    """
    from ts2.datasets import load_source

    try:
        return load_source(source, check_images=check_images,
                           image_roots=None if image_roots is None else [str(r) for r in image_roots], **options)
    except (TypeError, KeyError) as e:  # an unknown option or name: the caller's value, said as a value error
        raise ValueError(str(e).strip("'\"")) from e


def load_metric(name: str, /, **options: Any) -> Metric:
    """The metric ``ts2 score metric=NAME metric.KEY=VALUE ...`` builds: the same config
    (``conf/metric/NAME.yaml``), defaults and cache key.

    Call it on images: ``load_metric("clipscore_hf", model=DIR)(images=[...], prompts=[...])``
    returns a numpy array (:meth:`metrics_adapters.base.Metric.__call__`); or pass it to
    :func:`score`.

    Raises
    ------
    ValueError
        An unknown metric name or key (with close matches).
    """
    from ts2.metric_options import metric_from_name

    return metric_from_name(name, options)


def score(metric: Metric | Callable | str, dataset: SEGDataset | str | Path = "mini", *, device: str | None = None,
          batch_size: int | str | None = None, cache: bool = True, name: str | None = None,
          version: str | int | None = None, higher_is_better: bool = True, **options: Any) -> pd.DataFrame:
    """Score every image of ``dataset`` with ``metric``: a tidy DataFrame like ``scores.csv``
    (``seg_id, node, file_name, image_path, prompt`` + the metric's columns).

    Parameters
    ----------
    metric : Metric, callable or str
        A metric (:func:`load_metric`), a registered metric's config name, or a plain function
        ``f(images: list[PIL.Image], prompts: list[str]) -> sequence of floats`` (wrapped in
        :class:`metrics_adapters.callable.CallableMetric`: batched, cached, resumable).
    dataset : SEGDataset, str or path
        As :func:`load_dataset` takes it.
    device, batch_size
        As ``ts2 score`` takes them (default: ``conf/score.yaml``).
    cache : bool
        Read and write the score cache (``cache_dir=``; default ``$TS2_CACHE_DIR`` or ``~/.cache/ts2``).
    name, version : str
        For a function: its column name and cache key (both required to cache; a new ``version``
        rescores). For a Metric, ``name`` renames its column.
    options
        Other keys of ``conf/score.yaml``: ``precision``, ``num_workers``, ``max_image_side``,
        ``progress``, ``cache_dir``, ``limit``, ``max_failure_share``.

    The run's record (``run.json``'s metric entry: cache hits, failures and their reasons) is in
    ``frame.attrs["run"]``.

    Raises
    ------
    ValueError
        A function without ``name`` while ``cache=True``; a function returning the wrong number of
        scores or NaN/inf; more failed images than ``max_failure_share`` (the first reasons named).
    """
    from metrics_adapters.callable import as_metric, check_contract
    from metrics_adapters.scoring import ScoreSettings, score_dataset

    given = {"device": device, "batch_size": batch_size, **options}
    _check_keywords("ts2.score", options, [k for k in ScoreSettings.keys() if k not in ("cache", "shard")])
    settings = ScoreSettings().updated(cache=bool(cache), **{k: v for k, v in given.items() if v is not None})
    if isinstance(metric, str):
        metric = load_metric(metric)
    m = as_metric(metric, name=name, version=version, cache=cache, higher_is_better=higher_is_better)
    if hasattr(m, "contract_errors"):
        m.contract_errors.clear()
    ds = _optional_dataset(dataset)
    scored = score_dataset([m], ds, settings)
    check_contract(m)
    scored.raise_for_failures()
    frame = m.finalize(scored.frame())
    frame.attrs["run"] = json.loads(json.dumps(scored.runs[0].summary(), default=str))
    frame.attrs["roles"] = {c: r for c, r in m.roles().items() if c in frame.columns}  # read by analyze
    return frame


#: Keywords of :func:`analyze` besides the settings objects' names.
_ANALYZE_KEYWORDS = ("metrics", "reference", "progress", "store", "protocol")


def analyze(scores: pd.DataFrame | Sequence[pd.DataFrame] | str | Path, dataset: SEGDataset | str | Path | None = None, *,
            settings: AnalysisSettings | None = None, comparison: ComparisonSettings | None = None,
            roles: Mapping[str, str] | None = None, **options: Any) -> Analysis:
    """The TS2 meta-metrics of a score table: the same function ``ts2 analyze scores=... [dataset=|path=]``
    calls (:func:`analysis.session.run_analysis`), with the same defaults, without composing a config.

    ``scores`` is a DataFrame (e.g. from :func:`score`), a list of them (joined on the key columns, each
    one's metric roles kept: ``[mine, ts2.score("random", ds)]`` analyses ``random`` as the control it is) or
    a ``scores.csv``; ``dataset`` a loaded dataset, a name or a path (:func:`load_dataset`): given
    either way, the paper's released reference scores lying in its folder are analysed beside
    yours (``reference="auto"``). ``settings`` (:class:`analysis.settings.AnalysisSettings`) and
    ``comparison`` (:class:`analysis.settings.ComparisonSettings`) are the whole settings;
    ``options`` replace single ones (``bootstrap=1000``, ``chance=10``, ``protocols=["paper",
    "graph"]``, ``permutations=9999``, ``compare=["a", "b"]``, ``ranking={"enabled": False}``,
    ...) or name ``metrics``, ``reference``, ``progress``, ``store``; ``protocol="graph"`` (or a
    mapping of protocol options, or an :class:`analysis.protocols.Protocol`) analyses that one
    protocol. ``roles`` marks metrics as ``control`` or ``reference``, over the roles the scores carry (a
    ``scores.csv`` in its ``run.json``, a frame of :func:`score` in ``attrs["roles"]``).

    Returns an :class:`analysis.session.Analysis`: ``.metametrics``, ``.per_seg``, ``.ranking``,
    ``.pairs`` (DataFrames), ``.compare(a, b)``, ``.plot(kind)``, ``.to_report(DIR)``, and the
    Table-2-style table in Jupyter.

    Raises
    ------
    ValueError
        An unknown option (with close matches) or a bad value; a score table missing
        ``seg_id``/``node`` or with non-numeric scores.
    """
    from analysis.session import run_analysis
    from analysis.settings import AnalysisSettings, ComparisonSettings

    valid = (*AnalysisSettings.keys(), *ComparisonSettings.keys(), *_ANALYZE_KEYWORDS)
    _check_keywords("ts2.analyze", options, valid)
    options = dict(options)
    if "protocol" in options:
        if "protocols" in options:
            raise ValueError("ts2.analyze: expected protocol= (one protocol) or protocols= (a list), got both")
        options["protocols"] = [options.pop("protocol")]
    ds = _optional_dataset(dataset)
    carried: dict[str, str] = {}
    if isinstance(scores, list | tuple):
        from seg_data.score_frames import join_score_frames

        scores, carried = join_score_frames(scores)
    elif hasattr(scores, "columns"):
        from seg_data.score_frames import frame_roles

        carried = frame_roles(scores)
    return run_analysis(scores if hasattr(scores, "columns") else str(scores), ds, settings, comparison,
                        roles={**carried, **(roles or {})} or None, **options)


def _check_keywords(where: str, options: Mapping[str, Any], valid: Sequence[str]) -> None:
    """An unknown keyword is a ``ValueError`` naming close matches and the valid ones."""
    from ts2.names import did_you_mean

    for key in options:
        if key not in valid:
            hint = did_you_mean(key, valid, n=1)
            raise ValueError(f"{where}: unknown option {key!r}{hint} (expected one of {sorted(valid)})")


def _results_list(results: str | Path | Sequence[str | Path]) -> list[str]:
    return [str(results)] if isinstance(results, str | Path) else [str(r) for r in results]


def _optional_dataset(dataset: SEGDataset | str | Path | None, image_roots=None) -> SEGDataset | None:
    from seg_data.model import SEGDataset

    if dataset is None or isinstance(dataset, SEGDataset):
        return dataset
    return load_dataset(dataset, image_roots=image_roots)


def _analysis_and_own(where: str, options: Mapping[str, Any], own_keys: Sequence[str]):
    """Keywords split into :class:`AnalysisSettings` (over its defaults) and the command's own."""
    from analysis.settings import AnalysisSettings

    _check_keywords(where, options, (*AnalysisSettings.keys(), *own_keys))
    settings = AnalysisSettings().updated(**{k: v for k, v in options.items() if k in AnalysisSettings.keys()})
    return settings, {k: v for k, v in options.items() if k in own_keys}


def report(results: str | Path | Sequence[str | Path], output_dir: str | Path | None = None,
           dataset: SEGDataset | str | Path | None = None, **options: Any):
    """``ts2 report results=[...]``: merge result folders into one report in ``output_dir``
    (default: ``conf/report.yaml``'s timestamped folder), through the function the command calls
    (:func:`ts2.result_views.write_report`). ``options``: the keys of ``conf/report/default.yaml``
    (:class:`analysis.report.settings.ReportSettings`) and the analysis settings of
    ``conf/analysis/default.yaml`` (``bootstrap``, ``chance``, ``ci_method``, ...: the meta-metrics computed
    for results that have none). Returns :class:`analysis.report.page.ReportOutputs`."""
    from analysis.report.settings import ReportSettings
    from ts2.common import default_output_dir
    from ts2.result_views import write_report

    analysis, own = _analysis_and_own("ts2.report", options, ReportSettings.keys())
    out = default_output_dir("report") if output_dir is None else Path(output_dir)
    return write_report(_results_list(results), out, analysis, ReportSettings().updated(**own),
                        _optional_dataset(dataset))


def explore(results: str | Path | Sequence[str | Path], out: str | Path | None = None,
            dataset: SEGDataset | str | Path | None = None, *, image_roots: Sequence[str | Path] | None = None,
            **options: Any) -> Path:
    """``ts2 explore results=[...] [out=FILE]``: one HTML page to browse where each metric fails (SEGs
    worst first, a SEG's graph, walks, images and scores) from result folders of ``ts2 run``,
    ``ts2 score``, ``ts2 analyze`` or ``ts2 report``. ``out``: the page's path (default: an
    ``explorer.html`` in the command's timestamped folder). ``options``: the keys of
    ``conf/explore.yaml`` (:class:`analysis.report.settings.ExploreSettings`: ``metrics``, ``protocol``,
    ``images``, ``title``, ...). ``dataset`` (loaded, a name or a path) draws the SEGs; without it, the
    dataset the results recorded. Returns the path written."""
    from analysis.report.settings import ExploreSettings
    from ts2.common import default_output_dir
    from ts2.result_views import write_explorer_page

    _check_keywords("ts2.explore", options, ExploreSettings.keys())
    roots = None if image_roots is None else [str(r) for r in image_roots]
    return write_explorer_page(_results_list(results), ExploreSettings().updated(**options),
                               _optional_dataset(dataset, roots), image_roots=roots, out=out,
                               output_dir=None if out is not None else default_output_dir("explore"))[0]


def reproduce(path: str | Path | None = None, output_dir: str | Path | None = None, **options: Any) -> dict:
    """``ts2 reproduce path=... output_dir=...``: the paper's Table 2 from the released scores, in
    both protocols, with the list of cells that differ from the print. ``options``: ``scores``,
    ``revision``, ``figures``, ``pareto`` (``conf/reproduce.yaml``) and the analysis settings of
    ``conf/analysis/default.yaml``. Returns a dict with ``discrepancies`` (DataFrame), ``tables``,
    ``report`` (:func:`analysis.reproduction.reproduce`, which the command calls too)."""
    from analysis.reproduction import reproduce as run_reproduction
    from ts2.common import default_output_dir

    settings, own = _analysis_and_own("ts2.reproduce", options, ("scores", "revision", "figures", "pareto"))
    out = default_output_dir("reproduce") if output_dir is None else Path(output_dir)
    return run_reproduction(None if path is None else str(path), out, settings, **own)


#: Keywords of :func:`human` besides :class:`analysis.human.settings.HumanSettings`' names (the config's names).
_HUMAN_KEYWORDS = ("human_scores", "human_permutations", "human_clusters")


def human(source, output_dir: str | Path | None = None, **options: Any):
    """``ts2 analyze human=SET`` / ``human=[A,B,...]``: how each metric agrees with people.

    ``source``: one set (a path, ``NAME:PATH``, a set ``NAME`` from the hub, or a DataFrame in our
    long CSV's format) or a list of sets (not DataFrames). ``options``: ``human_scores`` (a score
    file, or a list: one per set) and :class:`analysis.human.settings.HumanSettings`' keys
    (``metrics``, ``bootstrap``, ``seed``, ``confidence``, ``permutations``, ``cluster_statistics``,
    ``alpha``, ``progress``; ``conf/analyze.yaml``'s names ``human_permutations`` and ``human_clusters``
    work too). Writes into ``output_dir`` (default: the command's timestamped folder) through the
    function the command calls (:func:`ts2.human_sets.human_views`). Returns, for one set,
    :class:`analysis.human.view.HumanViewOutputs` (``.results``, ``.tests`` DataFrames); for a list,
    :class:`analysis.human.sets.HumanSetsOutputs` (``.long``, ``.summary``, ``.views``)."""
    from analysis.human.settings import HumanSettings
    from seg_data.human import attach_scores, human_from_frame
    from ts2.common import default_output_dir
    from ts2.human_sets import human_entries, human_views, load_human_sets, score_files

    _check_keywords("ts2.human", options, (*HumanSettings.keys(), *_HUMAN_KEYWORDS))
    direct = {k: v for k, v in options.items() if k in HumanSettings.keys()}
    settings = HumanSettings.from_mapping({k: v for k, v in options.items() if k in _HUMAN_KEYWORDS})
    settings = settings.updated(**direct)
    many = isinstance(source, list | tuple)
    if not many and hasattr(source, "columns"):
        hj = human_from_frame(source)
        scores = options.get("human_scores")
        sets = [attach_scores(hj, str(scores)) if isinstance(scores, str | Path) else hj]
    else:
        entries = human_entries(list(source) if many else source)
        sets = load_human_sets(entries, score_files(options.get("human_scores"), len(entries)))
    out = default_output_dir("analyze") if output_dir is None else Path(output_dir)
    res = human_views(sets, out, settings)
    return res if many else res.views[0]
