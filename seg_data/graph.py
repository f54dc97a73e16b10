"""Graph builders and walks.

A *walk* is a root-to-sink path of a SEG's DAG (eq. 2 of the TS2 paper). The TS2 release has no
edge list; :func:`ts2_convention_graph` builds the graph the paper's code implies from labels only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import networkx as nx

from .model import SEG, ImageRecord, label_sort_key, parse_label

__all__ = ["walks", "count_walks", "check_walk_count", "WalkLimitError", "MAX_WALKS", "ts2_convention_edges",
           "build_graph", "levels_present"]

# Walks one SEG may have before anything enumerates them (8 levels x 10 nodes under the TS2
# convention is 10^8 walks: minutes and gigabytes). Counting is cheap (count_walks); raise the
# limit with max_walks=... where a command takes it.
MAX_WALKS = 1_000_000


class WalkLimitError(ValueError):
    """A SEG with more walks than allowed; ``.seg_id`` and ``.n_walks`` say which and how many."""

    def __init__(self, seg_id: str, n_walks: int, max_walks: int) -> None:
        self.seg_id, self.n_walks, self.max_walks = seg_id, n_walks, max_walks
        super().__init__(f"SEG {seg_id}: expected at most max_walks={max_walks} walks, got {n_walks} "
                         f"({n_walks:.2e}); raise max_walks to enumerate them, or split the SEG")


def levels_present(labels: Iterable[str]) -> list[int]:
    """Sorted distinct error levels among ``labels``."""
    return sorted({parse_label(lbl)[0] for lbl in labels})


def ts2_convention_edges(labels: Iterable[str]) -> list[tuple[str, str]]:
    """Edges of the TS2 release convention.

    Every node at one present level joins every node at the next *present* level; a level with
    no node is skipped (TS2 SEG 25 goes ``0 -> 2 -> 3 -> 4``). The walks of this graph are the
    Cartesian product of one node per present level, which is what the paper's code iterates.

    Examples
    --------
    >>> ts2_convention_edges(["0", "1a", "1b", "3"])
    [('0', '1a'), ('0', '1b'), ('1a', '3'), ('1b', '3')]
    """
    by_level: dict[int, list[str]] = {}
    for lbl in sorted(set(labels), key=label_sort_key):
        by_level.setdefault(parse_label(lbl)[0], []).append(lbl)
    levels = sorted(by_level)
    return [(u, v) for lo, hi in itertools.pairwise(levels) for u in by_level[lo] for v in by_level[hi]]


def build_graph(
    nodes: Mapping[str, Iterable[ImageRecord]],
    edges: Iterable[tuple[str, str]] | None = None,
    edge_errors: Mapping[tuple[str, str], Iterable[str]] | None = None,
    node_errors: Mapping[str, Iterable[str]] | None = None,
) -> nx.DiGraph:
    """Make a SEG graph from node labels -> images, with ``edges`` or the TS2 convention.

    Labels that do not parse get ``level = -1`` so that validation can report them by node
    instead of the builder failing on the first one.
    """
    g = nx.DiGraph()
    for label, imgs in nodes.items():
        label = str(label)
        try:
            level = parse_label(label)[0]
        except ValueError:
            level = -1
        g.add_node(label, label=label, level=level, images=tuple(imgs),
                   errors=tuple((node_errors or {}).get(label, ())))
    if edges is None:
        edges = ts2_convention_edges(n for n in g.nodes if g.nodes[n]["level"] >= 0)
    for u, v in edges:
        u, v = str(u), str(v)
        for end in (u, v):
            if end not in g:
                # An edge naming an unknown node: keep it visible to validation.
                g.add_node(end, label=end, level=_safe_level(end), images=(), errors=(), missing=True)
        g.add_edge(u, v, errors=tuple((edge_errors or {}).get((u, v), ())))
    return g


def _safe_level(label: str) -> int:
    try:
        return parse_label(label)[0]
    except ValueError:
        return -1


def _children_in_order(g: nx.DiGraph) -> tuple[dict, list] | None:
    """Each node's children (``g.successors``) and a topological order of ``g`` (Kahn's
    algorithm), or None when ``g`` has a cycle.

    The order networkx's ``topological_sort`` gives is not needed, any one is: networkx's
    per-call overhead (its dispatch and views) was most of the time of counting and listing the
    walks of thousands of small SEGs.
    """
    children = {n: list(g.successors(n)) for n in g}
    waiting = dict(g.in_degree())
    order = [n for n, d in waiting.items() if d == 0]
    for n in order:  # grows while read: a node joins once its last parent has
        for c in children[n]:
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
    return (children, order) if len(order) == len(children) else None


def count_walks(seg: SEG | nx.DiGraph) -> int:
    """Number of root-to-sink paths (the walks of :func:`walks`), without enumerating them.

    Dynamic programming over a topological order: ``paths(n) = 1`` at a sink, else the sum over
    children; the count is the sum over roots that have a child. Exact (Python integers), linear
    in nodes + edges.

    Raises
    ------
    networkx.NetworkXUnfeasible
        If the graph has a cycle.

    Examples
    --------
    >>> from seg_data.graph import build_graph
    >>> count_walks(build_graph({"0": [], "1a": [], "1b": [], "2": []}))
    2
    """
    g = seg.graph if isinstance(seg, SEG) else seg
    found = _children_in_order(g)
    if found is None:
        raise nx.NetworkXUnfeasible("Graph contains a cycle or graph changed during iteration")
    children, order = found
    paths: dict[str, int] = {}
    for n in reversed(order):
        paths[n] = sum(paths[c] for c in children[n]) if children[n] else 1
    return sum(paths[n] for n in g if g.in_degree(n) == 0 and children[n])


def check_walk_count(seg: SEG | nx.DiGraph, max_walks: int | None = MAX_WALKS, n_walks: int | None = None) -> int:
    """The walk count of ``seg``; :class:`WalkLimitError` when it is over ``max_walks`` (None: no limit)."""
    n = count_walks(seg) if n_walks is None else int(n_walks)
    if max_walks is not None and n > int(max_walks):
        raise WalkLimitError(seg.seg_id if isinstance(seg, SEG) else "<graph>", n, int(max_walks))
    return n


def walks(seg: SEG | nx.DiGraph, max_walks: int | None = MAX_WALKS) -> list[tuple[str, ...]]:
    """Every root-to-sink path of the SEG's DAG, in a stable order.

    Roots are nodes without parents, sinks nodes without children. A graph with a single node
    (or only isolated nodes) has no walk: a walk needs at least two nodes to order anything.
    Order: lexicographic by the label sort key of the nodes along the path.

    Raises
    ------
    networkx.NetworkXUnfeasible
        If the graph has a cycle (validate first for a report naming the nodes).
    WalkLimitError
        More than ``max_walks`` walks (counted first, by :func:`count_walks`).

    Examples
    --------
    >>> from seg_data.graph import build_graph
    >>> g = build_graph({"0": [], "1a": [], "1b": [], "2": []})
    >>> walks(g)
    [('0', '1a', '2'), ('0', '1b', '2')]
    """
    g = seg.graph if isinstance(seg, SEG) else seg
    found = _children_in_order(g)
    if found is None:
        cycle = nx.find_cycle(g)
        raise nx.NetworkXUnfeasible(f"expected a DAG, got a cycle through {[u for u, _ in cycle]}")
    if max_walks is not None:  # without a limit the count is not needed (callers that counted pass None)
        check_walk_count(seg, max_walks)
    children, _ = found
    # Depth first from every root with a child: in a DAG each path that ends where there is no
    # child is a walk (root to sink), each once; the sort below fixes the order.
    out: list[tuple[str, ...]] = []
    stack = [(r,) for r in g if g.in_degree(r) == 0 and children[r]]
    while stack:
        p = stack.pop()
        if children[p[-1]]:
            stack.extend((*p, c) for c in children[p[-1]])
        else:
            out.append(p)
    out.sort(key=lambda p: [label_sort_key(n) for n in p])
    return out
