"""Meta-metrics: one module per meta-metric, all computed per walk from :class:`WalkStats`.

=========  ================================  ==============================================
name       module                            per walk
=========  ================================  ==============================================
rank       :mod:`.rank`                      -Spearman(level, score)            (paper rank_m)
sep        :mod:`.sep`                       mean KS statistic between levels   (paper sep_m)
delta      :mod:`.delta`                     mean gap of adjacent level means   (paper delta_m)
kendall    :mod:`.kendall`                   -Kendall tau-b(level, score)
pair_acc   :mod:`.pair_acc`                  share of cross-level pairs ordered right
=========  ================================  ==============================================

The registry maps each name to its functions (the walk kernel and, where they exist, the
node-pair form, the exact null mean, the linear weights and the null stand-in) and to the
protocol options they take, so callers never branch on meta-metric names. A new meta-metric
needs only a walk kernel: ``register_meta_metric(MetaMetricSpec("mine", my_walks))``, with
``my_walks(stats: WalkStats, **options) -> (S, B, W) array``; the other forms make it faster
and give it exact chance levels, and are optional (the chance levels then permute it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import delta, kendall, pair_acc, rank, sep
from .nodestats import NodeFormUnavailable, NodeStats
from .walkstats import WalkStats

__all__ = ["MetaMetricSpec", "META_METRICS", "register_meta_metric", "get_meta_metric", "WalkStats", "NodeStats",
           "NodeFormUnavailable", "PAPER_META_METRICS"]


@dataclass(frozen=True)
class MetaMetricSpec:
    """A registered meta-metric.

    ``options`` maps keyword arguments of the walk function to :class:`~analysis.protocols.Protocol`
    fields; ``normalised`` marks the one divided by the metric's score std (delta); ``maximum``
    is the best value a metric can reach (None: unbounded), used by chance-adjusted values;
    ``minimum`` the worst (None: unbounded), which bounds a chance band. ``walks`` is the walk
    kernel: ``walks(stats: WalkStats, **options)`` gives the ``(S, B, W)`` walk values.
    ``null_mean`` is a function giving each walk's exact expected value under the within-SEG
    permutation null (:mod:`analysis.chance`) from the node-pair statistics of the unpermuted
    scores (the null keeps each SEG's multiset of scores and missing cells): called with the
    sequence of all batches and the same options, it returns one ``(S, B, W)`` array per batch,
    NaN where there is no closed form (None: never).
    ``order_only`` marks a meta-metric that reads the scores only through their order and ties
    along a walk, so metrics with the same pattern of ties share its permutation null.
    ``nodes`` is a function giving the same walk values from node-pair
    statistics (:class:`~.nodestats.NodeStats`, same options; None: the walk kernel only).
    ``linear`` is a function for a meta-metric whose walk value is linear in the
    scores (delta): its weights on each node's sum of valid scores, ``(S, B, W, P)`` from node
    statistics, same options; the chance band then needs no permutation (the variance of a
    linear statistic under a permutation is exact). None: not linear.
    ``null_estimate`` is a function for walks whose null expectation has no
    closed form: from the node statistics of permuted scores (same options), ``(S, B, W)`` values
    with exactly the walk value's null expectation and less variance (a conditional expectation
    minus control variates of mean 0), NaN where it has none; the chance level averages them in
    place of the walk values (None: never).
    """

    name: str
    walks: Callable[..., np.ndarray]
    options: tuple[tuple[str, str], ...] = ()
    normalised: bool = False
    description: str = ""
    maximum: float | None = 1.0
    minimum: float | None = None
    null_mean: Callable[..., list[np.ndarray]] | None = None
    order_only: bool = False
    nodes: Callable[..., np.ndarray] | None = None
    linear: Callable[..., np.ndarray] | None = None
    null_estimate: Callable[..., np.ndarray] | None = None

    def __call__(self, stats: WalkStats, protocol) -> np.ndarray:
        kwargs = {kw: getattr(protocol, field) for kw, field in self.options}
        return self.walks(stats, **kwargs)

    def from_nodes(self, stats: NodeStats, protocol) -> np.ndarray:
        """Walk values from node-pair statistics, ``(S, B, W)``.

        Raises
        ------
        NodeFormUnavailable
            No node-pair form (``nodes`` is None, or this option or walk shape has none).
        """
        if self.nodes is None:
            raise NodeFormUnavailable(f"meta-metric {self.name!r} has no node-pair form")
        kwargs = {kw: getattr(protocol, field) for kw, field in self.options}
        return self.nodes(stats, **kwargs)

    def linear_from_nodes(self, stats: NodeStats, protocol) -> np.ndarray:
        """``(S, B, W, P)`` weights of the walk value on each node's sum of valid scores (``linear``).

        Raises
        ------
        NodeFormUnavailable
            The meta-metric is not linear in the scores (``linear`` is None).
        """
        if self.linear is None:
            raise NodeFormUnavailable(f"meta-metric {self.name!r} is not linear in the scores")
        kwargs = {kw: getattr(protocol, field) for kw, field in self.options}
        return self.linear(stats, **kwargs)

    def null_estimate_from_nodes(self, stats: NodeStats, protocol) -> np.ndarray:
        """``(S, B, W)`` lower-variance stand-ins for permuted walk values (``null_estimate``; NaN
        where none, everywhere when it is None)."""
        if self.null_estimate is None:
            return np.full(stats.shape, np.nan)
        kwargs = {kw: getattr(protocol, field) for kw, field in self.options}
        return self.null_estimate(stats, **kwargs)

    def null_from_nodes(self, batches: Sequence[NodeStats], protocol) -> list[np.ndarray]:
        """Exact expected walk values under the within-SEG permutation null, one ``(S, B, W)`` array
        per batch of node-pair statistics of the unpermuted scores (``batches`` may build each
        item on access and is read in order, possibly twice: a costly closed form works out all
        batches' cases at once); NaN where unknown (everywhere when ``null_mean`` is None)."""
        if self.null_mean is None:
            return [np.full(st.shape, np.nan) for st in batches]
        kwargs = {kw: getattr(protocol, field) for kw, field in self.options}
        return self.null_mean(batches, **kwargs)


META_METRICS: dict[str, MetaMetricSpec] = {}


def register_meta_metric(spec: MetaMetricSpec) -> None:
    if spec.name in META_METRICS:
        raise ValueError(f"meta-metric {spec.name!r} is already registered")
    META_METRICS[spec.name] = spec


def get_meta_metric(name: str) -> MetaMetricSpec:
    try:
        return META_METRICS[name]
    except KeyError as e:
        raise ValueError(f"expected a meta-metric among {list(META_METRICS)}, got {name!r}") from e


for _spec in (
    MetaMetricSpec("rank", rank.rank_walks, (("tie_method", "tie_method"), ("degenerate", "degenerate_walk")),
                   description="Spearman ordering score rank_m", minimum=-1.0, order_only=True,
                   null_mean=rank.rank_null_means, nodes=rank.rank_nodes, null_estimate=rank.rank_null_estimate),
    MetaMetricSpec("sep", sep.sep_walks, (("pairs", "ks_pairs"), ("degenerate", "degenerate_walk")),
                   description="Kolmogorov-Smirnov separation score sep_m", minimum=0.0, order_only=True,
                   null_mean=sep.sep_null_means, nodes=sep.sep_nodes),
    MetaMetricSpec("delta", delta.delta_walks, (("degenerate", "degenerate_walk"),),
                   normalised=True, description="dynamic-range separation delta_m", maximum=None, minimum=None,
                   null_mean=delta.delta_null_means, nodes=delta.delta_nodes, linear=delta.delta_linear),
    MetaMetricSpec("kendall", kendall.kendall_walks, (("degenerate", "degenerate_walk"),),
                   description="Kendall tau-b ordering score", minimum=-1.0, order_only=True,
                   null_mean=kendall.kendall_null_means, nodes=kendall.kendall_nodes,
                   null_estimate=kendall.kendall_null_estimate),
    MetaMetricSpec("pair_acc", pair_acc.pair_acc_walks, description="tie-aware pairwise ordering accuracy",
                   minimum=0.0, order_only=True, null_mean=pair_acc.pair_acc_null_means, nodes=pair_acc.pair_acc_nodes),
):
    register_meta_metric(_spec)

PAPER_META_METRICS = ("rank", "sep", "delta")
