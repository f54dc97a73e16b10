"""The settings of the meta-metric computation, in one frozen object.

Every key lives once in ``conf/analysis/default.yaml``; ``ts2 analyze``, ``ts2 report``,
``ts2 run``, ``ts2 reproduce`` and the Python API (``ts2.analyze``, ``ts2.report``,
``ts2.reproduce``, :func:`analysis.session.run_analysis`, :func:`analysis.report.result_dirs.build_report`,
:func:`analysis.reproduction.reproduce`) build one :class:`AnalysisSettings` from it
(:meth:`AnalysisSettings.from_config`) and hand it to :func:`analysis.pipeline.analyze`
(:meth:`AnalysisSettings.pipeline_kwargs`). The dataclass defaults equal the config's
(``tests/test_analysis_settings.py`` checks it), so a caller that gives no settings gets the
command line's. Never imports torch.

>>> s = AnalysisSettings(bootstrap=0, protocols=["graph"])
>>> s.protocols, s.bootstrap, s.chance
(('graph',), 0, 10)
>>> AnalysisSettings(ci_method="bootstrap")
Traceback (most recent call last):
...
ValueError: analysis setting ci_method: expected one of bca, percentile, got 'bootstrap'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from .pipeline import CI_METHODS, MIN_SEGS_CI
from .scores_io import SUBSET_SOURCES as SUBSETS
from .stats import BOOTSTRAP_SCHEMES

__all__ = ["AnalysisSettings", "CI_METHODS", "BOOTSTRAP_SCHEMES", "SUBSETS"]


def _names(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if value is None:
        return ()
    try:
        return tuple(str(v) for v in value)
    except TypeError as e:
        raise ValueError(f"analysis setting {key}: expected a list of names, got {value!r}") from e


def _int(value: Any, key: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"analysis setting {key}: expected an integer >= {low}, got {value!r}")
    return value


@dataclass(frozen=True)
class AnalysisSettings:
    """How the meta-metrics are computed (the keys of ``conf/analysis/default.yaml``).

    Attributes
    ----------
    protocols : tuple
        Protocol names (``conf/protocol/``) or configured :class:`analysis.protocols.Protocol`
        objects, computed in one go.
    meta_metrics : tuple of str
        Meta-metrics per metric, subset and protocol.
    bootstrap : int
        Cluster-bootstrap resamples (by SEG) for the CIs; 0: no CIs.
    seed : int
        Seed of the bootstrap and permutation draws.
    confidence : float
        Level of the bootstrap CIs, in (0, 1).
    chance : int
        Within-SEG score permutations for each cell's chance level; 0: off.
    ci_method : str
        ``percentile`` or ``bca``.
    bootstrap_scheme : str
        ``rescaled`` (Rao-Wu) or ``plain``.
    min_segs_ci : int
        Fewest SEGs a value needs for a CI.
    subsets : str
        Where the subsets come from: ``auto``, ``dataset``, ``column``, ``ts2``, ``none``.
    lower_is_better : tuple of str
        Metrics whose scores fall as images get better.

    Raises
    ------
    ValueError
        A value of the wrong type or out of range, naming the setting, what was expected and what
        was given.
    """

    protocols: tuple = ("paper", "graph")
    meta_metrics: tuple[str, ...] = ("rank", "sep", "delta", "kendall", "pair_acc")
    bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95
    chance: int = 10
    ci_method: str = "percentile"
    bootstrap_scheme: str = "rescaled"
    min_segs_ci: int = MIN_SEGS_CI
    subsets: str = "auto"
    lower_is_better: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Lists (from a config or a caller) become tuples: the object stays hashable and frozen.
        protos = self.protocols
        protos = (protos,) if isinstance(protos, str) or not hasattr(protos, "__iter__") else tuple(protos)
        if not protos:
            raise ValueError("analysis setting protocols: expected at least one protocol, got none")
        bad = [p for p in protos if not (isinstance(p, str | Mapping) or hasattr(p, "walks"))]
        if bad:
            raise ValueError(f"analysis setting protocols: expected protocol names or Protocol objects, got {bad!r}")
        object.__setattr__(self, "protocols", tuple(str(p) if isinstance(p, str) else p for p in protos))
        mms = _names(self.meta_metrics, "meta_metrics")
        if not mms:
            raise ValueError("analysis setting meta_metrics: expected at least one meta-metric, got none")
        object.__setattr__(self, "meta_metrics", mms)
        object.__setattr__(self, "lower_is_better", _names(self.lower_is_better, "lower_is_better"))
        for key in ("bootstrap", "seed", "chance", "min_segs_ci"):
            _int(getattr(self, key), key)
        conf = self.confidence
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 < conf < 1:
            raise ValueError(f"analysis setting confidence: expected a number in (0, 1), got {conf!r}")
        object.__setattr__(self, "confidence", float(conf))
        for key, allowed in (("ci_method", CI_METHODS), ("bootstrap_scheme", BOOTSTRAP_SCHEMES),
                             ("subsets", SUBSETS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"analysis setting {key}: expected one of {', '.join(allowed)}, "
                                 f"got {getattr(self, key)!r}")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The setting names (the keys of ``conf/analysis/default.yaml``)."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], **given: Any) -> AnalysisSettings:
        """The settings of a composed config (a DictConfig or a plain mapping holding every key of
        ``conf/analysis/default.yaml``); ``given`` replaces keys the caller resolved itself
        (``ts2 analyze``'s ``protocol=`` group).

        Raises
        ------
        ValueError
            A key missing from ``cfg`` (a config that does not compose ``analysis: default``), or a
            bad value.
        """
        from omegaconf import OmegaConf

        values = {}
        for key in cls.keys():
            if key in given:
                values[key] = given[key]
                continue
            if key not in cfg:
                raise ValueError(f"expected the analysis setting {key!r} in the config (conf/analysis/default.yaml "
                                 f"composed through `- analysis: default`), got keys {sorted(map(str, cfg))}")
            v = cfg[key]
            values[key] = OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        return cls(**values)

    def updated(self, **changes: Any) -> AnalysisSettings:
        """A copy with ``changes`` (setting name -> value); an unknown name is a ``TypeError``
        naming the valid ones."""
        unknown = sorted(set(changes) - set(self.keys()))
        if unknown:
            raise TypeError(f"expected analysis settings among {list(self.keys())}, got {unknown}")
        return replace(self, **changes) if changes else self

    def pipeline_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`analysis.pipeline.analyze` these settings stand for."""
        return {"protocols": list(self.protocols), "meta_metrics": list(self.meta_metrics),
                "bootstrap": self.bootstrap, "seed": self.seed, "subsets": self.subsets,
                "confidence": self.confidence, "lower_is_better": list(self.lower_is_better),
                "chance": self.chance, "ci_method": self.ci_method, "bootstrap_scheme": self.bootstrap_scheme,
                "min_segs_ci": self.min_segs_ci}

    def protocol_names(self) -> list[str]:
        """The protocols' names (a configured protocol by its ``name``)."""
        return [p if isinstance(p, str) else str(getattr(p, "name", p.get("name") if isinstance(p, Mapping) else p))
                for p in self.protocols]


def resolve_settings(settings: AnalysisSettings | None, changes: Mapping[str, Any]) -> AnalysisSettings:
    """``settings`` (default: :class:`AnalysisSettings`'s defaults, which equal the config's) with
    ``changes`` (keyword arguments of a Python entry point) applied."""
    return (settings if settings is not None else AnalysisSettings()).updated(**dict(changes))
