"""A dataset summary: what ``ts2 data info`` prints."""

from __future__ import annotations

from collections import Counter
from statistics import median

import networkx as nx

from .graph import MAX_WALKS, count_walks
from .model import SEGDataset
from .validate import validate_dataset

__all__ = ["summarize", "format_summary"]


def _walk_counts(ds: SEGDataset) -> dict[str, int]:
    """Walks per SEG, counted (never enumerated); a SEG with a cycle has none (validation says why)."""
    out = {}
    for s in ds:
        try:
            out[s.seg_id] = count_walks(s)
        except nx.NetworkXUnfeasible:
            out[s.seg_id] = 0
    return out


def summarize(ds: SEGDataset, check_images: bool = False, max_walks: int | None = MAX_WALKS) -> dict:
    """Counts of a dataset as plain data (JSON-ready).

    Keys: ``name``, ``n_segs``, ``n_images``, ``n_nodes``, ``n_edges``, ``nodes_per_level``
    (level -> count, levels as strings for JSON), ``n_walks``, ``images_per_seg`` (min/median/max),
    ``segs_per_subset``, ``problems`` (validation findings as dicts), ``max_walks_seg``
    (the SEG with the most walks and its count) and ``over_max_walks`` (SEG id -> walk count
    for SEGs over ``max_walks``: the analysis leaves their walk-based meta-metrics out).
    Walks are counted by :func:`seg_data.graph.count_walks`, so a SEG with 10^8 walks costs
    nothing here.
    """
    levels = Counter(ds_seg.level(n) for ds_seg in ds for n in ds_seg.graph.nodes)
    return {
        "name": ds.name,
        "n_segs": len(ds),
        "n_images": ds.n_images,
        "n_nodes": sum(len(s.graph) for s in ds),
        "n_edges": sum(s.graph.number_of_edges() for s in ds),
        "nodes_per_level": {str(k): levels[k] for k in sorted(levels)},
        **_walk_summary(_walk_counts(ds), max_walks),
        "images_per_seg": _spread([s.n_images for s in ds]),
        "segs_per_subset": {k: len(v) for k, v in ds.subsets().items()},
        "problems": [p.to_dict() for p in _problems(ds, check_images)],
    }


def _walk_summary(counts: dict[str, int], max_walks: int | None) -> dict:
    """``n_walks`` (all SEGs), ``max_walks_seg`` (the SEG with the most, with its count; ``None`` for no SEG)
    and ``over_max_walks`` (SEG id -> count, for the SEGs over ``max_walks``)."""
    return {
        "n_walks": sum(counts.values()),
        "max_walks_seg": max(((k, v) for k, v in counts.items()), key=lambda kv: kv[1], default=None),
        "over_max_walks": {k: v for k, v in counts.items() if max_walks is not None and v > max_walks},
    }


def _spread(values: list[int]) -> dict:
    """``min``, ``median`` and ``max`` of ``values`` (all 0 when there are none)."""
    return {"min": min(values, default=0), "median": median(values) if values else 0, "max": max(values, default=0)}


def _problems(ds: SEGDataset, check_images: bool) -> list:
    """The validation findings: those recorded at load time (e.g. prompt mismatches of the TS2 release) first,
    then the validation's own, each once."""
    problems = validate_dataset(ds, check_images=check_images)
    known = {(p.code, p.seg_id, p.node, p.message) for p in problems}
    earlier = [p for p in ds.metadata.get("problems", []) if (p.code, p.seg_id, p.node, p.message) not in known]
    return earlier + problems


def format_summary(info: dict) -> str:
    """Readable multi-line text of :func:`summarize`'s result."""
    ips = info["images_per_seg"]
    lines = [
        f"dataset {info['name']}: {info['n_segs']} SEGs, {info['n_images']} images, "
        f"{info['n_nodes']} nodes, {info['n_edges']} edges, {info['n_walks']} walks",
        "nodes per level: " + ", ".join(f"{k}: {v}" for k, v in info["nodes_per_level"].items()),
        f"images per SEG: min {ips['min']}, median {ips['median']}, max {ips['max']}",
        "SEGs per subset: " + (", ".join(f"{k}: {v}" for k, v in info["segs_per_subset"].items()) or "(none)"),
    ]
    for sid, n in info.get("over_max_walks", {}).items():
        lines.append(f"SEG {sid}: {n} walks ({n:.2e}), over max_walks: the analysis leaves its walk-based "
                     "meta-metrics out (raise max_walks to include it)")
    errs = [p for p in info["problems"] if p["severity"] == "error"]
    warns = [p for p in info["problems"] if p["severity"] != "error"]
    lines.append(f"problems: {len(errs)} error(s), {len(warns)} warning(s)")
    for p in info["problems"][:20]:
        node = f", node {p['node']}" if p["node"] is not None else ""
        lines.append(f"  {p['severity']}: SEG {p['seg_id']}{node}: {p['message']}")
    if len(info["problems"]) > 20:
        lines.append(f"  ... {len(info['problems']) - 20} more (json=true lists all)")
    return "\n".join(lines)
