"""What a report draws from: merged result folders (:class:`MergedResults`) and their runs (:class:`RunInfo`).

:mod:`analysis.report.result_dirs` builds them from result folders (or :meth:`analysis.session.Analysis`
from one analysis); :mod:`analysis.report.page`, :mod:`analysis.report.figures` and
:mod:`analysis.report.explorer` draw them. A module of its own so that the drawing modules do not import
each other (no import cycle; ``lint-imports`` checks it in CI).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from seg_data.results import metric_columns

__all__ = ["MergedResults", "RunInfo"]


@dataclass(frozen=True)
class RunInfo:
    """One merged run (a directory, or the shards of one run).

    ``wall_time_s`` is the run's own wall time from ``run.json`` (summed over shards);
    ``images_per_s`` maps each merged column to its metric's rate.
    """

    label: str
    dirs: tuple[str, ...]
    overrides: dict[str, str]
    columns: dict[str, str]          # original column -> name in the merged table
    shards: tuple[str, ...] = ()
    n_images: int | None = None
    device: str | None = None
    wall_time_s: float | None = None
    images_per_s: dict[str, float] = field(default_factory=dict)
    n_failed: int = 0
    cache_hits: int | None = None
    cache_misses: int | None = None


@dataclass(frozen=True)
class MergedResults:
    """Everything the report draws from, after merging the inputs.

    ``roles`` maps metrics to :data:`seg_data.results.ROLES` (absent: ``metric``);
    ``confidence`` is the level of the CIs in ``metametrics`` (``None``: not recorded).
    """

    scores: pd.DataFrame | None
    metametrics: pd.DataFrame | None
    per_seg: pd.DataFrame | None
    flops: dict[str, float]
    lower_is_better: frozenset[str]
    runs: tuple[RunInfo, ...]
    notes: tuple[str, ...] = ()
    roles: Mapping[str, str] = field(default_factory=dict)
    dataset: str | None = None
    confidence: float | None = None
    #: The :class:`analysis.pipeline.AnalysisResult` behind ``metametrics`` when one analysis
    #: computed every merged metric (the verdict reuses its replicates); None otherwise. Stored, not
    #: derived: ``metametrics``/``per_seg`` are computed from it, but its bootstrap replicates are in
    #: no frame, so it cannot be rebuilt from the other fields without analysing again.
    analysis: object | None = None

    @property
    def metrics(self) -> list[str]:
        if self.metametrics is not None:
            return list(dict.fromkeys(self.metametrics["metric"]))
        if self.scores is not None:
            return metric_columns(self.scores.columns)
        return []

    def role(self, metric: str) -> str:
        return self.roles.get(metric, "metric")

    @property
    def controls(self) -> list[str]:
        return [m for m in self.metrics if self.role(m) == "control"]

    @property
    def references(self) -> list[str]:
        return [m for m in self.metrics if self.role(m) == "reference"]

    @property
    def of_interest(self) -> list[str]:
        """The metrics under evaluation (role ``metric``); without any, every non-control one."""
        own = [m for m in self.metrics if self.role(m) == "metric"]
        return own or [m for m in self.metrics if self.role(m) != "control"]
