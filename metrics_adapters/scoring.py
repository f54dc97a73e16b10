"""Score a dataset: the one function both ``ts2 score`` and ``ts2.score`` call.

:class:`ScoreSettings` is every setting of a scoring run besides the metrics and the dataset: how to run the
models (:class:`~metrics_adapters.run_types.EngineSettings`), which images (``limit``, ``shard``), the score cache
and the share of failed images a run may have. Its defaults are the defaults: ``conf/score.yaml`` states the same
values (a test composes it and compares), and neither door restates them.

:func:`score_dataset` selects the images, runs every metric through the engine with one cache, and returns a
:class:`DatasetScores` (the items, one :class:`~metrics_adapters.run_types.MetricRun` per metric, and which runs
failed on too many images); writing ``scores.csv``/``run.json`` and reporting are the doors' business.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .items import ScoreItem
from .run_types import EngineSettings, MetricRun

if TYPE_CHECKING:
    import pandas as pd

    from seg_data.model import SEGDataset

    from .cache import ScoreCache
    from .scorer import Scorer

__all__ = ["ScoreSettings", "DatasetScores", "check_run", "select_items", "score_dataset", "score_selected"]

log = logging.getLogger(__name__)

_ENGINE_KEYS = tuple(f.name for f in dataclasses.fields(EngineSettings))


def _count_or_auto(value: Any) -> int | str:
    return value if value == "auto" else int(value)


def _optional(kind):
    return lambda v: None if v is None else kind(v)


# How a plain value (a config's or a keyword's) becomes a setting's field: one rule per flat option.
_TYPES = {"device": str, "precision": str, "batch_size": _count_or_auto, "num_workers": _count_or_auto,
          "decode": str, "max_image_side": _optional(int), "progress": bool, "measure_flops": bool, "rehash": bool,
          "cache": bool, "cache_dir": _optional(str), "limit": _optional(int), "shard": _optional(str),
          "max_failure_share": float}


@dataclass(frozen=True)
class ScoreSettings:
    """Settings of one scoring run (``conf/score.yaml``'s keys besides the metric, dataset and output folder).

    Parameters
    ----------
    engine : EngineSettings
        How the metrics run: device, precision, batch size, workers, image size, decoding, progress bar,
        FLOP counting, re-hashing images.
    cache : bool
        Read and write the score cache.
    cache_dir : str or None
        The cache folder (None: ``$TS2_CACHE_DIR`` or ``~/.cache/ts2``).
    limit : int or None
        Score only the first ``limit`` images (quick checks).
    shard : str or None
        ``"i/n"``: only this shard's images (:mod:`seg_data.shards`).
    max_failure_share : float
        A metric that fails on more than this share of the images fails the run.
    """

    engine: EngineSettings = field(default_factory=EngineSettings)
    cache: bool = True
    cache_dir: str | None = None
    limit: int | None = None
    shard: str | None = None
    max_failure_share: float = 0.05

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The flat option names (the engine's and the run's), as ``ts2 score`` and ``ts2.score`` take them."""
        return (*_ENGINE_KEYS, *(f.name for f in dataclasses.fields(cls) if f.name != "engine"))

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> ScoreSettings:
        """Settings from flat options (a composed ``conf/score.yaml`` or keyword arguments); absent keys keep
        their defaults, other keys of the mapping are ignored (the caller checks names)."""
        return cls().updated(**{k: options[k] for k in cls.keys() if k in options})

    def updated(self, **changes: Any) -> ScoreSettings:
        """A copy with flat options replaced (``batch_size=8``, ``cache=False``, ...).

        Raises
        ------
        ValueError
            An unknown option, or a value the engine refuses (a bad device or precision).
        """
        unknown = sorted(set(changes) - set(self.keys()))
        if unknown:
            raise ValueError(f"expected score options among {list(self.keys())}, got {unknown}")
        typed = {k: _TYPES[k](v) for k, v in changes.items()}
        engine = {k: v for k, v in typed.items() if k in _ENGINE_KEYS}
        own = {k: v for k, v in typed.items() if k not in _ENGINE_KEYS}
        return dataclasses.replace(self, engine=dataclasses.replace(self.engine, **engine), **own)


@dataclass(frozen=True)
class DatasetScores:
    """What :func:`score_dataset` returns: the images scored (in order) and one run per metric."""

    items: list[ScoreItem]
    runs: list[MetricRun]
    max_failure_share: float

    @property
    def failed_runs(self) -> list[MetricRun]:
        """The runs that failed on more than ``max_failure_share`` of the images."""
        return [r for r in self.runs if r.failure_share > self.max_failure_share]

    def raise_for_failures(self) -> None:
        """Raise for the first run over ``max_failure_share`` (the Python door's way; the command logs every
        such run and exits 1).

        Raises
        ------
        ValueError
            Naming the metric, the failed share and the first three images' reasons.
        """
        for run in self.failed_runs[:1]:
            reasons = "; ".join(f"{f.file_name}: {f.reason}" for f in run.failures[:3])
            raise ValueError(f"{run.name}: expected at most {100 * self.max_failure_share:.1f}% failed images "
                             f"(max_failure_share), got {run.n_failed} of {run.n_items}: {reasons}")

    def frame(self) -> pd.DataFrame:
        """The scores as ``scores.csv`` has them (base columns, then each metric's columns)."""
        from .outputs import scores_frame

        return scores_frame(self.items, self.runs)


def check_run(metrics: Sequence[Scorer], settings: ScoreSettings) -> None:
    """What can be checked before a dataset or model is loaded, so that a bad run fails in a second.

    Raises
    ------
    ValueError
        No metric, two metrics writing one column, or a malformed ``shard``.
    RuntimeError
        A CUDA device asked for on a machine without one.
    """
    from seg_data.shards import parse_shard

    from .engine import check_unique_columns, resolve_device

    if not metrics:
        raise ValueError("expected at least one metric (metric=NAME or +metric@metrics.KEY=NAME), got none")
    check_unique_columns(metrics)
    resolve_device(settings.engine.device)
    parse_shard(settings.shard)


def select_items(dataset: SEGDataset, settings: ScoreSettings) -> list[ScoreItem]:
    """The images a run scores: the dataset's image table, this shard's rows, the first ``limit``."""
    from seg_data.shards import parse_shard

    from .engine import items_from_table

    table = dataset.image_table()
    shard = parse_shard(settings.shard)
    if shard is not None:
        table = table[shard.mask(table["file_name"])]
    if settings.limit is not None:
        table = table.head(settings.limit)
    return items_from_table(table)


def score_dataset(metrics: Sequence[Scorer], dataset: SEGDataset, settings: ScoreSettings,
                  cache: ScoreCache | None = None) -> DatasetScores:
    """Score every selected image of ``dataset`` with each metric, in order, through one score cache.

    Parameters
    ----------
    metrics : sequence of Scorer
        The metrics (their output columns must not clash).
    dataset : SEGDataset
        The images and their SEG prompts.
    settings : ScoreSettings
        As above; ``settings.cache``/``cache_dir`` open the cache when ``cache`` is None.
    cache : ScoreCache or None
        An open cache to use (left open), e.g. the door's, which names its path in its messages.

    Raises
    ------
    ValueError, RuntimeError
        As :func:`check_run`; or no image to score.
    """
    check_run(metrics, settings)
    items = select_items(dataset, settings)
    if not items:
        raise ValueError(f"expected images to score, got none in dataset {dataset.name!r}")
    return score_selected(metrics, items, settings, cache)


def score_selected(metrics: Sequence[Scorer], items: Sequence[ScoreItem], settings: ScoreSettings,
                   cache: ScoreCache | None = None) -> DatasetScores:
    """Score ``items`` (already chosen by :func:`select_items`, with the run checked by :func:`check_run`) with
    each metric, in order, through one score cache: the second half of :func:`score_dataset`, for a caller that
    looks at the run and the images before any model is loaded (``ts2 score``: room on disk, an empty shard)."""
    from .cache import open_cache
    from .engine import score_metric

    if cache is None:
        with open_cache(settings.cache, settings.cache_dir) as store:
            return score_selected(metrics, items, settings, store)
    return DatasetScores(list(items), [score_metric(m, items, cache, settings.engine) for m in metrics],
                         settings.max_failure_share)
