"""``ts2 analyze human=SET`` or ``human=[A,B,...]``: the human-judgment view of metrics on one or many sets.

Called by the ``ts2 analyze`` handler when ``cfg.human`` is set. Each entry is a path, ``NAME:PATH``
or a set ``NAME`` loaded from the hub (:func:`seg_data.human.resolve_human`); ``human_scores``
joins metric scores by item (one file for every set, or a list, one per entry). Every set gets the
files of :func:`analysis.human.run_human_view` (``human_metametrics.csv``, ``human_table.md/.csv``,
``human_metric_correlations.csv``, ``human_paired_tests.csv``): in ``output_dir`` itself for a
single set, in ``output_dir/<set name>/`` for several. Across the sets
(:func:`analysis.human.sets.write_sets`) ``output_dir`` also holds ``human_sets.csv`` (one long
table: set, metric, statistic, grouping, subset, value, CI, cluster), ``human_summary.md/.csv``
(metrics x sets) and ``human_report.html``.

Config keys read (all optional but ``human``; keys of ``conf/analyze.yaml``): ``human``,
``human_scores``, ``output_dir`` (default ``.``), ``metrics`` (list, null = all), ``bootstrap``
(replicates, 1000; 0 = no intervals), ``seed`` (0), ``confidence`` (0.95), ``human_permutations``
(1000; 0 = no paired tests and no clusters; the SEG analysis' ``permutations`` is not used),
``human_clusters.statistics`` / ``.alpha``, ``progress`` (true).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from analysis.human.view import RESULT_COLUMNS  # noqa: F401  (the file's schema, for callers and tests)
from seg_data.result_sets import published_path, result_set

log = logging.getLogger(__name__)


def _get(cfg, key, default):
    v = cfg.get(key, default) if hasattr(cfg, "get") else default
    return default if v is None else v


def human_entries(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str | Path):
        return [str(value)]
    return [str(v) for v in value]


def _score_files(cfg, n_sets: int) -> list[str | None]:
    """``human_scores`` as one entry per set: a single file applies to every set, a list pairs up."""
    value = cfg.get("human_scores") if hasattr(cfg, "get") else None
    if value is None or isinstance(value, str | Path):
        return [None if value is None else str(value)] * n_sets
    files = [None if v in (None, "", "null") else str(v) for v in value]
    if len(files) != n_sets:
        raise ValueError(f"expected human_scores to be one file or a list of {n_sets} (one per human entry), "
                         f"got {len(files)}")
    return files


def load_sets(cfg) -> list:
    """Every ``human`` entry loaded, with its ``human_scores`` joined (the entries' order).

    Raises
    ------
    FileNotFoundError, KeyError, ValueError, RuntimeError, ImportError
        From :func:`seg_data.human.load_human_set` (a missing file, an unknown set name, a
        malformed record, a failed hub download, parquet without pyarrow), or two sets of one name.
    """
    from seg_data.human import load_human_set

    entries = human_entries(cfg.get("human"))
    sets = [load_human_set(e, s) for e, s in zip(entries, _score_files(cfg, len(entries)), strict=True)]
    names = [h.name for h in sets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"expected each human set once, got {dup} more than once (entries {entries})")
    return sets


def human_main(cfg) -> int:
    """Run the human-judgment meta-evaluation described in the module docstring.

    Returns
    -------
    int
        0 on success, 2 on bad input (missing/malformed file, unknown set or metric, a failed
        hub download), logged.
    """
    if not human_entries(cfg.get("human")):
        log.error("expected human=SET or human=[A,B,...] (a file or folder, NAME:PATH, or a set name from "
                  "the hub), got none")
        return 2
    out = Path(str(_get(cfg, "output_dir", ".")))
    try:
        sets = load_sets(cfg)
        res = human_views(sets, cfg, out)
    except (FileNotFoundError, KeyError, ValueError, RuntimeError, ImportError) as e:
        log.error("%s", e.args[0] if isinstance(e, KeyError) and e.args else e)
        return 2
    if len(res.views) == 1:
        sys.stdout.write(res.views[0].table_md.read_text(encoding="utf-8"))
    sys.stdout.write(res.summary_md.read_text(encoding="utf-8"))
    sys.stdout.write(f"wrote {res.long_path} and {res.html}\n")
    return 0


def _select(hj, cfg):
    metrics = cfg.get("metrics")
    if metrics:
        metrics = [str(m) for m in metrics]
        unknown = [m for m in metrics if m not in hj.metrics]
        if unknown:
            raise ValueError(f"{hj.source}: unknown metric(s) {unknown}; expected names from {list(hj.metrics)}")
        hj = hj.select(metrics)
    if not hj.metrics:
        raise ValueError(f"{hj.source}: expected at least one metric score column, found none (give human_scores=)")
    return hj


def _view_kwargs(cfg) -> dict:
    clusters = cfg.get("human_clusters") if hasattr(cfg, "get") else None
    stats = None if clusters is None or clusters.get("statistics") is None else tuple(clusters.get("statistics"))
    return {"n_boot": int(_get(cfg, "bootstrap", 1000)), "seed": int(_get(cfg, "seed", 0)),
            "confidence": float(_get(cfg, "confidence", 0.95)),
            # Not the SEG analysis' `permutations` (9999 sign flips are cheap there): pooled permutation
            # tests here recompute a statistic on all images for every permutation and metric pair.
            "n_perm": int(_get(cfg, "human_permutations", 1000)),
            "progress": bool(_get(cfg, "progress", True)),
            "alpha": float(0.05 if clusters is None or clusters.get("alpha") is None else clusters.get("alpha")),
            "cluster_statistics": stats}


def human_views(sets: list, cfg, out: str | Path):
    """The human view of every set (one folder each when there are several) and the tables across them,
    written into ``out`` as one result set. Returns :class:`analysis.human.sets.HumanSetsOutputs`
    with published paths."""
    from dataclasses import replace

    from analysis.human.sets import run_human_sets

    sets = [_select(hj, cfg) for hj in sets]
    kw = _view_kwargs(cfg)
    for hj in sets:
        log.info("human view: %s = %s (%s; %d items, %d prompts, %d raters, %d metrics), bootstrap=%d",
                 hj.name, hj.source, hj.kind, hj.n_items, hj.n_prompts, len(hj.raters), len(hj.metrics), kw["n_boot"])
    with result_set(out, "ts2 analyze human") as stage:  # swapped in whole: a killed run leaves the old set
        res = run_human_sets(sets, stage, **kw)
        # Inside the set: published_path knows the staging folder only while it is being written.
        views = [replace(v, results_path=published_path(v.results_path), table_md=published_path(v.table_md),
                         table_csv=published_path(v.table_csv), correlations_path=published_path(v.correlations_path),
                         tests_path=published_path(v.tests_path)) for v in res.views]
        return replace(res, views=views, long_path=published_path(res.long_path),
                       summary_md=published_path(res.summary_md), summary_csv=published_path(res.summary_csv),
                       html=published_path(res.html))
