"""``ts2 explore results=DIR [metrics=[a,b]] [out=FILE]``: the interactive SEG explorer.

Reads result folders the way ``ts2 report`` does (:func:`analysis.report.result_dirs.merged_results`:
per-image scores, ``per_seg.csv``; values missing for score-only folders are computed, without a
bootstrap) and writes one self-contained HTML page (:mod:`analysis.report.explorer`): ``explorer.html``
in ``output_dir`` as a result set, or the file ``out=``. The SEG structure (prompts, node errors,
edges, image files) comes from ``path=``/``dataset=``, else from the dataset the run recorded in
its ``run.json``, else from the score table's node labels. Exit code 0, or 2 for bad input.

Never imports torch.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from analysis.report.result_dirs import expand_result_paths, merged_results
from seg_data.result_sets import result_set
from seg_data.results import ANALYSIS_FILE, RUN_FILE, read_analysis_record, read_run_record
from ts2.commands.report import _as_list
from ts2.common import load_dataset, output_dir

log = logging.getLogger(__name__)

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


def recorded_dataset(cfg: DictConfig, results: list[str]):
    """The dataset to draw: ``path=``/``dataset=`` when given, else the one the first result's
    ``run.json`` recorded (its ``path``, or a dataset of the ``dataset`` config group with plain
    arguments), else ``None``. The record's ``image_roots`` are not honoured: only the command
    line widens where images may be read from."""
    if cfg.get("path") or cfg.get("dataset") is not None:
        return load_dataset(cfg)
    for p in expand_result_paths(results):
        folder = _analysed_dataset_folder(p)
        if folder is not None:  # a path (data, never code): the analysis read its dataset there
            log.info("dataset: %s (from %s)", folder, p / ANALYSIS_FILE)
            return load_dataset(OmegaConf.create({"path": folder, "image_roots": cfg.get("image_roots")}))
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
            return load_dataset(OmegaConf.create({"path": conf["path"], "image_roots": cfg.get("image_roots")}))
        if conf.get("dataset") is not None:
            roots = cfg.get("image_roots")
            return _dataset_from_record(conf["dataset"], run, {} if not roots else {
                "image_roots": [roots] if isinstance(roots, str) else [str(r) for r in roots]})
    log.info("no dataset given or recorded: SEGs from the score table's node labels (give path= for prompts, "
             "node errors and images)")
    return None


def explore_from_config(cfg: DictConfig):
    """Write the explorer a config asks for (``ts2 explore`` and ``ts2.explore``); returns ``(path
    written, analysis.report.explorer result)``.

    Raises
    ------
    ValueError
        No ``results``, or results that cannot be merged or drawn.
    FileNotFoundError
        A results folder or dataset that does not exist.
    """
    from analysis.report.explorer import write_explorer

    results = _as_list(cfg.get("results"))
    if not results:
        raise ValueError("expected results=DIR or results=[DIR1,DIR2] (ts2 run/score/analyze/report folders), got none")
    options = dict(metrics=_as_list(cfg.metrics) or None, protocol=cfg.protocol, subsets=str(cfg.subsets),
                   title=str(cfg.title), images=bool(cfg.images), thumb_side=int(cfg.thumbnail_size),
                   progress=bool(cfg.progress))
    dataset = recorded_dataset(cfg, results)
    merged = merged_results(results, protocols=_as_list(cfg.protocols), bootstrap=0, chance=0,
                            dataset=dataset, subsets=str(cfg.subsets))  # the explorer shows values, no CIs
    if cfg.get("out"):
        target = Path(str(cfg.out)).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        return target, write_explorer(merged, target, dataset, **options)
    with result_set(output_dir(cfg), "ts2 explore") as stage:
        res = write_explorer(merged, stage / "explorer.html", dataset, **options)
    return output_dir(cfg) / "explorer.html", res


def main(cfg: DictConfig) -> int:
    try:
        written, res = explore_from_config(cfg)
    except (FileNotFoundError, ValueError) as e:
        log.error("%s", e)
        return 2
    sys.stdout.write(f"explorer: {written} ({res.n_segs} SEGs, {res.n_images} images, {res.n_thumbnails} thumbnails, "
                     f"{res.size_bytes / 2**20:.1f} MB)\n")
    return 0
