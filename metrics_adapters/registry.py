"""One registry of metric classes: name -> lazy ``"module:attr"`` entry.

Hydra configs (``conf/metric/<name>.yaml``) build metrics through ``_target_``; this registry is
the same catalogue for Python users and for listings, and it never imports a metric's module
(torch, open_clip, transformers) until the metric is asked for::

    >>> from metrics_adapters import get_metric, list_metrics
    >>> "clipscore_hf" in list_metrics()
    True
    >>> m = get_metric("clipscore_hf", model="/path/to/local/clip")   # doctest: +SKIP

A name registered twice is rejected; an unknown name is answered with the valid ones. Each
registry name has a config ``conf/metric/<name>.yaml`` with the same class as ``_target_``
(a test checks both directions).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from seg_data.resolve import parse_spec, resolve

from .base import Metric

__all__ = ["Registry", "METRICS", "register_metric", "get_metric_class", "get_metric", "list_metrics",
           "UnknownMetricError"]


class UnknownMetricError(KeyError):
    """A name that is not in the registry; the message lists the valid ones."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0])


class Registry:
    """Name -> ``"module:attr"`` target, imported on first use.

    Parameters
    ----------
    kind : str
        What the registry holds, for error messages ("metric").
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._targets: dict[str, str] = {}

    def register(self, name: str, target: str) -> None:
        """Add ``name`` -> ``target`` (``"package.module:ClassName"``).

        Raises
        ------
        ValueError
            If ``name`` is already registered or ``target`` is not ``"module:attr"``.
        """
        try:
            parse_spec(target)
        except ValueError as e:
            raise ValueError(f"{self.kind} {name!r}: {e}") from e
        if name in self._targets:
            raise ValueError(f"{self.kind} {name!r} is already registered (as {self._targets[name]!r})")
        self._targets[name] = target

    def target(self, name: str) -> str:
        try:
            return self._targets[name]
        except KeyError:
            raise UnknownMetricError(
                f"unknown {self.kind} {name!r}; expected one of {sorted(self._targets)}") from None

    def get(self, name: str) -> Any:
        """The registered object, imported now."""
        target = self.target(name)
        try:
            return resolve(target)
        except ImportError as e:
            raise ImportError(f"{self.kind} {name!r}: could not import {target!r}: {e}") from e

    def names(self) -> list[str]:
        return sorted(self._targets)

    def items(self) -> Iterator[tuple[str, str]]:
        return iter(sorted(self._targets.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __len__(self) -> int:
        return len(self._targets)


METRICS = Registry("metric")

# Built-in metrics, one entry per class. To add one: write the class, register it here (or call
# register_metric from your own package) and add conf/metric/<name>.yaml with the same class as
# _target_. Further configs of a registered class (clipscore_b32, always_yes, ...) need no entry.
for _name, _target in {
    "clipscore": "metrics_adapters.embedding.clipscore:OpenCLIPScore",
    "clipscore_hf": "metrics_adapters.embedding.clipscore:HFCLIPScore",
    "alignscore": "metrics_adapters.embedding.align:ALIGNScore",
    "siglip": "metrics_adapters.embedding.siglip:SigLIPScore",
    "tifa": "metrics_adapters.qa.tifa:TIFAScore",
    "dsg": "metrics_adapters.qa.dsg:DSGScore",
    "geneval": "metrics_adapters.geneval.metric:GenEvalMetric",
    "llm_judge": "metrics_adapters.judges.llmscore:LLMJudge",
    "vlm_judge": "metrics_adapters.judges.viescore:VLMJudge",
    "blur": "metrics_adapters.quality.blur:BlurEffect",
    "iqa": "metrics_adapters.quality.pyiqa_metric:PyIQAMetric",
    "composite": "metrics_adapters.composite:CompositeMetric",
    "random": "metrics_adapters.controls.random:RandomScore",
    "shuffled_image": "metrics_adapters.controls.shuffle:ShuffledImage",
    "shuffled_text": "metrics_adapters.controls.shuffle:ShuffledText",
    "pickscore": "metrics_adapters.embedding.pickscore:PickScore",
    "hpsv2": "metrics_adapters.embedding.hpsv2:HPSv2Score",
    "vqascore": "metrics_adapters.qa.vqascore:VQAScore",
    "imagereward": "metrics_adapters.reward.imagereward:ImageReward",
}.items():
    METRICS.register(_name, _target)


def register_metric(name: str, target: str) -> None:
    """Register a metric class under ``name`` (see :meth:`Registry.register`)."""
    METRICS.register(name, target)


def get_metric_class(name: str) -> type[Metric]:
    cls = METRICS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, Metric)):
        raise TypeError(f"metric {name!r}: expected a subclass of metrics_adapters.Metric, got {cls!r}")
    return cls


def get_metric(key: str, /, **kwargs: Any) -> Metric:
    """Build the metric registered as ``key``; its column is named ``key`` unless ``name=`` is given."""
    kwargs.setdefault("name", key)
    return get_metric_class(key)(**kwargs)


def list_metrics() -> list[str]:
    return METRICS.names()
