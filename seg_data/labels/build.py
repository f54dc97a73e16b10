"""Semantic error graphs from fine-grained labels: the rule (docs/labels.md).

1. An element *fails* on an image when the mean of its raters' labels is below ``fail_below``
   (0.5: a 0.5 mean, raters split evenly, is not a failure).
2. The images of one prompt (grouped by exact prompt text) make one SEG; they are grouped into
   nodes by their exact set of failed elements; a node's level is the size of that set.
3. Edges are the covering relation of set inclusion: ``A -> B`` when A's failed set is a proper
   subset of B's and no other node's set lies strictly between them; node ``0`` (no failed
   element) therefore reaches every node.
4. A prompt without an image that has no failed element, or whose images form a single node,
   gives no SEG; the build counts such prompts by reason.

Node names follow TS2 (``0``, ``1``, or ``1a``/``1b`` when a level has several nodes, ...); each
node lists its failed elements as its ``errors`` and each edge the elements it adds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..graph import build_graph
from ..model import SEG, ImageRecord, SEGDataset
from .records import LabelFormatError, LabelRecord

__all__ = ["LabelSettings", "BuildSummary", "build_segs", "node_names", "covering_edges", "failed_elements",
           "SUBSET_BY", "GROUP_BY", "DROP_NO_ROOT", "DROP_ONE_NODE"]

SUBSET_BY = ("category", "generator", "none")
GROUP_BY = ("prompt", "prompt_generator")
DROP_NO_ROOT = "no image without a failed element"
DROP_ONE_NODE = "a single node"


@dataclass(frozen=True)
class LabelSettings:
    """The thresholds and choices of the build (each a ``ts2 data from-labels`` key).

    Attributes
    ----------
    fail_below : float
        An element fails when its raters' mean label is strictly below this (default 0.5).
    min_raters : int
        Elements with fewer rater labels on an image are refused (default 1).
    subset_by : str
        ``category``: a SEG's subset is the one category all its failed elements share, or
        ``mixed``; ``generator``: the one generator all its images come from, or ``mixed``;
        ``none``: no subsets.
    group_by : str
        ``prompt``: one SEG per prompt; ``prompt_generator``: one SEG per prompt and generator
        (each SEG holds one model's images, so ``subset_by=generator`` compares generators).
    """

    fail_below: float = 0.5
    min_raters: int = 1
    subset_by: str = "category"
    group_by: str = "prompt"

    def __post_init__(self) -> None:
        if not 0 < self.fail_below <= 1:
            raise ValueError(f"expected fail_below in (0, 1], got {self.fail_below!r}")
        if self.min_raters < 1:
            raise ValueError(f"expected min_raters >= 1, got {self.min_raters!r}")
        if self.subset_by not in SUBSET_BY:
            raise ValueError(f"expected subset_by to be one of {list(SUBSET_BY)}, got {self.subset_by!r}")
        if self.group_by not in GROUP_BY:
            raise ValueError(f"expected group_by to be one of {list(GROUP_BY)}, got {self.group_by!r}")


@dataclass(frozen=True)
class BuildSummary:
    """What a build made and left out, and how solid its labels are.

    ``rater_pairwise_agreement``: over every (image, element) with two or more raters, the share
    of rater pairs that gave the same label; ``rater_unanimous``: the share of those judgments
    with one label from every rater; ``at_threshold``: judgments whose mean equals ``fail_below``
    (kept as not failed; the ones a different threshold would flip first).
    """

    n_prompts: int
    n_segs: int
    n_images: int
    n_images_dropped: int
    nodes_per_level: dict[int, int]
    dropped_prompts: dict[str, int]
    segs_per_subset: dict[str, int]
    n_judgments: int
    rater_pairwise_agreement: float | None
    rater_unanimous: float | None
    at_threshold: int
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        from dataclasses import asdict

        d = asdict(self)
        d["nodes_per_level"] = {str(k): v for k, v in self.nodes_per_level.items()}
        return d

    def lines(self) -> list[str]:
        """The summary in words, one fact a line."""
        agree = ("n/a (one rater per element)" if self.rater_pairwise_agreement is None else
                 f"{self.rater_pairwise_agreement:.3f} pairwise, {self.rater_unanimous:.3f} unanimous")
        dropped = ", ".join(f"{n} with {why}" for why, n in self.dropped_prompts.items() if n) or "none"
        return [
            f"prompts: {self.n_prompts}; SEGs built: {self.n_segs}; images in SEGs: {self.n_images} "
            f"({self.n_images_dropped} in dropped prompts)",
            "nodes per level: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.nodes_per_level.items())),
            f"dropped prompts: {dropped}",
            "SEGs per subset: " + (", ".join(f"{k}: {v}" for k, v in self.segs_per_subset.items()) or "(none)"),
            f"rater agreement on {self.n_judgments} element judgments used: {agree}; "
            f"{self.at_threshold} at the threshold fail_below={self.settings.get('fail_below')}",
        ]


def failed_elements(record: LabelRecord, settings: LabelSettings) -> frozenset[str]:
    """The elements whose raters' mean label is below ``settings.fail_below``."""
    out = []
    for element, labels in record.elements.items():
        if len(labels) < settings.min_raters:
            raise LabelFormatError(f"{record.where}: element {element!r}: expected at least "
                                   f"min_raters={settings.min_raters} labels, got {len(labels)}")
        if sum(labels) / len(labels) < settings.fail_below:
            out.append(element)
    return frozenset(out)


def _letters(i: int) -> str:
    """0 -> a, 25 -> z, 26 -> aa (bijective base 26)."""
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(97 + r) + s
    return s


def node_names(sets: Iterable[frozenset[str]]) -> dict[frozenset[str], str]:
    """TS2-style labels for distinct failed sets: level digits, letters where a level has several.

    Within a level, sets are ordered by their sorted elements, so names are reproducible.

    Examples
    --------
    >>> names = node_names([frozenset(), frozenset({"b"}), frozenset({"a"}), frozenset({"a", "b"})])
    >>> [names[s] for s in (frozenset(), frozenset({"a"}), frozenset({"b"}), frozenset({"a", "b"}))]
    ['0', '1a', '1b', '2']
    """
    by_level: dict[int, list[frozenset[str]]] = {}
    for s in set(sets):
        by_level.setdefault(len(s), []).append(s)
    names = {}
    for level, group in by_level.items():
        group.sort(key=lambda s: sorted(s))
        for i, s in enumerate(group):
            names[s] = str(level) + (_letters(i) if len(group) > 1 else "")
    return names


def covering_edges(sets: Sequence[frozenset[str]]) -> list[tuple[frozenset[str], frozenset[str]]]:
    """``(A, B)`` for every A ⊂ B (proper) with no other given set strictly between them.

    Examples
    --------
    >>> e = covering_edges([frozenset(), frozenset("a"), frozenset("ab"), frozenset("c")])
    >>> sorted(("".join(sorted(a)), "".join(sorted(b))) for a, b in e)
    [('', 'a'), ('', 'c'), ('a', 'ab')]
    """
    sets = sorted(set(sets), key=lambda s: (len(s), sorted(s)))
    edges = []
    for a, b in itertools.permutations(sets, 2):
        if a < b and not any(a < c < b for c in sets):
            edges.append((a, b))
    return edges


def _agreement(records: Iterable[LabelRecord], fail_below: float) -> tuple[int, float | None, float | None, int]:
    pairs = same = judged = unanimous = at = 0
    for r in records:
        for labels in r.elements.values():
            k = len(labels)
            at += sum(labels) / k == fail_below
            if k < 2:
                continue
            ones = int(sum(labels))
            zeros = k - ones
            pairs += k * (k - 1)
            same += ones * (ones - 1) + zeros * (zeros - 1)
            judged += 1
            unanimous += ones in (0, k)
    if not judged:
        return at, None, None, 0
    return judged, same / pairs, unanimous / judged, at


def _subset(failed: Iterable[frozenset[str]], categories: dict[str, str | None], generators: set[str | None],
            how: str) -> str | None:
    if how == "none":
        return None
    if how == "generator":
        return None if generators == {None} else next(iter(generators)) if len(generators) == 1 else "mixed"
    cats = {categories.get(e) for s in failed for e in s}
    cats.discard(None)
    if not cats:
        return None
    return next(iter(cats)) if len(cats) == 1 else "mixed"


def _one_seg(seg_id: str, prompt: str, group: list[LabelRecord], settings: LabelSettings,
             images_dir: Path | None, source: str) -> SEG | str:
    """The SEG of one prompt's records, or the reason it is dropped."""
    by_set: dict[frozenset[str], list[LabelRecord]] = {}
    for r in group:
        by_set.setdefault(failed_elements(r, settings), []).append(r)
    if frozenset() not in by_set:
        return DROP_NO_ROOT
    if len(by_set) == 1:
        return DROP_ONE_NODE
    names = node_names(by_set)
    categories: dict[str, str | None] = {}
    for r in group:
        categories.update(r.categories)
    order = sorted(by_set, key=lambda s: (len(s), names[s]))
    g = _label_graph(by_set, order, names, images_dir, source)
    generators = {r.generator for r in group}
    subset = _subset(order, categories, generators, settings.subset_by)
    return SEG(seg_id=seg_id, prompt=prompt, graph=g, subset=subset,
               metadata=_seg_metadata(set().union(*order), categories, generators))


def _label_graph(by_set: dict[frozenset[str], list[LabelRecord]], order: list[frozenset[str]],
                 names: dict[frozenset[str], str], images_dir: Path | None, source: str):
    """The SEG's graph: one node per set of failed elements (its images, its elements as the node's errors),
    an edge from each set to the sets that cover it with one element more (that element the edge's error)."""
    nodes = {names[s]: [ImageRecord(image_id=r.image, path=None if images_dir is None else images_dir / r.image,
                                    source=r.generator or source) for r in by_set[s]] for s in order}
    edges = covering_edges(order)
    return build_graph(nodes, edges=[(names[a], names[b]) for a, b in edges],
                       edge_errors={(names[a], names[b]): sorted(b - a) for a, b in edges},
                       node_errors={names[s]: sorted(s) for s in order})


def _seg_metadata(failed: set[str], categories: dict[str, str | None], generators: set[str | None]) -> dict:
    """``elements`` (each failed element with its category) and, when every image has the same one, ``generator``."""
    meta: dict = {"elements": {e: categories.get(e) for e in sorted(failed)}}
    if len(generators) == 1 and None not in generators:
        meta["generator"] = next(iter(generators))
    return meta


def build_segs(records: Sequence[LabelRecord], settings: LabelSettings | None = None,
               images_dir: str | Path | None = None, name: str = "labels",
               source: str = "labels") -> tuple[SEGDataset, BuildSummary]:
    """Turn label records into a SEG dataset by the rule of this module.

    Parameters
    ----------
    records : sequence of LabelRecord
        Validated records (:func:`seg_data.labels.read_labels`); each image once.
    settings : LabelSettings, optional
        Thresholds (default ``LabelSettings()``).
    images_dir : path, optional
        Folder the records' image paths are relative to; None leaves image paths unset.
    name, source : str
        The dataset's name; the image ``source`` where a record names no generator.

    Returns
    -------
    (SEGDataset, BuildSummary)
        SEG ids are each prompt's index in order of first appearance (``"0"``, ``"1"``, ...; a
        dropped prompt leaves its number unused, so ids stay stable across thresholds); the summary.

    Raises
    ------
    LabelFormatError
        An image given twice, or an element with fewer than ``min_raters`` labels.
    """
    settings = settings or LabelSettings()
    images_dir = None if images_dir is None else Path(images_dir)
    groups: dict[str, list[LabelRecord]] = {}
    seen: dict[str, str] = {}
    for r in records:
        if r.image in seen:
            raise LabelFormatError(f"{r.where}: expected each image once, got {r.image!r} again (first: {seen[r.image]})")
        seen[r.image] = r.where
        key = (r.prompt, r.generator) if settings.group_by == "prompt_generator" else (r.prompt, None)
        groups.setdefault(key, []).append(r)
    segs: list[SEG] = []
    dropped: Counter = Counter({DROP_NO_ROOT: 0, DROP_ONE_NODE: 0})
    used: list[LabelRecord] = []
    n_dropped_images = 0
    for index, ((prompt, _), group) in enumerate(groups.items()):
        # the SEG id is the prompt's index among all prompts: stable across thresholds
        seg = _one_seg(str(index), prompt, group, settings, images_dir, source)
        if isinstance(seg, str):
            dropped[seg] += 1
            n_dropped_images += len(group)
            continue
        segs.append(seg)
        used.extend(group)
    levels = Counter(s.level(n) for s in segs for n in s.nodes)
    subsets = Counter(s.subset for s in segs if s.subset is not None)
    judged, pairwise, unanimous, at = _agreement(used, settings.fail_below)
    summary = BuildSummary(
        n_prompts=len({prompt for prompt, _ in groups}), n_segs=len(segs), n_images=sum(s.n_images for s in segs),
        n_images_dropped=n_dropped_images, nodes_per_level=dict(sorted(levels.items())),
        dropped_prompts=dict(dropped), segs_per_subset=dict(sorted(subsets.items())), n_judgments=judged,
        rater_pairwise_agreement=pairwise, rater_unanimous=unanimous, at_threshold=at,
        settings={"fail_below": settings.fail_below, "min_raters": settings.min_raters,
                  "subset_by": settings.subset_by, "group_by": settings.group_by})
    ds = SEGDataset(segs, name=name, root=images_dir,
                    metadata={"format": "ts2-from-labels", "label_source": source, "build": summary.to_dict()})
    return ds, summary
