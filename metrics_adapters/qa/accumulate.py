"""Turning per-question correctness into one image score: TIFA and DSG accumulation.

Pure functions, no models. Both work on either question set (the paper's Table 3 ablation):
TIFA accumulation ignores the dependency graph; DSG accumulation on a set without dependencies
equals TIFA accumulation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np

__all__ = ["tifa_accumulate", "dsg_gate", "dsg_accumulate", "accumulate", "ACCUMULATIONS"]


def _as_bools(correct: Mapping[str, bool], where: str) -> dict[str, bool]:
    out = {}
    for k, v in correct.items():
        ok = isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1))
        if not ok:
            raise ValueError(f"{where}: expected True/False for question {k!r}, got {v!r}")
        out[str(k)] = bool(v)
    return out


def tifa_accumulate(correct: Sequence[bool] | Mapping[str, bool]) -> float:
    """TIFA score: the fraction of questions answered correctly (TIFA eq. 1).

    .. math:: s = \\frac{1}{N} \\sum_{i=1}^{N} \\mathbb{1}[a_i = a_i^*]

    Parameters
    ----------
    correct : sequence of bool, or mapping question id -> bool

    Returns
    -------
    float
        In [0, 1]; ``nan`` for an empty set (no questions: no evidence either way).

    Raises
    ------
    ValueError
        A value that is not a bool (e.g. ``None`` for an unanswered question).

    Examples
    --------
    >>> tifa_accumulate([True, False, True, True])
    0.75
    """
    vals = list(correct.values()) if isinstance(correct, Mapping) else list(correct)
    bools = _as_bools(dict(enumerate(vals)), "tifa_accumulate")
    if not bools:
        return math.nan
    return sum(bools.values()) / len(bools)


def dsg_gate(correct: Mapping[str, bool], graph: nx.DiGraph) -> dict[str, bool]:
    """Per-question satisfaction with transitive parent gating (DSG).

    A question is satisfied only if it and *all its ancestors* in the dependency DAG were answered
    correctly (if "is there a boy?" fails, "is the boy's shirt green?" fails too, whatever its
    answer). With several parents (``0-1``) every parent must hold.

    Parameters
    ----------
    correct : mapping question id -> bool
        Correctness of each question's matched answer.
    graph : networkx.DiGraph
        Dependency DAG, edge parent -> child, over exactly the ids of ``correct``.

    Returns
    -------
    dict
        Question id -> satisfied, in the order of ``correct``.

    Raises
    ------
    ValueError
        ``graph`` and ``correct`` disagree on the question ids, or ``graph`` has a cycle.

    Examples
    --------
    >>> g = nx.DiGraph([("0", "2"), ("1", "2")])
    >>> dsg_gate({"0": True, "1": False, "2": True}, g)
    {'0': True, '1': False, '2': False}
    """
    c = _as_bools(correct, "dsg_gate")
    nodes = {str(n) for n in graph.nodes}
    if nodes != set(c):
        raise ValueError(f"dsg_gate: expected correctness for exactly the graph's questions {sorted(nodes)}, "
                         f"got {sorted(c)}")
    if not nx.is_directed_acyclic_graph(graph):
        raise ValueError(f"dsg_gate: expected an acyclic dependency graph, got the cycle {nx.find_cycle(graph)}")
    # Topological order lets each node look only at its direct parents' already-gated values.
    gated: dict[str, bool] = {}
    for n in nx.topological_sort(graph):
        n = str(n)
        gated[n] = c[n] and all(gated[str(p)] for p in graph.predecessors(n))
    return {k: gated[k] for k in c}


def dsg_accumulate(correct: Mapping[str, bool], graph: nx.DiGraph) -> float:
    """DSG score: the fraction of questions satisfied after :func:`dsg_gate`.

    Returns ``nan`` for an empty set.

    Examples
    --------
    >>> g = nx.DiGraph(); g.add_nodes_from(["0", "1"]); g.add_edge("0", "1")
    >>> dsg_accumulate({"0": False, "1": True}, g)
    0.0
    """
    gated = dsg_gate(correct, graph)
    return tifa_accumulate(list(gated.values()))


def _tifa(correct: Mapping[str, bool], graph: nx.DiGraph | None) -> float:
    return tifa_accumulate(correct)


def _dsg(correct: Mapping[str, bool], graph: nx.DiGraph | None) -> float:
    if graph is None:
        graph = nx.DiGraph()
        graph.add_nodes_from(str(k) for k in correct)
    return dsg_accumulate(correct, graph)


ACCUMULATIONS = {"tifa": _tifa, "dsg": _dsg}


def accumulate(method: str, correct: Mapping[str, bool], graph: nx.DiGraph | None = None) -> float:
    """Score with the named accumulation (``"tifa"`` or ``"dsg"``).

    Raises
    ------
    ValueError
        Unknown ``method`` (the message lists the valid ones).
    """
    try:
        fn = ACCUMULATIONS[method]
    except KeyError:
        raise ValueError(f"expected an accumulation in {sorted(ACCUMULATIONS)}, got {method!r}") from None
    return fn(correct, graph)
