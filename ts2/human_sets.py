"""The human view under both doors (``ts2 analyze human=...`` and ``ts2.human``): the sets loaded, their metric
scores joined, and every set's view plus the tables across them written as one result set.

Typed: :class:`analysis.human.settings.HumanSettings` says how; the command handler
(:mod:`ts2.commands.analyze_human`) builds it from its config, :func:`ts2.human` from keywords.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.human.sets import HumanSetsOutputs
    from analysis.human.settings import HumanSettings

__all__ = ["human_entries", "score_files", "load_human_sets", "human_views"]

log = logging.getLogger(__name__)


def human_entries(value) -> list[str]:
    """``human=``: one entry or a list, as strings (None: none)."""
    if value is None:
        return []
    if isinstance(value, str | Path):
        return [str(value)]
    return [str(v) for v in value]


def score_files(value, n_sets: int) -> list[str | None]:
    """``human_scores`` as one entry per set: a single file applies to every set, a list pairs up.

    Raises
    ------
    ValueError
        A list whose length is not the number of sets.
    """
    if value is None or isinstance(value, str | Path):
        return [None if value is None else str(value)] * n_sets
    files = [None if v in (None, "", "null") else str(v) for v in value]
    if len(files) != n_sets:
        raise ValueError(f"expected human_scores to be one file or a list of {n_sets} (one per human entry), "
                         f"got {len(files)}")
    return files


def load_human_sets(entries: Sequence[str], scores: Sequence[str | None]) -> list:
    """Every entry loaded (:func:`seg_data.human.load_human_set`), with its score file joined, in order.

    Raises
    ------
    FileNotFoundError, KeyError, ValueError, RuntimeError, ImportError
        A missing file, an unknown set name, a malformed record, a failed hub download, parquet without pyarrow;
        or two sets of one name.
    """
    from seg_data.human import load_human_set

    sets = [load_human_set(e, s) for e, s in zip(entries, scores, strict=True)]
    names = [h.name for h in sets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"expected each human set once, got {dup} more than once (entries {list(entries)})")
    return sets


def _select(hj, metrics: Sequence[str] | None):
    if metrics:
        unknown = [m for m in metrics if m not in hj.metrics]
        if unknown:
            raise ValueError(f"{hj.source}: unknown metric(s) {unknown}; expected names from {list(hj.metrics)}")
        hj = hj.select(list(metrics))
    if not hj.metrics:
        raise ValueError(f"{hj.source}: expected at least one metric score column, found none (give human_scores=)")
    return hj


def human_views(sets: list, out: str | Path, settings: HumanSettings) -> HumanSetsOutputs:
    """The human view of every set (one folder each when there are several) and the tables across them,
    written into ``out`` as one result set. Returns :class:`analysis.human.sets.HumanSetsOutputs` with
    published paths.

    Raises
    ------
    ValueError
        An unknown metric, or a set without metric scores.
    """
    from dataclasses import replace

    from analysis.human.sets import run_human_sets
    from seg_data.result_sets import published_path, result_set

    sets = [_select(hj, settings.metrics) for hj in sets]
    for hj in sets:
        log.info("human view: %s = %s (%s; %d items, %d prompts, %d raters, %d metrics), bootstrap=%d",
                 hj.name, hj.source, hj.kind, hj.n_items, hj.n_prompts, len(hj.raters), len(hj.metrics),
                 settings.bootstrap)
    with result_set(Path(out), "ts2 analyze human") as stage:  # swapped in whole: a killed run leaves the old set
        res = run_human_sets(sets, stage, **settings.view_options())
        # Inside the set: published_path knows the staging folder only while it is being written.
        views = [replace(v, results_path=published_path(v.results_path), table_md=published_path(v.table_md),
                         table_csv=published_path(v.table_csv), correlations_path=published_path(v.correlations_path),
                         tests_path=published_path(v.tests_path)) for v in res.views]
        return replace(res, views=views, long_path=published_path(res.long_path),
                       summary_md=published_path(res.summary_md), summary_csv=published_path(res.summary_csv),
                       html=published_path(res.html))
