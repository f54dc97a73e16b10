"""Metrics built from their configs (``conf/metric/NAME.yaml``): the one place a metric config becomes a metric.

``ts2 score`` / ``ts2 run`` build the metrics of their composed config (:func:`metrics_from_config`);
``ts2.load_metric(NAME, **options)`` builds one by name (:func:`metric_from_name`): the metric group is composed
with ``metric=NAME`` (and the metric's own group choices, e.g. TIFA's ``vqa="llava"``), the other options are
merged into it as values (no override strings: a path with spaces or quotes needs no quoting), checked with the
command line's checks, and instantiated the same way. Metric configs are Hydra configs (defaults lists,
interpolations), so building a metric *by name* composes one; a metric object or a function given to
:func:`ts2.score` never does, and neither does anything in the analysis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["metrics_from_config", "metric_from_name"]

_CHOICE = re.compile(r"^[A-Za-z0-9_.-]+$")  # a config group option's name


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


def _group_choices(name: str, options: Mapping[str, Any], prog: str) -> list[str]:
    """``metric.GROUP=OPTION`` for the options that choose one of the metric's config groups."""
    from ts2.config_check import precheck

    groups = {k.removeprefix("metric.") for k in precheck(prog, "score", [f"metric={name}"]).hydra.runtime.choices
              if k.startswith("metric.")}
    out = []
    for key, value in options.items():
        if key in groups and isinstance(value, str):
            if not _CHOICE.match(value):
                raise ValueError(f"{prog}: expected a config option name for metric.{key}, got {value!r}")
            out.append(f"metric.{key}={value}")
    return out


def metric_from_name(name: str, options: Mapping[str, Any], prog: str = "ts2.load_metric"):
    """The metric ``ts2 score metric=NAME metric.KEY=VALUE ...`` builds: the same config, defaults, checks and
    cache key; it writes no files (``output_dir`` unset).

    Raises
    ------
    ValueError
        An unknown metric name or key (with close matches), or a value of the wrong type.
    """
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from ts2.config_check import precheck
    from ts2.options import check_options

    choices = _group_choices(name, options, prog)
    cfg = precheck(prog, "score", [f"metric={name}", *choices])
    chosen = {c.split("=", 1)[0].removeprefix("metric.") for c in choices}
    for key, value in options.items():
        if key in chosen:
            continue
        try:  # a value, merged as one: nothing to quote (a dotted key such as "vqa.answers" reaches into the config)
            OmegaConf.update(cfg.metric, key, value, merge=True)
        except (ConfigKeyError, ConfigAttributeError) as e:  # the key path OmegaConf names, nested ones included
            raise _unknown(cfg, str(getattr(e, "full_key", None) or f"metric.{key}"), name, prog) from e
    check_options(cfg, prog, "score")
    with open_dict(cfg):
        cfg.output_dir = None  # no answers.csv beside nothing: a metric used from Python writes no files
    return metrics_from_config(cfg)[0]


def _unknown(cfg, key: str, name: str, prog: str):
    from ts2.config_check import ConfigError, config_keys
    from ts2.names import did_you_mean

    hint = did_you_mean(key, [k for k in config_keys(cfg) if k.startswith("metric.")])
    return ConfigError(f"unknown key {key!r} for {prog}{hint or f'; see `ts2 score metric={name} --help`'}")
