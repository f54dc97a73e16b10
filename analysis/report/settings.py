"""The settings of a report (``conf/report/default.yaml``) and of the SEG explorer (``conf/explore.yaml``).

Both doors build these: ``ts2 report``/``ts2 explore``/``ts2 run`` from their composed configs
(:meth:`~analysis.settings_base.PlainSettings.from_mapping`), ``ts2.report``/``ts2.explore`` from keywords
(:meth:`~analysis.settings_base.PlainSettings.updated`). The dataclass defaults are the YAML files' (tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..settings_base import PlainSettings, as_tuple, mapping, names_or_none, text_or_none

__all__ = ["ReportSettings", "ExploreSettings"]


@dataclass(frozen=True)
class ReportSettings(PlainSettings):
    """How ``report.html`` is drawn (what it computes is :class:`analysis.settings.AnalysisSettings`).

    Attributes
    ----------
    title : str
        Title of the page.
    figure_protocol : str or None
        Protocol the figures show (None: ``paper`` when present).
    flops : mapping
        FLOPs per image for metrics whose ``run.json`` has none.
    labels : mapping
        Display names of metrics.
    scatter : tuple of two str or None
        The per-SEG ``rank_m`` scatter's metrics (None: the two best).
    heatmaps : int
        Number of best and of worst SEGs drawn as heatmaps.
    figures, pareto : tuple of str or None
        Figure kinds, and meta-metrics with a Pareto figure (None: all).
    human : str or None
        A ``ts2 analyze human=...`` result (file or folder) shown beside the SEG view.
    human_statistic, human_grouping, seg_meta_metric : str
        What the SEG view and the human view are compared on.
    explorer : bool
        Also write ``explorer.html``, linked from the report.
    """

    title: str = "TS2 report"
    figure_protocol: str | None = None
    flops: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    scatter: tuple[str, ...] | None = None
    heatmaps: int = 2
    figures: tuple[str, ...] | None = None
    pareto: tuple[str, ...] | None = None
    human: str | None = None
    human_statistic: str = "kendall_b"
    human_grouping: str = "prompt"
    seg_meta_metric: str = "rank"
    explorer: bool = True

    KINDS: ClassVar[dict[str, Any]] = {
        "title": str, "figure_protocol": text_or_none, "flops": mapping, "labels": mapping,
        "scatter": names_or_none, "heatmaps": int, "figures": as_tuple, "pareto": as_tuple, "human": text_or_none,
        "human_statistic": str, "human_grouping": str, "seg_meta_metric": str, "explorer": bool}


@dataclass(frozen=True)
class ExploreSettings(PlainSettings):
    """What the SEG explorer shows (``conf/explore.yaml``'s keys besides the results, dataset and output).

    Attributes
    ----------
    metrics : tuple of str or None
        Metric columns shown (None: every one).
    protocol : str or None
        Protocol of the per-SEG values and walks (None: graph when computed, else the first).
    protocols : tuple of str
        Protocols computed for results that have no ``per_seg.csv`` (values only, no bootstrap).
    subsets : str
        ``auto | dataset | column | ts2 | none``.
    title : str
        Title of the page.
    images : bool
        Thumbnails (False: structure and scores only).
    thumbnail_size : int
        Longest side of a thumbnail in pixels.
    progress : bool
        Progress bars.
    """

    metrics: tuple[str, ...] | None = None
    protocol: str | None = None
    protocols: tuple[str, ...] = ("graph", "paper")
    subsets: str = "auto"
    title: str = "TS2 explorer"
    images: bool = True
    thumbnail_size: int = 96
    progress: bool = True

    KINDS: ClassVar[dict[str, Any]] = {
        "metrics": names_or_none, "protocol": text_or_none, "protocols": lambda v: as_tuple(v) or (),
        "subsets": str, "title": str, "images": bool, "thumbnail_size": int, "progress": bool}

    def page_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`analysis.report.explorer.write_explorer` these settings set."""
        return {"metrics": None if self.metrics is None else list(self.metrics), "protocol": self.protocol,
                "subsets": self.subsets, "title": self.title, "images": self.images,
                "thumb_side": self.thumbnail_size, "progress": self.progress}
