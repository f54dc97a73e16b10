"""Metric adapters: one interface over every T2I faithfulness metric, and the scoring engine.

Heavy dependencies (torch, open_clip, transformers) are imported only inside the adapters that
need them, when a metric is loaded, and by :mod:`metrics_adapters.engine`.
"""

from .base import Metric, MetricError, ScoreItem
from .registry import METRICS, UnknownMetricError, get_metric, get_metric_class, list_metrics, register_metric

__all__ = ["Metric", "MetricError", "ScoreItem", "METRICS", "UnknownMetricError", "get_metric",
           "get_metric_class", "list_metrics", "register_metric"]
