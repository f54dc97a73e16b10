"""Validation of SEGs: every problem is reported, not just the first.

Each finding is a :class:`Problem` naming the SEG and node. ``error`` findings make loaders raise
:class:`SEGValidationError` (carrying the whole report); ``warning`` findings are logged.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import networkx as nx

from .model import SEG, SEGDataset, label_sort_key, parse_label

__all__ = ["Problem", "SEGValidationError", "validate_seg", "validate_dataset", "raise_on_errors"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Problem:
    """One validation finding.

    ``code`` is a stable machine-readable name: ``cycle``, ``unreachable``, ``level_order``,
    ``bad_label``, ``duplicate_image``, ``missing_image``, ``empty_prompt``, ``no_root``,
    ``unknown_node``, ``empty_node``, ``prompt_mismatch``.
    """

    severity: str  # "error" | "warning"
    code: str
    seg_id: str
    node: str | None
    message: str

    def __str__(self) -> str:
        where = f"SEG {self.seg_id}" + (f", node {self.node}" if self.node is not None else "")
        return f"{self.severity}: {where}: {self.message} [{self.code}]"

    def to_dict(self) -> dict:
        return asdict(self)


class SEGValidationError(ValueError):
    """Raised when a dataset has validation errors; ``.problems`` holds the full report."""

    def __init__(self, problems: list[Problem], source: str = "") -> None:
        self.problems = problems
        errs = [p for p in problems if p.severity == "error"]
        head = f"{source}: " if source else ""
        lines = "\n  ".join(str(p) for p in errs[:50])
        more = f"\n  ... and {len(errs) - 50} more" if len(errs) > 50 else ""
        super().__init__(f"{head}{len(errs)} validation error(s):\n  {lines}{more}")


def validate_seg(seg: SEG, check_images: bool = False) -> list[Problem]:
    """All problems of one SEG.

    Checks: empty prompt; unparseable labels; nodes referenced by edges but not defined; cycles;
    no error-0 node; nodes unreachable from an error-0 node; a child with no more errors than its
    parent; duplicate image ids within the SEG; nodes without images (warning); and, when
    ``check_images``, image files that are missing.
    """
    out: list[Problem] = []
    if not str(seg.prompt or "").strip():
        out.append(Problem("error", "empty_prompt", seg.seg_id, None, "expected a non-empty prompt, got an empty one"))
    bad = _node_problems(seg, out)
    out.extend(_cycle_problems(seg))
    out.extend(_reachability_problems(seg, bad))
    out.extend(_level_order_problems(seg, bad))
    out.extend(_image_problems(seg, check_images))
    return out


def _node_problems(seg: SEG, out: list[Problem]) -> set:
    """Per-node label and content checks, appended to ``out``; returns the nodes with bad labels.

    The bad-label set is returned because the later graph checks must skip those nodes (they have
    no level to compare).
    """
    g = seg.graph
    bad = set()
    for n in sorted(g.nodes, key=str):
        try:
            parse_label(n)
        except ValueError as e:
            bad.add(n)
            out.append(Problem("error", "bad_label", seg.seg_id, n, str(e)))
        if g.nodes[n].get("missing"):
            out.append(Problem("error", "unknown_node", seg.seg_id, n,
                               "an edge names this node, but the SEG defines no such node"))
        elif not g.nodes[n].get("images"):
            out.append(Problem("warning", "empty_node", seg.seg_id, n, "node has no images"))
    return bad


def _cycle_problems(seg: SEG) -> list[Problem]:
    """One ``cycle`` error per simple cycle, in a reproducible order (see the comment inside)."""
    g = seg.graph
    if nx.is_directed_acyclic_graph(g):
        return []
    # simple_cycles' order and starting node follow set iteration (hash-seeded per process):
    # start each cycle at its first node in label order, and sort, so reports are reproducible.
    cycles = []
    for comp in nx.simple_cycles(g):
        k = min(range(len(comp)), key=lambda i: label_sort_key(comp[i]))
        cycles.append(comp[k:] + comp[:k])
    return [Problem("error", "cycle", seg.seg_id, comp[0], f"cycle through nodes {' -> '.join(comp + [comp[0]])}")
            for comp in sorted(cycles, key=lambda c: [label_sort_key(n) for n in c])]


def _reachability_problems(seg: SEG, bad: set) -> list[Problem]:
    """``no_root`` when a non-empty SEG has no error-0 node, else one ``unreachable`` per orphan node."""
    g = seg.graph
    roots = [n for n in g if n not in bad and g.nodes[n]["level"] == 0]
    if len(g) and not roots:
        return [Problem("error", "no_root", seg.seg_id, None,
                        "expected at least one error-0 node (label '0'), got none")]
    reach = set(roots)
    for r in roots:
        reach |= nx.descendants(g, r)
    return [Problem("error", "unreachable", seg.seg_id, n, "node is not reachable from any error-0 node")
            for n in sorted(set(g) - reach - bad, key=str)]


def _level_order_problems(seg: SEG, bad: set) -> list[Problem]:
    """One ``level_order`` error per edge whose child has no more errors than its parent."""
    g = seg.graph
    out: list[Problem] = []
    for u, v in g.edges:
        if u in bad or v in bad:
            continue
        lu, lv = g.nodes[u]["level"], g.nodes[v]["level"]
        if lv <= lu:
            out.append(Problem("error", "level_order", seg.seg_id, v,
                               f"edge {u} -> {v}: expected the child to have more errors than its parent ({lu}), got {lv}"))
    return out


def _image_problems(seg: SEG, check_images: bool) -> list[Problem]:
    """Image ids repeated within the SEG and, when ``check_images``, image files that are missing."""
    g = seg.graph
    out: list[Problem] = []
    counts = Counter(img.image_id for n in g for img in g.nodes[n].get("images", ()))
    for n in sorted(g, key=str):
        for img in g.nodes[n].get("images", ()):
            if counts[img.image_id] > 1:
                out.append(Problem("error", "duplicate_image", seg.seg_id, n,
                                   f"image id {img.image_id!r} appears {counts[img.image_id]} times"))
            if check_images:
                if img.path is None:
                    out.append(Problem("error", "missing_image", seg.seg_id, n, f"image {img.image_id!r} has no file path"))
                elif not img.path.is_file():
                    out.append(Problem("error", "missing_image", seg.seg_id, n, f"image file {img.path} does not exist"))
    return out


def validate_dataset(ds: SEGDataset | Iterable[SEG], check_images: bool = False) -> list[Problem]:
    """All problems of all SEGs, plus image ids shared between SEGs."""
    segs = list(ds)
    out: list[Problem] = []
    owner: dict[str, str] = {}
    for s in segs:
        out.extend(validate_seg(s, check_images=check_images))
        for node, img in s.iter_images():
            prev = owner.setdefault(img.image_id, s.seg_id)
            if prev != s.seg_id:
                out.append(Problem("error", "duplicate_image", s.seg_id, node,
                                   f"image id {img.image_id!r} is also used by SEG {prev}"))
    return out


def raise_on_errors(problems: list[Problem], source: str = "") -> None:
    """Log warnings; raise :class:`SEGValidationError` if any finding is an error."""
    for p in problems:
        if p.severity == "warning":
            log.warning("%s%s", f"{source}: " if source else "", p)
    if any(p.severity == "error" for p in problems):
        raise SEGValidationError(problems, source)
