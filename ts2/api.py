"""The Python API: ``import ts2`` and score, validate and compare a metric in a notebook.

Each function calls the library function its command's handler calls, with the same defaults:
:func:`load_dataset` and :func:`analyze` build the typed objects directly (the dataset group's
files, :class:`analysis.settings.AnalysisSettings`, :class:`analysis.settings.ComparisonSettings`);
the others still compose the command's Hydra config (``conf/<command>.yaml``, keyword arguments as
``key=value`` overrides, checked like the command line's). An unknown keyword is a ``ValueError``
with close matches. Nothing is computed here. See docs/python.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
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


# -- keyword arguments -> Hydra overrides -------------------------------------------------------------
def _value(v: Any) -> str:
    """A Python value in Hydra's override grammar (strings quoted, so paths and spaces survive)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, Path):
        v = str(v)
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{k}:{_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, Sequence):
        return "[" + ",".join(_value(x) for x in v) + "]"
    raise TypeError(f"expected a number, string, bool, None, list or dict option value, got {type(v).__name__}")


@lru_cache(maxsize=16)
def _groups(config: str) -> frozenset[str]:
    """The config groups a primary config chooses (``protocol``, ``metric``, ...)."""
    from ts2.config_check import compose_config

    return frozenset(compose_config(config, []).hydra.runtime.choices.keys())


def _overrides(config: str, options: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key=value`` overrides; a group choice (``protocol="graph"``) stays unquoted, a mapping
    given for a config node that is a mapping (``ranking={"enabled": False}``) sets its keys."""
    groups = _groups(config)
    out = []
    for k, v in options.items():
        key = f"{prefix}{k}"
        if key in groups and isinstance(v, str):
            out.append(f"{key}={v}")
        elif isinstance(v, Mapping) and v and key in _dict_nodes(config):
            out += _overrides(config, v, prefix=f"{key}.")
        else:
            out.append(f"{key}={_value(v)}")
    return out


@lru_cache(maxsize=16)
def _dict_nodes(config: str) -> frozenset[str]:
    from omegaconf import DictConfig

    from ts2.config_check import compose_config, config_keys

    cfg = compose_config(config, [])
    return frozenset(k.rpartition(".")[0] for k in config_keys(cfg) if "." in k
                     and isinstance(cfg.get(k.split(".")[0]), DictConfig))


def _compose(config: str, overrides: list[str], prog: str):
    """The config ``ts2 <config> <overrides>`` runs with, checked as the command line checks it."""
    from ts2.config_check import precheck

    return precheck(prog, config, overrides)


def _is_dataset_name(source: str) -> bool:
    from ts2.config_check import group_options

    return source in group_options("dataset") and not Path(source).exists()


def _dataset_overrides(source: str | Path) -> list[str]:
    if isinstance(source, str) and _is_dataset_name(source):
        return [f"dataset={source}"]
    return [f"path={_value(str(source))}"]


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
    from omegaconf import open_dict

    from ts2.commands.score import build_metrics

    cfg = _compose("score", [f"metric={name}", *_overrides("score", options, prefix="metric.")],
                   "ts2.load_metric")
    with open_dict(cfg):
        cfg.output_dir = None  # no answers.csv beside nothing: a metric used from Python writes no files
    return build_metrics(cfg)[0]


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
    from metrics_adapters.cache import open_cache
    from metrics_adapters.callable import as_metric, check_contract
    from metrics_adapters.engine import items_from_table, resolve_device, score_metric, scores_frame
    from seg_data.model import SEGDataset
    from ts2.commands.score import engine_settings

    given = {"device": device, "batch_size": batch_size, **options}
    cfg = _compose("score", _overrides("score", {k: v for k, v in given.items() if v is not None}), "ts2.score")
    if isinstance(metric, str):
        metric = load_metric(metric)
    m = as_metric(metric, name=name, version=version, cache=cache, higher_is_better=higher_is_better)
    if hasattr(m, "contract_errors"):
        m.contract_errors.clear()
    settings = engine_settings(cfg)
    resolve_device(settings.device)
    ds = dataset if isinstance(dataset, SEGDataset) else load_dataset(dataset)
    table = ds.image_table()
    if cfg.get("limit") is not None:
        table = table.head(int(cfg.limit))
    items = items_from_table(table)
    if not items:
        raise ValueError(f"expected images to score, got none in dataset {ds.name!r}")
    with open_cache(bool(cache), cfg.cache_dir) as store:
        run = score_metric(m, items, store, settings)
    check_contract(m)
    if run.failure_share > float(cfg.max_failure_share):
        reasons = "; ".join(f"{f.file_name}: {f.reason}" for f in run.failures[:3])
        raise ValueError(f"{m.name}: expected at most {100 * float(cfg.max_failure_share):.1f}% failed images "
                         f"(max_failure_share), got {run.n_failed} of {run.n_items}: {reasons}")
    frame = m.finalize(scores_frame(items, [run]))
    frame.attrs["run"] = json.loads(json.dumps(run.summary(), default=str))
    return frame


#: Keywords of :func:`analyze` besides the settings objects' names.
_ANALYZE_KEYWORDS = ("metrics", "reference", "progress", "store", "protocol")


def analyze(scores: pd.DataFrame | str | Path, dataset: SEGDataset | str | Path | None = None, *,
            settings: AnalysisSettings | None = None, comparison: ComparisonSettings | None = None,
            roles: Mapping[str, str] | None = None, **options: Any) -> Analysis:
    """The TS2 meta-metrics of a score table: the same function ``ts2 analyze scores=... [dataset=|path=]``
    calls (:func:`analysis.session.run_analysis`), with the same defaults, without composing a config.

    ``scores`` is a DataFrame (e.g. from :func:`score`, or several joined on the base columns) or
    a ``scores.csv``; ``dataset`` a loaded dataset, a name or a path (:func:`load_dataset`): given
    either way, the paper's released reference scores lying in its folder are analysed beside
    yours (``reference="auto"``). ``settings`` (:class:`analysis.settings.AnalysisSettings`) and
    ``comparison`` (:class:`analysis.settings.ComparisonSettings`) are the whole settings;
    ``options`` replace single ones (``bootstrap=1000``, ``chance=10``, ``protocols=["paper",
    "graph"]``, ``permutations=9999``, ``compare=["a", "b"]``, ``ranking={"enabled": False}``,
    ...) or name ``metrics``, ``reference``, ``progress``, ``store``; ``protocol="graph"`` (or a
    mapping of protocol options, or an :class:`analysis.protocols.Protocol`) analyses that one
    protocol. ``roles`` marks metrics as ``control`` or ``reference`` (a ``scores.csv`` has them in
    its ``run.json``; a DataFrame has none).

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
    from seg_data.model import SEGDataset

    valid = (*AnalysisSettings.keys(), *ComparisonSettings.keys(), *_ANALYZE_KEYWORDS)
    _check_keywords("ts2.analyze", options, valid)
    options = dict(options)
    if "protocol" in options:
        if "protocols" in options:
            raise ValueError("ts2.analyze: expected protocol= (one protocol) or protocols= (a list), got both")
        options["protocols"] = [options.pop("protocol")]
    ds = dataset if dataset is None or isinstance(dataset, SEGDataset) else load_dataset(dataset)
    return run_analysis(scores if hasattr(scores, "columns") else str(scores), ds, settings, comparison,
                        roles=roles, **options)


def _check_keywords(where: str, options: Mapping[str, Any], valid: Sequence[str]) -> None:
    """An unknown keyword is a ``ValueError`` naming close matches and the valid ones."""
    from ts2.names import did_you_mean

    for key in options:
        if key not in valid:
            hint = did_you_mean(key, valid, n=1)
            raise ValueError(f"{where}: unknown option {key!r}{hint} (expected one of {sorted(valid)})")


def report(results: str | Path | Sequence[str | Path], output_dir: str | Path | None = None,
           dataset: SEGDataset | str | Path | None = None, **options: Any):
    """``ts2 report results=[...]``: merge result folders into one report in ``output_dir``
    (default: ``conf/report.yaml``'s timestamped folder). ``options``: the keys of
    ``conf/report/default.yaml`` and the analysis settings of ``conf/analysis/default.yaml``
    (``bootstrap``, ``chance``, ``ci_method``, ...: the meta-metrics computed for results that have
    none). Returns :class:`analysis.report.page.ReportOutputs`."""
    from seg_data.model import SEGDataset
    from ts2.commands.report import report_from_config
    from ts2.common import load_dataset as load_configured

    results = [results] if isinstance(results, str | Path) else list(results)
    ov = _overrides("report", {"results": [str(r) for r in results], **options})
    if output_dir is not None:
        ov.append(f"output_dir={_value(str(output_dir))}")
    if dataset is not None and not isinstance(dataset, SEGDataset):
        ov += _dataset_overrides(dataset)
    cfg = _compose("report", ov, "ts2.report")
    ds = dataset if dataset is None or isinstance(dataset, SEGDataset) else load_configured(cfg)
    return report_from_config(cfg, results, Path(str(cfg.output_dir)), ds)


def explore(results: str | Path | Sequence[str | Path], out: str | Path | None = None,
            dataset: SEGDataset | str | Path | None = None, **options: Any) -> Path:
    """``ts2 explore results=[...] [out=FILE]``: one HTML page to browse where each metric fails (SEGs
    worst first, a SEG's graph, walks, images and scores) from result folders of ``ts2 run``,
    ``ts2 score``, ``ts2 analyze`` or ``ts2 report``. ``out``: the page's path (default: an
    ``explorer.html`` in the command's timestamped folder). ``options``: the keys of
    ``conf/explore.yaml`` (``metrics``, ``protocol``, ``images``, ``title``, ...). ``dataset`` (a
    loaded one is not needed: give its name or path) draws the SEGs when the results do not record
    theirs. Returns the path written."""
    from seg_data.model import SEGDataset
    from ts2.commands.explore import explore_from_config

    if isinstance(dataset, SEGDataset):
        dataset = getattr(dataset, "root", None)
        if dataset is None:
            raise ValueError("ts2.explore: expected a dataset name or path (or a dataset loaded from a folder), "
                             "got an in-memory dataset")
    results = [results] if isinstance(results, str | Path) else list(results)
    ov = _overrides("explore", {"results": [str(r) for r in results], **options})
    if out is not None:
        ov.append(f"out={_value(str(out))}")
    if dataset is not None:
        ov += _dataset_overrides(dataset)
    cfg = _compose("explore", ov, "ts2.explore")
    return explore_from_config(cfg)[0]


def reproduce(path: str | Path | None = None, output_dir: str | Path | None = None, **options: Any) -> dict:
    """``ts2 reproduce path=... output_dir=...``: the paper's Table 2 from the released scores, in
    both protocols, with the list of cells that differ from the print. ``options``: the keys of
    ``conf/reproduce.yaml`` and the analysis settings of ``conf/analysis/default.yaml``. Returns a dict with
    ``discrepancies`` (DataFrame), ``tables``, ``report`` (:func:`analysis.reproduction.reproduce`)."""
    from ts2.commands.reproduce import reproduce_from_config

    ov = _overrides("reproduce", {"path": None if path is None else str(path), **options})
    if output_dir is not None:
        ov.append(f"output_dir={_value(str(output_dir))}")
    cfg = _compose("reproduce", ov, "ts2.reproduce")
    return reproduce_from_config(cfg, Path(str(cfg.output_dir)))


def human(source, output_dir: str | Path | None = None, **options: Any):
    """``ts2 analyze human=SET`` / ``human=[A,B,...]``: how each metric agrees with people.

    ``source``: one set (a path, ``NAME:PATH``, a set ``NAME`` from the hub, or a DataFrame in our
    long CSV's format) or a list of sets (not DataFrames). ``options``: ``human_scores`` (a score
    file, or a list: one per set), ``metrics``, ``bootstrap``, ``seed``, ``confidence``,
    ``human_permutations``, ``human_clusters``, ``progress`` (``conf/analyze.yaml``). Writes into
    ``output_dir`` (default: the command's timestamped folder). Returns, for one set,
    :class:`analysis.human.view.HumanViewOutputs` (``.results``, ``.tests`` DataFrames); for a list,
    :class:`analysis.human.sets.HumanSetsOutputs` (``.long``, ``.summary``, ``.views``)."""
    from seg_data.human import human_from_frame
    from ts2.commands.analyze_human import human_views, load_sets

    many = isinstance(source, list | tuple)
    frame = None if many or not hasattr(source, "columns") else source
    entries = list(source) if many else [None if frame is not None else str(source)]
    ov = _overrides("analyze", {"human": None if frame is not None else [str(e) for e in entries], **options})
    if output_dir is not None:
        ov.append(f"output_dir={_value(str(output_dir))}")
    cfg = _compose("analyze", ov, "ts2.human")
    if frame is not None:
        from seg_data.human import attach_scores

        hj = human_from_frame(frame)
        scores = cfg.get("human_scores")
        sets = [attach_scores(hj, str(scores)) if isinstance(scores, str) else hj]
    else:
        sets = load_sets(cfg)
    res = human_views(sets, cfg, Path(str(cfg.output_dir)))
    return res if many else res.views[0]
