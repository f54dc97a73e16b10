"""The settings of the meta-metric computation, in one frozen object.

Every key lives once in ``conf/analysis/default.yaml``; ``ts2 analyze``, ``ts2 report``,
``ts2 run``, ``ts2 reproduce`` and the Python API (``ts2.analyze``, ``ts2.report``,
``ts2.reproduce``, :func:`analysis.session.run_analysis`, :func:`analysis.report.result_dirs.build_report`,
:func:`analysis.reproduction.reproduce`) build one :class:`AnalysisSettings` from it
(:meth:`AnalysisSettings.from_config`) and hand it, whole, to :func:`analysis.pipeline.analyze`
and :func:`analysis.pipeline.run_protocol`. The dataclass defaults equal the config's
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

from seg_data.graph import MAX_WALKS

from .inputs import SUBSET_SOURCES as SUBSETS
from .stats import ALPHA, BOOTSTRAP_SCHEMES

__all__ = ["AnalysisSettings", "RankingSettings", "ComparisonSettings", "CI_METHODS", "BOOTSTRAP_SCHEMES", "SUBSETS",
           "MIN_SEGS_CI", "resolve_settings", "split_changes"]

#: Intervals of the SEG-bootstrap replicates (:func:`analysis.stats.percentile_ci`, :func:`analysis.stats.bca_ci`).
CI_METHODS = ("bca", "percentile")
#: Fewest SEGs a cell needs for a bootstrap CI (``min_segs_ci``): below it a resample of the few
#: SEGs says nothing about the spread (one SEG gives an interval of width 0), so the CI is NaN.
MIN_SEGS_CI = 10


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


def _protocols(value: Any) -> tuple:
    """The protocols setting as a tuple of names (str) and protocol objects (a mapping of options, or an
    object with ``walks``); one name or object alone is a tuple of one."""
    protos = (value,) if isinstance(value, str) or not hasattr(value, "__iter__") else tuple(value)
    if not protos:
        raise ValueError("analysis setting protocols: expected at least one protocol, got none")
    bad = [p for p in protos if not (isinstance(p, str | Mapping) or hasattr(p, "walks"))]
    if bad:
        raise ValueError(f"analysis setting protocols: expected protocol names or Protocol objects, got {bad!r}")
    return tuple(str(p) if isinstance(p, str) else p for p in protos)


def _max_walks(value: Any) -> int:
    """The max_walks setting: a positive integer; null in a config is the library's bound."""
    mw = MAX_WALKS if value is None else value
    if isinstance(mw, bool) or not isinstance(mw, int) or mw < 1:
        raise ValueError(f"analysis setting max_walks: expected a positive integer or null, got {mw!r}")
    return mw


def _confidence(value: Any) -> float:
    """The confidence setting: a number in (0, 1), as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"analysis setting confidence: expected a number in (0, 1), got {value!r}")
    return float(value)


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
    max_walks : int
        A SEG with more walks is counted, named and left out of walk-based meta-metrics.

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
    max_walks: int = MAX_WALKS

    def __post_init__(self) -> None:
        # Lists (from a config or a caller) become tuples: the object stays hashable and frozen.
        object.__setattr__(self, "protocols", _protocols(self.protocols))
        mms = _names(self.meta_metrics, "meta_metrics")
        if not mms:
            raise ValueError("analysis setting meta_metrics: expected at least one meta-metric, got none")
        object.__setattr__(self, "meta_metrics", mms)
        object.__setattr__(self, "lower_is_better", _names(self.lower_is_better, "lower_is_better"))
        for key in ("bootstrap", "seed", "chance", "min_segs_ci"):
            _int(getattr(self, key), key)
        object.__setattr__(self, "max_walks", _max_walks(self.max_walks))
        object.__setattr__(self, "confidence", _confidence(self.confidence))
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

    def protocol_names(self) -> list[str]:
        """The protocols' names (a configured protocol by its ``name``)."""
        return [p if isinstance(p, str) else str(getattr(p, "name", p.get("name") if isinstance(p, Mapping) else p))
                for p in self.protocols]


@dataclass(frozen=True)
class RankingSettings:
    """The significance-grouped ranking of ``ts2 analyze`` (``ranking.*`` of ``conf/analyze.yaml``).

    Attributes
    ----------
    enabled : bool
        Rank the metrics (needs two or more); the verdict is computed either way.
    meta_metrics : tuple of str
        Meta-metrics the metrics are ranked by (and the verdict reads).
    subset : str
        The subset the ranking uses (``Avg``: all SEGs).
    alpha : float
        Family-wise error rate of the Holm-corrected pairwise tests (:data:`analysis.stats.ALPHA`).
    """

    enabled: bool = True
    meta_metrics: tuple[str, ...] = ("rank", "sep", "delta")
    subset: str = "Avg"
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"ranking setting enabled: expected true or false, got {self.enabled!r}")
        object.__setattr__(self, "meta_metrics", _names(self.meta_metrics, "ranking.meta_metrics"))
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a < 1:
            raise ValueError(f"ranking setting alpha: expected a number in (0, 1), got {a!r}")
        object.__setattr__(self, "alpha", float(a))
        object.__setattr__(self, "subset", str(self.subset))

    @classmethod
    def of(cls, value: RankingSettings | Mapping[str, Any] | bool | None) -> RankingSettings:
        """Settings from a caller's value: themselves, a mapping of some keys (the rest default),
        True/None (the defaults) or False (ranking off).

        Raises
        ------
        TypeError
            A mapping with an unknown key (the valid ones named).
        """
        if isinstance(value, cls):
            return value
        if value is None or value is True:
            return cls()
        if value is False:
            return cls(enabled=False)
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"expected ranking settings among {[f.name for f in fields(cls)]}, got {unknown}")
        return cls(**dict(value))


@dataclass(frozen=True)
class ComparisonSettings:
    """How ``ts2 analyze`` compares metrics with each other (the keys of ``conf/analyze.yaml`` that
    are not the dataset's, the inputs' or the analysis settings'; the dataclass defaults equal the
    config's, ``tests/test_analysis_settings.py`` checks it).

    Attributes
    ----------
    permutations : int
        Sign flips of the paired permutation tests (comparison, ranking, verdict).
    compare : tuple of str
        Two metrics for a paired difference with CI and p-value (empty: none).
    ranking : RankingSettings
        The ranking (and the verdict's meta-metrics, subset and alpha).
    table_meta_metrics : tuple of str
        Columns of the printed summary table.
    """

    permutations: int = 9999
    compare: tuple[str, ...] = ()
    ranking: RankingSettings = RankingSettings()
    table_meta_metrics: tuple[str, ...] = ("rank", "sep", "delta")

    def __post_init__(self) -> None:
        _int(self.permutations, "permutations", low=1)
        pair = _names(self.compare, "compare")
        if pair and len(pair) != 2:
            raise ValueError(f"expected compare=[metric_a,metric_b] (two metric names), got {list(pair)}")
        object.__setattr__(self, "compare", pair)
        object.__setattr__(self, "ranking", RankingSettings.of(self.ranking))
        object.__setattr__(self, "table_meta_metrics", _names(self.table_meta_metrics, "table_meta_metrics"))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ComparisonSettings:
        """The settings of a composed ``ts2 analyze`` config (keys absent from it keep their defaults)."""
        from omegaconf import OmegaConf

        values = {}
        for key in cls.keys():
            if key in cfg:
                v = cfg[key]
                values[key] = OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        if values.get("compare") is None:
            values.pop("compare", None)
        if values.get("ranking") is not None:
            values["ranking"] = RankingSettings.of(values["ranking"])
        return cls(**values)

    def updated(self, **changes: Any) -> ComparisonSettings:
        unknown = sorted(set(changes) - set(self.keys()))
        if unknown:
            raise TypeError(f"expected comparison settings among {list(self.keys())}, got {unknown}")
        if "ranking" in changes:
            changes["ranking"] = RankingSettings.of(changes["ranking"])
        return replace(self, **changes) if changes else self


def split_changes(changes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword arguments of a Python entry point, as ``(analysis settings, comparison settings)``.

    Raises
    ------
    TypeError
        A name that is neither (every valid name listed).
    """
    a_keys, c_keys = set(AnalysisSettings.keys()), set(ComparisonSettings.keys())
    unknown = sorted(set(changes) - a_keys - c_keys)
    if unknown:
        raise TypeError(f"expected settings among {sorted(a_keys | c_keys)}, got {unknown}")
    return ({k: v for k, v in changes.items() if k in a_keys}, {k: v for k, v in changes.items() if k in c_keys})


def resolve_settings(settings: AnalysisSettings | None, changes: Mapping[str, Any]) -> AnalysisSettings:
    """``settings`` (default: :class:`AnalysisSettings`'s defaults, which equal the config's) with
    ``changes`` (keyword arguments of a Python entry point) applied."""
    return (settings if settings is not None else AnalysisSettings()).updated(**dict(changes))
