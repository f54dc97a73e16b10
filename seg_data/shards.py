"""Deterministic data-parallel split of a dataset's images: ``shard=i/n``.

Image ``x`` belongs to shard ``h(x) mod n`` where ``h`` is the first 8 bytes of the BLAKE2b digest
of the image id (``file_name``, UTF-8) read as a big-endian unsigned integer. Because the shard
depends only on the id, the split is

* disjoint and complete: every id lands in exactly one of the ``n`` shards;
* stable: reordering, filtering or appending rows of the dataset never moves an image to another
  shard, so ``n`` jobs (GPUs, SLURM array tasks) can score their parts into the shared cache and a
  restarted job sees the same images;
* independent of ``PYTHONHASHSEED`` (Python's ``hash`` of ``str`` is salted per process, which
  would give every job a different split).

Shard sizes are balanced only in expectation (a binomial draw per shard); a shard may be empty
when ``n`` is close to the number of images. ``ts2 report`` concatenates the shard outputs of one
run again (see :mod:`analysis.report.result_dirs`).

The index ``i`` is 0-based (``0/4`` ... ``3/4``), matching ``SLURM_ARRAY_TASK_ID`` for
``--array=0-3`` and Hydra's sweep syntax ``shard=0/4,1/4,2/4,3/4``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Shard", "parse_shard", "shard_index", "shard_indices", "shard_mask", "split_ids"]

_SPEC_RE = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")


def shard_index(image_id: str, n: int) -> int:
    """The shard (``0 <= k < n``) that ``image_id`` belongs to.

    Parameters
    ----------
    image_id : str
        The stable image id (``file_name`` column of ``scores.csv`` / the dataset's image table).
    n : int
        Number of shards, ``n >= 1``.

    Returns
    -------
    int
        ``int.from_bytes(blake2b(image_id.encode("utf-8"), digest_size=8).digest(), "big") % n``.

    Raises
    ------
    ValueError
        If ``n < 1``.
    TypeError
        If ``image_id`` is not a ``str`` (a float NaN from a broken CSV row must not silently
        land in some shard).

    Examples
    --------
    >>> shard_index("images/000-01.jpg", 1)
    0
    >>> shard_index("images/000-01.jpg", 4) == shard_index("images/000-01.jpg", 4)
    True
    """
    _check_n(n)
    if not isinstance(image_id, str):
        raise TypeError(f"expected an image id of type str, got {image_id!r} ({type(image_id).__name__})")
    digest = hashlib.blake2b(image_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


def shard_indices(image_ids: Iterable[str], n: int) -> np.ndarray:
    """:func:`shard_index` of every id, as an ``int64`` array in input order."""
    _check_n(n)
    return np.fromiter((shard_index(x, n) for x in image_ids), dtype=np.int64)


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based). ``str(Shard(1, 4)) == "1/4"``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or isinstance(self.count, bool) \
                or not isinstance(self.index, (int, np.integer)) or not isinstance(self.count, (int, np.integer)):
            raise TypeError(f"expected integer shard index and count, got {self.index!r}/{self.count!r}")
        if self.count < 1:
            raise ValueError(f"expected a shard count n >= 1 in shard=i/n, got n={self.count}")
        if not 0 <= self.index < self.count:
            raise ValueError(f"expected a 0-based shard index 0 <= i < n in shard=i/n, got {self.index}/{self.count}"
                             f" (valid: 0/{self.count} ... {self.count - 1}/{self.count})")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def contains(self, image_id: str) -> bool:
        """Whether ``image_id`` belongs to this shard."""
        return shard_index(image_id, self.count) == self.index

    def mask(self, image_ids: Iterable[str]) -> np.ndarray:
        """Boolean mask over ``image_ids`` (input order) of the ids in this shard."""
        return shard_indices(image_ids, self.count) == self.index

    def select(self, image_ids: Iterable[str]) -> list[str]:
        """The ids of this shard, in input order."""
        ids = list(image_ids)
        return [x for x, keep in zip(ids, self.mask(ids), strict=True) if keep]


def parse_shard(spec: object) -> Shard | None:
    """Parse a ``shard=`` setting.

    Parameters
    ----------
    spec : str, Shard, (int, int) or None
        ``"i/n"`` (0-based ``i``, e.g. ``"0/4"``), a :class:`Shard`, a pair ``(i, n)``, or
        ``None`` / ``""`` / ``"none"`` for no sharding. ``"0/1"`` is the whole dataset.

    Returns
    -------
    Shard or None

    Raises
    ------
    ValueError
        Text that is not ``i/n``, ``n < 1`` or ``i`` outside ``0 .. n-1``; the message shows the
        value received and the valid range.
    TypeError
        Any other type (e.g. the bare integer that ``shard=3`` gives on the Hydra command line).

    Examples
    --------
    >>> parse_shard("1/4")
    Shard(index=1, count=4)
    >>> parse_shard(None) is None
    True
    """
    if spec is None or isinstance(spec, Shard):
        return spec
    if isinstance(spec, str):
        if spec.strip().lower() in {"", "none", "null"}:
            return None
        m = _SPEC_RE.match(spec)
        if m is None:
            raise ValueError(f"expected shard=i/n with integers, e.g. shard=0/4 (0-based index), got {spec!r}")
        return Shard(int(m.group(1)), int(m.group(2)))
    if isinstance(spec, Sequence) and len(spec) == 2 and not isinstance(spec, (bytes, bytearray)):
        return Shard(spec[0], spec[1])
    raise TypeError(f"expected shard as the text 'i/n' (e.g. shard=0/4), a Shard or an (i, n) pair, "
                    f"got {spec!r} ({type(spec).__name__})")


def shard_mask(image_ids: Iterable[str], spec: object) -> np.ndarray:
    """Boolean mask of the ids in shard ``spec`` (anything :func:`parse_shard` takes).

    ``spec=None`` (no sharding) selects every id. This is what the scoring engine calls on the
    dataset's image table: ``table[shard_mask(table["file_name"], cfg.shard)]``.
    """
    ids = list(image_ids)
    shard = parse_shard(spec)
    if shard is None:
        return np.ones(len(ids), dtype=bool)
    return shard.mask(ids)


def split_ids(image_ids: Iterable[str], n: int) -> list[list[str]]:
    """All ``n`` shards of ``image_ids`` at once (each in input order); their union is the input.

    Examples
    --------
    >>> parts = split_ids(["a", "b", "c", "d"], 2)
    >>> sorted(parts[0] + parts[1])
    ['a', 'b', 'c', 'd']
    """
    ids = list(image_ids)
    idx = shard_indices(ids, n)
    out: list[list[str]] = [[] for _ in range(n)]
    for x, k in zip(ids, idx, strict=True):
        out[k].append(x)
    return out


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"expected a shard count n >= 1 (an integer), got {n!r}")
