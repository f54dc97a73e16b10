"""Joining a validated score table (:class:`analysis.score_table.ScoreTable`) to its SEG structure: the
dataset's or one built from the table's labels, the subsets, and the checks that name SEGs and metrics
the meta-metrics cannot use (:func:`prepare_inputs`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from seg_data import SEG, ImageRecord, SEGDataset, ts2_subset
from seg_data.graph import MAX_WALKS, build_graph
from seg_data.model import label_sort_key, seg_id_sort_key
from seg_data.ts2_release import follows_ts2_naming
from seg_data.validate import raise_on_errors, validate_dataset

from .protocols import Protocol
from .score_table import ScoreTable
from .walks import Structure, walk_count

__all__ = ["AnalysisInputs", "prepare_inputs", "degenerate_metrics", "SUBSET_SOURCES"]

log = logging.getLogger(__name__)

SUBSET_SOURCES = ("auto", "dataset", "column", "ts2", "none")


@dataclass(frozen=True)
class AnalysisInputs:
    """What the kernels need: SEG structure and the oriented score matrix, rows aligned."""

    structure: Structure
    scores: np.ndarray  # (n_rows, n_metrics), lower-is-better metrics negated
    metrics: tuple[str, ...]
    lower_is_better: frozenset[str]
    subset_source: str
    source: str = "<frame>"
    notes: tuple[str, ...] = field(default_factory=tuple)
    max_walks: int | None = MAX_WALKS  # SEGs with more walks are left out of the walk-based meta-metrics
    failures: np.ndarray | None = None  # (n_rows, n_metrics) bool: cells holding a failure code; None = none
    failure_codes: dict[str, tuple[float, ...]] = field(default_factory=dict)  # metric -> its failure codes

    def for_protocol(self, protocol: Protocol) -> "AnalysisInputs":
        """These inputs as ``protocol`` reads them: failure-code cells set missing (NaN) under
        ``failure_codes=missing``, kept as scores under ``failure_codes=score``."""
        if protocol.failure_codes == "score" or self.failures is None or not self.failures.any():
            return self
        from dataclasses import replace

        return replace(self, scores=np.where(self.failures, np.nan, self.scores))

    def failure_counts(self) -> dict[str, int]:
        """Metric -> number of cells holding one of its failure codes (metrics with none left out)."""
        if self.failures is None:
            return {}
        return {m: int(n) for m, n in zip(self.metrics, self.failures.sum(axis=0), strict=True) if n}


def _seg_order(ids: Iterable[str]) -> list[str]:
    ids = list(dict.fromkeys(ids))
    return sorted(ids, key=seg_id_sort_key)


def _subsets_from(how: str, table: ScoreTable, dataset: SEGDataset | None) -> tuple[dict[str, str | None], str]:
    """SEG id -> subset (None: none) by the source ``how`` (one of :data:`SUBSET_SOURCES`; ``auto``
    resolved by :func:`_auto_subset_source`), and the source used."""
    if how not in SUBSET_SOURCES:
        raise ValueError(f"expected subsets to be one of {list(SUBSET_SOURCES)}, got {how!r}")
    if how == "auto":
        how = _auto_subset_source(table, dataset)
    ids = dataset.seg_ids if dataset is not None else _seg_order(table.frame["seg_id"])
    return _SUBSETS_BY_SOURCE[how](table, dataset, ids), how


def _auto_subset_source(table: ScoreTable, dataset: SEGDataset | None) -> str:
    """The dataset's subsets, else a ``subset`` column, else TS2 id ranges when the file names follow
    the TS2 release, else none."""
    frame = table.frame
    if dataset is not None and any(s.subset is not None for s in dataset):
        return "dataset"
    if "subset" in frame.columns:
        return "column"
    if "file_name" in frame.columns and follows_ts2_naming(frame["seg_id"], frame["file_name"]):
        log.info("%s: file names follow the TS2 release (images/NNN-MM.jpg): using the TS2 subsets "
                 "Synth 0-110, Nat 111-135, Real 136-164 (subsets=none turns this off)", table.source)
        return "ts2"
    return "none"


def _subsets_of_dataset(table: ScoreTable, dataset: SEGDataset | None, ids: list[str]) -> dict[str, str | None]:
    if dataset is None:
        raise ValueError("subsets=dataset needs a dataset (dataset=... or path=...), got none")
    return {s.seg_id: s.subset for s in dataset}


def _subsets_of_column(table: ScoreTable, dataset: SEGDataset | None, ids: list[str]) -> dict[str, str | None]:
    """Each SEG's one value in the table's ``subset`` column (an empty one: none)."""
    frame = table.frame
    if "subset" not in frame.columns:
        raise ValueError(f"{table.source}: subsets=column expects a 'subset' column, got {list(frame.columns)}")
    per = frame.groupby("seg_id")["subset"].agg(lambda s: sorted(set(s.dropna())))
    out: dict[str, str | None] = {}
    for sid, vals in per.items():
        if len(vals) > 1:
            raise ValueError(f"{table.source}: SEG {sid}: expected one subset per SEG, got {vals}")
        out[str(sid)] = vals[0] if vals and vals[0] != "" else None
    return {i: out.get(i) for i in ids}


def _subsets_of_ts2(table: ScoreTable, dataset: SEGDataset | None, ids: list[str]) -> dict[str, str | None]:
    return {i: ts2_subset(i) for i in ids}


def _no_subsets(table: ScoreTable, dataset: SEGDataset | None, ids: list[str]) -> dict[str, str | None]:
    return {i: None for i in ids}


# Where each subset source (but "auto", resolved first) finds the subsets.
_SUBSETS_BY_SOURCE = {"dataset": _subsets_of_dataset, "column": _subsets_of_column, "ts2": _subsets_of_ts2,
                      "none": _no_subsets}


def _dataset_from_table(table: ScoreTable) -> SEGDataset:
    """SEGs from the labels alone (TS2 convention edges), one image record per table row."""
    frame = table.frame
    file_ids = (frame["file_name"].astype(str).tolist() if table.has_file_name
                else [f"row:{i}" for i in range(len(frame))])
    nodes_col = frame["node"].astype(str).tolist()
    segs = []
    groups = frame.groupby("seg_id", sort=False).indices
    for sid in _seg_order(frame["seg_id"]):
        nodes: dict[str, list[ImageRecord]] = {}
        for i in groups[sid]:
            nodes.setdefault(nodes_col[i], []).append(ImageRecord(image_id=file_ids[i]))
        nodes = dict(sorted(nodes.items(), key=lambda kv: label_sort_key(kv[0])))
        segs.append(SEG(seg_id=str(sid), prompt=f"(SEG {sid})", graph=build_graph(nodes)))
    ds = SEGDataset(segs, name=Path(table.source).stem or "scores", metadata={"source": table.source})
    problems = [p for p in validate_dataset(ds) if p.code not in {"empty_prompt", "empty_node"}]
    raise_on_errors(problems, source=table.source)
    return ds


def prepare_inputs(table: ScoreTable, dataset: SEGDataset | None = None, subsets: str = "auto",
                   max_walks: int | None = MAX_WALKS) -> AnalysisInputs:
    """Join a score table to its SEG structure.

    With ``dataset``, rows join on ``file_name`` = the dataset's image ids: the dataset decides
    nodes, levels and edges; table rows of unknown images are dropped with a warning, dataset
    images without a score are missing (NaN). Without one, SEGs come from the table's labels
    (TS2 convention edges).

    ``max_walks``: SEGs with more walks (under either walk construction, counted without
    enumerating) are named in the notes and left out of the walk-based meta-metrics.

    ``subsets``: ``auto`` (the dataset's, else a ``subset`` column, else TS2 id ranges when the
    file names follow the TS2 release, else none), ``dataset``, ``column``, ``ts2`` or ``none``.

    Raises
    ------
    ValueError
        No ``file_name`` to join on, no row matching the dataset, a SEG with two subsets.
    """
    join = _RowJoin.by_labels(table) if dataset is None else _RowJoin.to_dataset(table, dataset)
    notes = list(join.notes)
    x, fail = join.rows(table.oriented()), join.rows(table.failure_mask())
    subset_of, how = _subsets_from(subsets, table, join.dataset)
    structure = Structure.from_dataset(join.dataset, join.row_of, n_rows=len(x), subset_of=subset_of)
    for msg in _over_max_walks(structure, max_walks) + degenerate_metrics(x, structure, table.metrics):
        log.warning(msg)
        notes.append(msg)
    return AnalysisInputs(structure, x, table.metrics, table.lower_is_better, how, table.source,
                          tuple(table.notes) + tuple(notes), max_walks, fail if fail.any() else None,
                          dict(table.failure_codes))


@dataclass(frozen=True)
class _RowJoin:
    """Which score-table row holds each image of the SEGs analysed.

    ``row_of`` maps an image id of ``dataset`` to its row among the ``kept`` table rows (all of them
    when ``kept`` is None); ``notes`` say what the join left out or overrode (also logged).
    """

    dataset: SEGDataset
    row_of: dict[str, int]
    kept: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    def rows(self, values: np.ndarray) -> np.ndarray:
        """The rows of a per-table-row array that the join keeps, in order."""
        return values if self.kept is None else values[self.kept]

    @classmethod
    def by_labels(cls, table: ScoreTable) -> _RowJoin:
        """SEGs built from the table's own labels (:func:`_dataset_from_table`), every row kept."""
        frame = table.frame
        keys = frame["file_name"] if table.has_file_name else pd.Series([f"row:{i}" for i in range(len(frame))])
        return cls(_dataset_from_table(table), {str(k): i for i, k in enumerate(keys)})

    @classmethod
    def to_dataset(cls, table: ScoreTable, ds: SEGDataset) -> _RowJoin:
        """Rows joined on ``file_name`` = the dataset's image ids: rows of other images dropped (warned),
        the dataset's seg_id/node used where the table's differ (warned), unscored images counted."""
        frame = table.frame
        if not table.has_file_name:
            raise ValueError(f"{table.source}: joining to dataset {ds.name!r} needs a 'file_name' column "
                             "holding the dataset's image ids, got none")
        notes: list[str] = []
        known = {im.image_id: (s.seg_id, n) for s in ds for n, im in s.iter_images()}
        # An index of the ids looks the names up 7x faster than isin (which hashes the ids again
        # for its own table of them, per call).
        in_ds = pd.Index(list(known)).get_indexer(frame["file_name"]) >= 0
        if not in_ds.any():
            raise ValueError(f"{table.source}: no file_name matches an image id of dataset {ds.name!r}; expected ids like "
                             f"{next(iter(known), '?')!r}, got e.g. {frame['file_name'].iat[0]!r}")
        if not in_ds.all():
            n_out = int((~in_ds).sum())
            msg = (f"{n_out} row(s) of {table.source} name images that are not in dataset {ds.name!r} and are ignored, "
                   f"e.g. {frame['file_name'][~in_ds].iat[0]!r}")
            log.warning(msg)
            notes.append(msg)
        kept = np.flatnonzero(in_ds)
        sub = frame.iloc[kept]
        # Lists, not the Series: iterating a string Series boxes every cell (seconds at 100k rows).
        file_names = sub["file_name"].tolist()
        row_of = {fn: i for i, fn in enumerate(file_names)}
        where = [known[fn] for fn in file_names]
        disagree = int(sum((sid != str(s) or node != str(n)) for (sid, node), s, n
                           in zip(where, sub["seg_id"].tolist(), sub["node"].tolist(), strict=True)))
        if disagree:
            msg = f"{disagree} row(s) of {table.source} give a seg_id/node that differs from dataset {ds.name!r}; the dataset's are used"
            log.warning(msg)
            notes.append(msg)
        unscored = len(known) - len(row_of)
        if unscored:
            msg = f"{unscored} image(s) of dataset {ds.name!r} have no row in {table.source} (treated as missing scores)"
            log.info(msg)
            notes.append(msg)
        return cls(ds, row_of, kept, tuple(notes))


def _over_max_walks(structure: Structure, max_walks: int | None) -> list[str]:
    """One message per SEG with more than ``max_walks`` walks under either walk construction (counted
    without enumerating them); none when ``max_walks`` is None."""
    if max_walks is None:
        return []
    out = []
    for s in structure.segs:
        counts = {w: walk_count(s, w, False) for w in ("levels", "dag")}
        if max(counts.values()) > max_walks:
            out.append(f"SEG {s.seg_id}: {counts['levels']} walks over the present levels, {counts['dag']} over its "
                       f"graph; over max_walks={max_walks}, so a protocol enumerating that many leaves it out (NaN)")
    return out


def degenerate_metrics(scores: np.ndarray, structure: Structure, metrics: Sequence[str]) -> list[str]:
    """One message per metric that cannot order images: every score the same (a constant), or no
    score on any level-0 (error-free) image, so no walk starts where it should.

    Parameters
    ----------
    scores : ndarray, shape (n_rows, n_metrics)
        The analysed scores (NaN = missing).
    structure : Structure
        Which rows are which SEG's nodes, and their levels.
    metrics : sequence of str
        Column names of ``scores``.
    """
    rows = [r for s in structure.segs for r in s.rows]
    used = np.unique(np.concatenate(rows)) if rows else np.zeros(0, dtype=int)
    top = [r for s in structure.segs for r, lv in zip(s.rows, s.levels, strict=True) if lv == 0]
    top = np.unique(np.concatenate(top)) if top else np.zeros(0, dtype=int)
    out = []
    for j, m in enumerate(metrics):
        v = scores[used, j]
        v = v[~np.isnan(v)]
        if len(v) >= 2 and np.all(v == v[0]):
            out.append(f"metric {m!r}: every one of its {len(v)} scores is {float(v[0]):g} (a constant): it cannot "
                       "order images, so its meta-metrics are ties or undefined")
        elif len(v) and len(top) and np.isnan(scores[top, j]).all():
            out.append(f"metric {m!r}: none of the {len(top)} level-0 (error-free) images has a score: every walk "
                       "lacks its error-free end, so its meta-metrics compare erroneous images only")
    return out
