"""Metric adapters: one interface over every T2I faithfulness metric, and the scoring engine.

Heavy dependencies (torch, open_clip, transformers) are imported only inside the adapters that
need them, when a metric is loaded.
"""

from .base import Metric, MetricError, ScoreItem

__all__ = ["Metric", "MetricError", "ScoreItem"]
