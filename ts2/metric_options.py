"""A built-in metric by its config name with keyword options: ``ts2.load_metric(NAME, **options)``.

The metric group is composed with ``metric=NAME`` (and the metric's own group choices, e.g. TIFA's
``vqa="llava"``), the other options are merged into it as values (no override strings: a path with spaces or
quotes needs no quoting), checked with the command line's checks, and built by
:func:`ts2.metric_configs.metrics_from_config`, as ``ts2 score metric=NAME metric.KEY=VALUE`` builds it. Metric
configs are Hydra configs (defaults lists, interpolations), so building a metric *by name* composes one; a
metric object or a function given to :func:`ts2.score` never does, and neither does anything in the analysis.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["metric_from_name"]

_CHOICE = re.compile(r"^[A-Za-z0-9_.-]+$")  # a config group option's name


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
    from ts2.metric_configs import metrics_from_config

    return metrics_from_config(cfg)[0]


def _unknown(cfg, key: str, name: str, prog: str):
    from ts2.config_check import ConfigError, config_keys
    from ts2.names import did_you_mean

    hint = did_you_mean(key, [k for k in config_keys(cfg) if k.startswith("metric.")])
    return ConfigError(f"unknown key {key!r} for {prog}{hint or f'; see `ts2 score metric={name} --help`'}")
