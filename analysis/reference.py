"""Analysing a score table beside a reference one (TS2's released scores): naming the reference metrics
beside the user's columns, recognising copies of them, joining on ``file_name``, and marking
lower-is-better metrics in both."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .score_table import ScoreTable

__all__ = ["REFERENCE_SUFFIX", "reference_names", "identical_to_reference", "with_reference",
           "apply_lower_is_better"]

log = logging.getLogger(__name__)

REFERENCE_SUFFIX = "_reference"  # a reference metric whose name a column of the user's table has: clipscore_reference


def reference_names(mine: Sequence[str], reference: Sequence[str]) -> dict[str, str]:
    """The name each reference metric is analysed under beside the columns ``mine``.

    A reference metric keeps its name unless ``mine`` already has it; then it becomes
    ``<name>_reference`` (``_reference2``, ... when that is taken too), so a user's own column
    named like a published metric (their re-implementation of ``clipscore``) never replaces it.

    Examples
    --------
    >>> reference_names(["clipscore", "mine"], ["clipscore", "tifa"])
    {'clipscore': 'clipscore_reference', 'tifa': 'tifa'}
    """
    taken = set(mine) | {m for m in reference if m not in mine}
    out = {}
    for m in reference:
        new, k = m, 2
        if m in mine:
            new = m + REFERENCE_SUFFIX
            while new in taken:
                new, k = f"{m}{REFERENCE_SUFFIX}{k}", k + 1
            taken.add(new)
        out[m] = new
    return out


def apply_lower_is_better(names: Iterable[str], table: ScoreTable,
                          reference: ScoreTable | None = None) -> tuple[ScoreTable, ScoreTable | None]:
    """Mark ``names`` lower-is-better in every table that has a metric of that name.

    ``ts2 analyze lower_is_better=[...]`` names metrics of the user's score table, of the
    reference table added beside it (:func:`with_reference`), or of both: each column that has
    the name gets it (a reference column renamed ``<name>_reference`` beside the user's keeps it
    through :func:`with_reference`).

    Parameters
    ----------
    names : iterable of str
        Metric names.
    table : ScoreTable
        The user's table.
    reference : ScoreTable, optional
        The reference table, before it is joined.

    Returns
    -------
    (ScoreTable, ScoreTable or None)
        Both tables, marked.

    Raises
    ------
    ValueError
        A name that no table has.

    Examples
    --------
    >>> import pandas as pd
    >>> from analysis.scores_io import read_scores
    >>> a = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["x", "y"], "m": [1, 0]}))
    >>> b = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["x", "y"], "r": [1, 0]}))
    >>> [sorted(t.lower_is_better) for t in apply_lower_is_better(["r"], a, b)]
    [[], ['r']]
    """
    from dataclasses import replace

    names = [str(n) for n in names]
    tables = [t for t in (table, reference) if t is not None]
    unknown = [n for n in names if not any(n in t.metrics for t in tables)]
    if unknown:
        among = " or ".join(f"{list(t.metrics)} ({t.source})" for t in tables)
        raise ValueError(f"lower_is_better names {unknown}: expected metrics among {among}")
    marked = [replace(t, lower_is_better=t.lower_is_better | {n for n in names if n in t.metrics}) for t in tables]
    return marked[0], (marked[1] if reference is not None else None)


def identical_to_reference(table: ScoreTable, reference: ScoreTable) -> list[str]:
    """The columns of ``table`` that are the reference metric of the same name: on every image of
    ``table`` both are missing or equal (to 1e-9, what a CSV round trip keeps), with at least one
    score. A released score file with a column added is such a table: its copies of the
    references are recognised, not analysed twice.

    Examples
    --------
    >>> import pandas as pd
    >>> from analysis.scores_io import read_scores
    >>> a = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["x", "y"],
    ...                               "clip": [0.5, 0.25], "mine": [1, 0]}))
    >>> b = read_scores(pd.DataFrame({"seg_id": ["0", "0"], "node": ["0", "1"], "file_name": ["y", "x"],
    ...                               "clip": [0.25, 0.5]}))
    >>> identical_to_reference(a, b)
    ['clip']
    """
    if not (table.has_file_name and reference.has_file_name):
        return []
    ref = reference.frame.drop_duplicates("file_name").set_index("file_name")
    out = []
    for m in reference.metrics:
        if m not in table.metrics:
            continue
        mine = table.frame[m].to_numpy(dtype=float)
        theirs = table.frame["file_name"].map(ref[m]).to_numpy(dtype=float)
        both = ~np.isnan(mine) & ~np.isnan(theirs)
        if both.any() and np.array_equal(np.isnan(mine), np.isnan(theirs)) and \
                np.allclose(mine[both], theirs[both], rtol=1e-9, atol=1e-9):
            out.append(m)
    return out


def with_reference(table: ScoreTable, reference: ScoreTable) -> ScoreTable:
    """``table`` plus the metric columns of ``reference`` (e.g. TS2's released scores), joined on
    ``file_name``, so a new metric is analysed beside the published ones on the same images.

    A reference metric whose name ``table`` already has is kept beside the user's column as
    ``<name>_reference`` (:func:`reference_names`), with a logged warning naming both and a note
    in the table's notes, unless the two are identical (:func:`identical_to_reference`): then it
    is analysed once, and a note says so; images of ``table`` missing from ``reference`` get NaN reference scores
    (dropped per protocol, like any NaN).

    Raises
    ------
    ValueError
        Either table has no ``file_name`` column, or no image is in both (the message shows one
        ``file_name`` of each).
    """
    for t in (table, reference):
        if not t.has_file_name:
            raise ValueError(f"{t.source}: expected a 'file_name' column to join the reference scores on, got none")
    same = identical_to_reference(table, reference)
    notes = [f"{table.source}: column(s) {same} are identical to the reference metrics of that name in "
             f"{reference.source}: each analysed once, as the reference"] if same else []
    reference = replace(reference, metrics=tuple(m for m in reference.metrics if m not in same))
    beside = _ReferenceColumns(reference, reference_names(
        tuple(table.metrics) + tuple(c for c in table.frame.columns if c not in table.metrics), reference.metrics))
    for msg in beside.collisions(table.source):
        log.warning(msg)
        notes.append(msg)
    extra = list(beside.names.values())
    joined = table.frame.join(beside.frame(), on="file_name")
    if extra and joined[extra].notna().to_numpy().sum() == 0:
        # One name from each side shows the usual cause at a glance: a folder prefix on one side only
        # ('000-00.jpg' vs 'images/000-00.jpg').
        raise ValueError(f"expected images of {table.source} in the reference {reference.source} (joined on "
                         f"file_name), found none in common: e.g. {table.frame['file_name'].iloc[0]!r} in yours, "
                         f"{reference.frame['file_name'].iloc[0]!r} in the reference")
    return ScoreTable(joined, tuple(table.metrics) + tuple(extra),
                      frozenset(table.lower_is_better) | beside.lower_is_better(),
                      table.source, tuple(table.notes) + tuple(reference.notes) + tuple(notes),
                      dict(table.failure_codes) | beside.failure_codes())


@dataclass(frozen=True)
class _ReferenceColumns:
    """The metrics of a reference table as they are analysed beside a user's table: each under the name
    :func:`reference_names` gave it, with its direction and failure codes."""

    reference: ScoreTable
    names: dict[str, str]  # reference metric -> the name it is analysed under

    def collisions(self, source: str) -> list[str]:
        """One message per reference metric renamed because the user's table (``source``) has its name."""
        return [f"{source} has a column {m!r} named like the reference metric {m!r} of {self.reference.source}: "
                f"yours is analysed as {m!r}, the reference one beside it as {new!r}"
                for m, new in self.names.items() if new != m]

    def frame(self) -> pd.DataFrame:
        """The reference scores indexed by ``file_name``, under their analysed names."""
        return self.reference.frame.set_index("file_name")[list(self.names)].rename(columns=self.names)

    def lower_is_better(self) -> frozenset[str]:
        return frozenset(self.names[m] for m in self.reference.lower_is_better if m in self.names)

    def failure_codes(self) -> dict[str, tuple[float, ...]]:
        return {self.names[m]: c for m, c in self.reference.failure_codes.items() if m in self.names}
