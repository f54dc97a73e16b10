"""Metrics built from their configs (``conf/metric/NAME.yaml``): the one place a metric config becomes a metric.

``ts2 score`` / ``ts2 run`` build the metrics of their composed config, and
``ts2.load_metric`` (:mod:`ts2.metric_options`) the config it composes for one metric name, through
:func:`metrics_from_config`. This module imports no config checking, so the command handlers can use it without
an import cycle (``ts2.config_check`` reads the command table).
"""

from __future__ import annotations

__all__ = ["metrics_from_config"]


def metrics_from_config(cfg) -> list:
    """The run's metrics: ``metric`` (may be null) then ``metrics`` in order, each with ``config_key`` set to
    where it was configured (messages name the key to set, e.g. ``metrics.sig.model``).

    Raises
    ------
    ValueError
        A metric entry without ``_target_``.
    """
    from hydra.utils import instantiate

    confs = []
    if cfg.get("metric") is not None:
        confs.append(("metric", cfg.metric))
    for key, mc in (cfg.get("metrics") or {}).items():
        if mc is not None:
            confs.append((f"metrics.{key}", mc))
    metrics = []
    for where, mc in confs:
        if "_target_" not in mc:
            raise ValueError(f"{where}: expected a metric config with _target_, got keys {sorted(mc)}")
        metric = instantiate(mc, _convert_="all")
        metric.config_key = where
        metrics.append(metric)
    return metrics
