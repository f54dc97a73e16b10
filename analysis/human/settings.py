"""The settings of the human view (``ts2 analyze human=...`` and ``ts2.human``): :class:`HumanSettings`.

The command line reads them from ``conf/analyze.yaml`` (:meth:`HumanSettings.from_mapping`, which knows that
config's key names: ``human_permutations``, ``human_clusters.statistics`` / ``.alpha``); Python builds them or
replaces single ones with keywords. The dataclass defaults are the config's (tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..settings_base import PlainSettings, as_tuple, names_or_none, plain
from .view import CLUSTER_STATISTICS

__all__ = ["HumanSettings"]


@dataclass(frozen=True)
class HumanSettings(PlainSettings):
    """How metrics are compared with people.

    Attributes
    ----------
    metrics : tuple of str or None
        Metric columns analysed (None: every one).
    bootstrap : int
        Bootstrap replicates of the CIs (0: none).
    seed : int
        Seed of the bootstrap and permutations.
    confidence : float
        Level of the CIs.
    permutations : int
        Permutations of the paired tests between metrics (0: no tests, no clusters). Not the SEG analysis'
        ``permutations``: a pooled permutation test here recomputes a statistic on all images per draw.
    cluster_statistics : tuple of str
        Statistics whose metrics are grouped into significance clusters.
    alpha : float
        Family-wise error rate of the Holm-corrected tests behind the clusters.
    progress : bool
        Progress bars.
    """

    metrics: tuple[str, ...] | None = None
    bootstrap: int = 1000
    seed: int = 0
    confidence: float = 0.95
    permutations: int = 1000
    cluster_statistics: tuple[str, ...] = CLUSTER_STATISTICS
    alpha: float = 0.05
    progress: bool = True

    #: ``conf/analyze.yaml``'s name of a setting, where it differs.
    CONFIG_KEYS = {"permutations": "human_permutations", "cluster_statistics": "human_clusters.statistics",
                   "alpha": "human_clusters.alpha"}

    KINDS: ClassVar[dict[str, Any]] = {
        "metrics": names_or_none, "bootstrap": int, "seed": int, "confidence": float, "permutations": int,
        "cluster_statistics": as_tuple, "alpha": float, "progress": bool}

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any]) -> HumanSettings:
        """The settings of a composed ``ts2 analyze`` config; a key it lacks or sets to null keeps its default."""
        values = {}
        for key in cls.keys():
            head, _, tail = cls.CONFIG_KEYS.get(key, key).partition(".")
            v = cfg.get(head) if hasattr(cfg, "get") else None
            if tail:
                v = v.get(tail) if hasattr(v, "get") else None
            if v is not None:
                values[key] = plain(v)
        return cls(**cls._coerce(values))

    def view_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`analysis.human.sets.run_human_sets` these settings set."""
        return {"n_boot": self.bootstrap, "seed": self.seed, "confidence": self.confidence,
                "n_perm": self.permutations, "progress": self.progress, "alpha": self.alpha,
                "cluster_statistics": self.cluster_statistics}
