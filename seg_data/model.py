"""Core data model: one semantic error graph (SEG) and an ordered dataset of SEGs.

A SEG is a prompt plus a :class:`networkx.DiGraph` whose nodes are error nodes labelled like
``0``, ``1a``, ``2`` (digits = error count, optional letters tell nodes of one level apart).

Node attributes
    ``label`` (str), ``level`` (int, the error count), ``images`` (tuple of :class:`ImageRecord`),
    ``errors`` (tuple of free-text error descriptions of this node against the prompt).
Edge attributes
    ``errors`` (tuple of free-text errors the edge adds; may be empty).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from .ids import LABEL_RE, IdentifierError, normalize_label

__all__ = ["ImageRecord", "SEG", "SEGDataset", "parse_label", "LabelError"]



class LabelError(IdentifierError):
    """A node label that is not digits (no leading zero) followed by optional lower-case letters."""


def parse_label(label: str) -> tuple[int, str]:
    """Split a node label into (error count, variant letters).

    Parameters
    ----------
    label : str
        A label such as ``"0"``, ``"1a"``, ``"12b"``.

    Returns
    -------
    (int, str)
        The level (number of errors) and the variant suffix (``""`` when absent).

    Raises
    ------
    LabelError
        If the label is not digits followed by optional lower-case ASCII letters (e.g. ``"x1"``,
        ``""``), or is ambiguous (``"01"``, ``"1A"``): the rule of :func:`seg_data.ids.normalize_label`.

    Examples
    --------
    >>> parse_label("2b")
    (2, 'b')
    >>> parse_label("0")
    (0, '')
    """
    try:
        text = normalize_label(label)
    except IdentifierError as e:
        raise LabelError(str(e)) from None
    m = LABEL_RE.fullmatch(text)
    return int(m.group(1)), m.group(2)


def label_sort_key(label: str) -> tuple[int, str, str]:
    """Stable sort key: by level, then variant, unparseable labels last.

    Cached: a dataset repeats a few labels (``0``, ``1a``, ...) over thousands of SEGs, and every
    node listing sorts by this key (parsing a label each time was a tenth of a 100k-image load).
    """
    try:
        return _cached_label_sort_key(label)
    except TypeError:  # an unhashable label: no cache, same key
        return _label_sort_key(label)


def _label_sort_key(label: str) -> tuple[int, str, str]:
    try:
        level, variant = parse_label(label)
    except LabelError:
        return (1 << 30, "", str(label))
    return (level, variant, str(label))


# typed: True and 1 are equal keys to a plain cache, but different labels (one is refused).
_cached_label_sort_key = functools.lru_cache(maxsize=1 << 14, typed=True)(_label_sort_key)


def seg_id_sort_key(seg_id: str) -> tuple[int, int, str]:
    """Stable sort key of ids (SEG ids, and the project's other string ids: question ids, the
    numbered job folders of a sweep): integer ids numerically first, then the others by name.

    >>> sorted(["10", "b", "2", "a"], key=seg_id_sort_key)
    ['2', '10', 'a', 'b']
    """
    s = str(seg_id)
    return (0, int(s), "") if s.isdigit() else (1, 0, s)


@dataclass(frozen=True)
class ImageRecord:
    """One image of a node.

    ``image_id`` is stable across loaders (for TS2: the ``file_name`` column, e.g.
    ``images/000-01.jpg``); ``path`` is where the file is on disk (``None`` when the dataset was
    loaded without images).
    """

    image_id: str
    path: Path | None = None
    source: str | None = None


@dataclass
class SEG:
    """One semantic error graph: a prompt and a DAG of error nodes holding images."""

    seg_id: str
    prompt: str
    graph: nx.DiGraph
    subset: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    # -- node helpers -------------------------------------------------------------------------
    @property
    def nodes(self) -> list[str]:
        """Node labels in a stable order (level, then variant)."""
        return sorted(self.graph.nodes, key=label_sort_key)

    def level(self, node: str) -> int:
        return int(self.graph.nodes[node]["level"])

    def images(self, node: str) -> tuple[ImageRecord, ...]:
        return tuple(self.graph.nodes[node].get("images", ()))

    def iter_images(self) -> Iterator[tuple[str, ImageRecord]]:
        """Yield ``(node, image)`` over all images, nodes in stable order."""
        for node in self.nodes:
            for img in self.images(node):
                yield node, img

    @property
    def n_images(self) -> int:
        return sum(len(self.images(n)) for n in self.graph.nodes)

    @property
    def roots(self) -> list[str]:
        return [n for n in self.nodes if self.graph.in_degree(n) == 0]

    def __repr__(self) -> str:  # keep reprs short: graphs can be large
        return (f"SEG(seg_id={self.seg_id!r}, prompt={self.prompt[:40]!r}, nodes={len(self.graph)}, "
                f"edges={self.graph.number_of_edges()}, images={self.n_images}, subset={self.subset!r})")


@dataclass
class SEGDataset:
    """An ordered collection of SEGs with a subset name per SEG and free metadata."""

    segs: list[SEG]
    name: str = "dataset"
    root: Path | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {s.seg_id: i for i, s in enumerate(self.segs)}
        if len(self._index) != len(self.segs):
            seen: set[str] = set()
            dup = next(s.seg_id for s in self.segs if s.seg_id in seen or seen.add(s.seg_id))
            raise ValueError(f"dataset {self.name!r}: expected unique SEG ids, got {dup!r} twice")

    def __len__(self) -> int:
        return len(self.segs)

    def __iter__(self) -> Iterator[SEG]:
        return iter(self.segs)

    def __getitem__(self, seg_id: str) -> SEG:
        try:
            return self.segs[self._index[str(seg_id)]]
        except KeyError as e:
            raise KeyError(f"dataset {self.name!r} has no SEG {seg_id!r}") from e

    def __contains__(self, seg_id: object) -> bool:
        return str(seg_id) in self._index

    @property
    def seg_ids(self) -> list[str]:
        return [s.seg_id for s in self.segs]

    @property
    def n_images(self) -> int:
        return sum(s.n_images for s in self.segs)

    def subsets(self) -> dict[str, list[str]]:
        """Subset name -> SEG ids, in dataset order (SEGs without a subset are left out)."""
        out: dict[str, list[str]] = {}
        for s in self.segs:
            if s.subset is not None:
                out.setdefault(s.subset, []).append(s.seg_id)
        return out

    def image_table(self):
        """One row per image: ``seg_id, node, level, file_name, image_path, prompt, subset, source``.

        ``file_name`` is the stable image id. Returns a :class:`pandas.DataFrame`.
        """
        import pandas as pd

        rows = [
            {
                "seg_id": s.seg_id,
                "node": node,
                "level": s.level(node),
                "file_name": img.image_id,
                "image_path": None if img.path is None else str(img.path),
                "prompt": s.prompt,
                "subset": s.subset,
                "source": img.source,
            }
            for s in self.segs
            for node, img in s.iter_images()
        ]
        cols = ["seg_id", "node", "level", "file_name", "image_path", "prompt", "subset", "source"]
        return pd.DataFrame(rows, columns=cols)

    # The pandas name (``ts2.load_dataset(...).to_frame()``) of the same table.
    to_frame = image_table

    def select(self, seg_ids: Sequence[str]) -> "SEGDataset":
        """A new dataset with the given SEGs, in the given order (used for sharding)."""
        return SEGDataset([self[i] for i in seg_ids], name=self.name, root=self.root, metadata=dict(self.metadata))
