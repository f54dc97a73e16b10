"""Views of result folders, under both doors: the report (``ts2 report``, ``ts2 run``, ``ts2.report``) and the SEG
explorer (``ts2 explore``, ``ts2.explore``), with the dataset a results folder recorded.

Each function takes the typed settings (:class:`analysis.settings.AnalysisSettings`,
:class:`analysis.report.settings.ReportSettings`, :class:`analysis.report.settings.ExploreSettings`) and a loaded
dataset or None; the command handlers build those from their configs, :mod:`ts2.api` from keywords. Nothing here
composes a config.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from seg_data.results import ANALYSIS_FILE, RUN_FILE, read_analysis_record, read_run_record

if TYPE_CHECKING:
    from analysis.report.settings import ExploreSettings, ReportSettings
    from analysis.settings import AnalysisSettings
    from seg_data.model import SEGDataset

__all__ = ["write_report", "write_explorer_page", "recorded_dataset"]

log = logging.getLogger(__name__)


def write_report(results: Sequence[str | Path], out: str | Path, analysis: AnalysisSettings,
                 report: ReportSettings, dataset: SEGDataset | None = None):
    """Merge ``results`` and write the report into ``out`` (:func:`analysis.report.result_dirs.build_report`):
    the meta-metrics the results lack computed with ``analysis``, the page drawn as ``report`` says. Without a
    ``dataset``, the one the results recorded (:func:`recorded_dataset`), as the explorer finds it, so that a
    report of a sweep on a synthetic set carries its caveat; one that cannot be loaded any more is said in a
    warning and left out. Returns :class:`analysis.report.page.ReportOutputs`."""
    from analysis.report.result_dirs import build_report

    if dataset is None:
        try:
            dataset = recorded_dataset(results)
        except (FileNotFoundError, ValueError) as e:
            log.warning("the dataset the results recorded is not used: %s", e)
    return build_report([str(r) for r in results], Path(out), analysis, report, dataset=dataset)


def write_explorer_page(results: Sequence[str | Path], settings: ExploreSettings, dataset: SEGDataset | None,
                        *, image_roots: Sequence[str] | None = None, out: str | Path | None = None,
                        output_dir: str | Path | None = None):
    """Write the SEG explorer of ``results``: to the file ``out``, or as ``explorer.html`` of a result set in
    ``output_dir``. Without a ``dataset``, the SEGs are drawn from the one the results recorded
    (:func:`recorded_dataset`, reading images only under ``image_roots`` besides its own folder). Returns
    ``(path written, analysis.report.explorer.ExplorerOutputs)``.

    Raises
    ------
    ValueError
        No results, results that cannot be merged or drawn, or neither ``out`` nor ``output_dir``.
    FileNotFoundError
        A results folder that does not exist.
    """
    from analysis.report.explorer import write_explorer
    from analysis.report.result_dirs import merged_results
    from seg_data.result_sets import result_set

    results = [str(r) for r in results]
    if not results:
        raise ValueError("expected results=DIR or results=[DIR1,DIR2] (ts2 run/score/analyze/report folders), got none")
    if dataset is None:
        dataset = recorded_dataset(results, image_roots)
    merged = merged_results(results, protocols=list(settings.protocols), bootstrap=0, chance=0,
                            dataset=dataset, subsets=settings.subsets)  # the explorer shows values, no CIs
    if out is not None:
        target = Path(out).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        return target, write_explorer(merged, target, dataset, **settings.page_options())
    if output_dir is None:
        raise ValueError("expected out=FILE or an output_dir for the explorer, got neither")
    with result_set(Path(output_dir), "ts2 explore") as stage:
        res = write_explorer(merged, stage / "explorer.html", dataset, **settings.page_options())
    return Path(output_dir) / "explorer.html", res


def _recorded_loaders() -> dict[str, frozenset[str]]:
    """Loader -> the arguments its config takes, from the ``dataset`` config group (conf/dataset/*.yaml,
    :func:`ts2.datasets.dataset_specs`): the only datasets a ``run.json`` may name. Read as plain
    YAML, never composed or instantiated."""
    from ts2.datasets import dataset_specs

    return {spec.target: frozenset(spec.defaults) for spec in dataset_specs().values()}


def _scalar(v: object) -> bool:
    # plain values only: a mapping could nest a _target_, a "${...}" string an interpolation
    return v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and "${" not in v)


def _dataset_from_record(ds: object, run: Path, roots: dict):
    """The dataset a ``run.json`` names, rebuilt from the allow-list (:func:`_recorded_loaders`):
    a known loader called with its known, plain arguments. Anything else is refused: a results
    folder is data, and nothing read from it is instantiated or imported (docs/security.md)."""
    from seg_data.resolve import resolve

    loaders = _recorded_loaders()
    target = ds.get("_target_") if isinstance(ds, dict) else None
    if target not in loaders:
        raise ValueError(f"{run}: expected a recorded dataset among {sorted(loaders)}, got {str(target)[:120]!r}; "
                         "a results folder is data and is never run: give path=DIR or dataset=NAME")
    args = {k: v for k, v in ds.items() if k != "_target_"}
    bad = [k for k, v in args.items() if k not in loaders[target] or not _scalar(v)]
    if bad:
        raise ValueError(f"{run}: expected plain values for the arguments {sorted(loaders[target])} of {target}, "
                         f"got {bad[0]!r} = {str(args[bad[0]])[:80]!r}; give path=DIR or dataset=NAME")
    log.info("dataset: %s (from %s)", target, run)
    module, _, name = target.rpartition(".")
    return resolve(f"{module}:{name}")(**args, **roots)  # one of our own targets (the allow-list), not the file's


def _analysed_dataset_folder(p: Path) -> str | None:
    """The dataset folder an ``analysis.json`` in ``p`` recorded, when it still exists."""
    if not (p / ANALYSIS_FILE).is_file():
        return None
    folder = read_analysis_record(p / ANALYSIS_FILE).dataset_path
    return folder if folder and Path(folder).exists() else None


def recorded_dataset(results: Sequence[str | Path], image_roots: Sequence[str] | None = None):
    """The dataset the first result recorded: the folder its ``analysis.json`` read, else its ``run.json``'s
    ``path``, or a dataset of the ``dataset`` config group with plain arguments; else ``None``. The record's
    ``image_roots`` are not honoured: only the caller's ``image_roots`` widen where images may be read from."""
    from analysis.report.result_dirs import expand_result_paths
    from seg_data import load_path

    roots = {} if not image_roots else {"image_roots": [str(r) for r in image_roots]}
    for p in expand_result_paths([str(r) for r in results]):
        folder = _analysed_dataset_folder(p)
        if folder is not None:  # a path (data, never code): the analysis read its dataset there
            log.info("dataset: %s (from %s)", folder, p / ANALYSIS_FILE)
            return load_path(folder, **roots)
        run = p / RUN_FILE
        if not run.is_file():
            continue
        conf = read_run_record(run).raw.get("config") or {}
        if not isinstance(conf, dict):
            continue
        if conf.get("image_roots"):
            log.warning("%s: the recorded image_roots are not used (a results folder does not widen where images "
                        "are read from); give image_roots=... and path=... to allow them", run)
        if conf.get("path"):
            if not isinstance(conf["path"], str):
                raise ValueError(f"{run}: expected the recorded path to be text, got {type(conf['path']).__name__}")
            log.info("dataset: %s (from %s)", conf["path"], run)
            return load_path(conf["path"], **roots)
        if conf.get("dataset") is not None:
            return _dataset_from_record(conf["dataset"], run, roots)
    log.info("no dataset given or recorded: SEGs from the score table's node labels (give path= for prompts, "
             "node errors and images)")
    return None
