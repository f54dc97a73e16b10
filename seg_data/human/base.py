"""The human-judgment record (:class:`HumanJudgments`) and the two formats of ts2's own: TIFA v1.0 JSON, our CSV.

These feed the *human view* of a metric (its correlation with people's ratings) that sits beside
the SEG view (how well it orders images along semantic error graphs). The other families of sets
(TIFA160 per rater, SeeTRUE, GenAI-Bench, ...) have one module each in this package, all returning
the same :class:`HumanJudgments` (registry: :mod:`seg_data.human.registry`).

Two file formats are read here, both into one :class:`HumanJudgments`:

TIFA v1.0 JSON (``.json``)
    The file released with TIFA (Hu et al., 2023), ``tifa_v1_human_annotations_with_scores.json``:
    one JSON object mapping an image key to a record::

        {"coco_669925_mini_dalle": {
            "text_id": "coco_669925",            # prompt id (the grouping for within-prompt stats)
            "image_path": "coco_669925_mini_dalle.jpg",
            "text": "A Christmas tree with lights and teddy bear",
            "human_scores": [5, 5],              # one rating per annotation slot, 1-5 Likert
            "human_avg": 5.0,                    # optional; checked against mean(human_scores)
            "bleu": 5.6e-05, "tifa_vilt": 1.0, ...},   # metric scores: every other numeric key
         ...}

    Required keys: ``text_id``, ``text``, ``human_scores``. ``image_path`` is optional. Every
    other key whose value is a number (or ``null``) is a metric column; a metric absent from a
    record, or ``null``, is NaN for that image. Non-numeric extra keys (strings, lists) are
    ignored. The release does not say which person gave which rating, so the raters are the
    annotation *slots* ``r0``, ``r1``, ... (the i-th rating of every image); Krippendorff's alpha
    on slots is what can be computed from the release.

Our CSV (``.csv``), long format, one row per rating::

    item_id,prompt,image,rater,rating,clipscore,tifa
    img-001,a red cube on a blue sphere,img-001.png,alice,4,0.31,0.75
    img-001,a red cube on a blue sphere,img-001.png,bob,5,0.31,0.75

    Required columns: ``item_id``, ``prompt``, ``rater``, ``rating``. Optional: ``image`` (a
    path or id, may be empty) and ``prompt_id`` (the group id; defaults to the prompt text).
    Every other column is a metric column: numbers, an empty cell or ``nan`` meaning "no score".
    An item's prompt, prompt_id, image and metric values repeat on each of its rows and must be
    equal on all of them. A rater rates an item at most once; raters who did not rate an item
    simply have no row for it.

The result holds one row per item in file order: ``items`` (``prompt_id``, ``prompt``, ``image``,
``human`` = the mean of the item's ratings, ``n_ratings``, then the metric columns) and
``ratings`` (items x raters, NaN where a rater did not rate the item).

This module imports neither torch nor any other package of the project.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

__all__ = [
    "HumanJudgments", "load_tifa_json", "load_human_csv", "human_from_frame", "save_human_csv",
    "TIFA_METRIC_LABELS", "TIFA_REQUIRED_KEYS", "CSV_REQUIRED_COLUMNS", "make_synthetic_human", "KINDS", "slot_ratings",
]

log = logging.getLogger(__name__)

TIFA_REQUIRED_KEYS = ("text_id", "text", "human_scores")
_TIFA_RESERVED = frozenset({"text_id", "text", "human_scores", "human_avg", "image_path"})
CSV_REQUIRED_COLUMNS = ("item_id", "prompt", "rater", "rating")
_CSV_RESERVED = frozenset({"item_id", "prompt", "prompt_id", "image", "rater", "rating"})

# Display names and the row order of TIFA's Table 2 (paper: ../shared/papers/tifa.txt, 5.1).
TIFA_METRIC_LABELS: Mapping[str, str] = MappingProxyType({
    "bleu": "BLEU-4",
    "rouge": "ROUGE-L",
    "meteor": "METEOR",
    "spice": "SPICE",
    "clipscore_vitb32": "CLIPScore",
    "tifa_vilt": "TIFA (ViLT)",
    "tifa_ofa-large": "TIFA (OFA)",
    "tifa_git-large": "TIFA (GIT)",
    "tifa_blip2-flant5xl": "TIFA (BLIP-2)",
    "tifa_mplug-large": "TIFA (mPLUG)",
})

_ITEM_BASE_COLUMNS = ("prompt_id", "prompt", "image", "human", "n_ratings")

#: What a set's human judgment is, which decides the statistics that apply to it
#: (:data:`analysis.human.sets.KIND_STATISTICS`): ``likert`` ratings (a mean over raters, pooled and
#: within prompts), ``binary`` labels (0/1, ROC AUC) and ``ranked`` images (a rank within their
#: prompt only: statistics within prompts).
KINDS = ("likert", "binary", "ranked")


@dataclass(frozen=True)
class HumanJudgments:
    """A human-judgment set: items (images) x raters ratings, prompt groups, metric scores.

    Attributes
    ----------
    items : pandas.DataFrame
        Index ``item_id`` (unique, file order). Columns ``prompt_id``, ``prompt``, ``image``
        (may be empty), ``human`` (mean of the item's ratings), ``n_ratings``, then one float
        column per metric (NaN = no score).
    ratings : pandas.DataFrame
        Same index as ``items``; one float column per rater (NaN = not rated).
    metrics : tuple of str
        The metric columns of ``items``, in file order.
    source : str
        Where the set was read from.
    metric_labels : mapping
        Display names of metrics (e.g. ``bleu`` -> ``BLEU-4``); metrics without one display as
        their column name.
    kind : {"likert", "binary", "ranked"}
        What ``human`` is (:data:`KINDS`). For ``ranked`` sets ``human`` and the ratings are
        negated ranks (higher = better, comparable only within a prompt); for ``binary`` sets
        ``human`` is a 0/1 label.
    categories : pandas.DataFrame, optional
        Same index as ``items``; one boolean column per subset an item belongs to, named
        ``facet=value`` (``skill=counting``, ``dataset_source=editbench``); an item may belong to
        several (GenAI-Bench skills). Empty (no columns) when the set has none.
    name : str
        The set's short name in tables (default: the file name).

    Raises
    ------
    ValueError
        If ``items`` and ``ratings`` do not line up, a base column is missing, item ids repeat,
        an item has no rating, a metric named in ``metrics`` is not a column, ``kind`` is unknown,
        a binary set's ``human`` is not 0/1, or ``categories`` is not a boolean table like ``items``.
    """

    items: pd.DataFrame
    ratings: pd.DataFrame
    metrics: tuple[str, ...]
    source: str = "<memory>"
    metric_labels: Mapping[str, str] = field(default_factory=dict)
    kind: str = "likert"
    categories: pd.DataFrame | None = None
    name: str = ""

    def __post_init__(self) -> None:
        missing = [c for c in _ITEM_BASE_COLUMNS if c not in self.items.columns]
        if missing:
            raise ValueError(f"{self.source}: expected item columns {list(_ITEM_BASE_COLUMNS)}, missing {missing}")
        if not self.items.index.is_unique:
            dup = self.items.index[self.items.index.duplicated()][0]
            raise ValueError(f"{self.source}: expected unique item ids, got {dup!r} more than once")
        if not self.items.index.equals(self.ratings.index):
            raise ValueError(f"{self.source}: expected ratings indexed like items (same ids, same order)")
        absent = [m for m in self.metrics if m not in self.items.columns]
        if absent:
            raise ValueError(f"{self.source}: metrics {absent} are not columns of items {list(self.items.columns)}")
        empty = self.ratings.notna().sum(axis=1) == 0
        if empty.any():
            raise ValueError(f"{self.source}: expected at least one rating per item, item "
                             f"{self.ratings.index[empty.to_numpy()][0]!r} has none")
        self._check_kind_and_categories()

    def _check_kind_and_categories(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.source}: expected kind in {list(KINDS)}, got {self.kind!r}")
        if self.kind == "binary":
            h = self.items["human"].to_numpy(dtype=float)
            bad = ~np.isin(h, (0.0, 1.0))
            if bad.any():
                raise ValueError(f"{self.source}: expected 0/1 labels in a binary set, item "
                                 f"{self.items.index[bad][0]!r} has {h[bad][0]!r}")
        cats = self.categories
        if cats is None:
            object.__setattr__(self, "categories", pd.DataFrame(index=self.items.index))
        elif not cats.index.equals(self.items.index):
            raise ValueError(f"{self.source}: expected categories indexed like items (same ids, same order)")
        elif any(not pd.api.types.is_bool_dtype(cats[c]) for c in cats.columns):
            raise ValueError(f"{self.source}: expected boolean category columns, got dtypes {dict(cats.dtypes)}")
        if not self.name:
            object.__setattr__(self, "name", Path(str(self.source)).stem or "human")

    # -- views ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.items)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_prompts(self) -> int:
        return int(self.items["prompt_id"].nunique())

    @property
    def raters(self) -> tuple[str, ...]:
        return tuple(str(r) for r in self.ratings.columns)

    @property
    def human(self) -> np.ndarray:
        """Per-item mean rating (float array, file order)."""
        return self.items["human"].to_numpy(dtype=float)

    @property
    def groups(self) -> np.ndarray:
        """Per-item prompt id (object array), the grouping for within-prompt statistics."""
        return self.items["prompt_id"].to_numpy(dtype=object)

    def scores(self, metric: str) -> np.ndarray:
        """One metric's per-item scores (float array, NaN = no score).

        Raises
        ------
        KeyError
            Unknown metric; the message lists the valid ones.
        """
        if metric not in self.metrics:
            raise KeyError(f"{self.source}: unknown metric {metric!r}; expected one of {list(self.metrics)}")
        return self.items[metric].to_numpy(dtype=float)

    def score_table(self, metrics: Iterable[str] | None = None) -> pd.DataFrame:
        """Items x metrics score table (for metric-metric correlation matrices)."""
        ms = list(self.metrics if metrics is None else metrics)
        for m in ms:
            self.scores(m)  # raises with the list of valid names
        return self.items[ms].astype(float)

    def reliability_data(self) -> np.ndarray:
        """Raters x items float array (NaN = missing), the layout ``krippendorff.alpha`` takes."""
        return self.ratings.to_numpy(dtype=float).T

    def label(self, metric: str) -> str:
        return self.metric_labels.get(metric, metric)

    def select(self, metrics: Iterable[str]) -> HumanJudgments:
        """A copy keeping only ``metrics`` (in the given order).

        Raises
        ------
        KeyError
            A name that is not a metric of this set; the message lists the valid ones.
        """
        ms = tuple(metrics)
        for m in ms:
            self.scores(m)
        base = [c for c in self.items.columns if c not in self.metrics]
        return replace(self, items=self.items[base + list(ms)].copy(), ratings=self.ratings.copy(), metrics=ms,
                       metric_labels=dict(self.metric_labels), categories=self.categories.copy())

    def subsets(self) -> dict[str, np.ndarray]:
        """Category name (``facet=value``) -> boolean item mask, in column order (empty without categories)."""
        return {str(c): self.categories[c].to_numpy(dtype=bool) for c in self.categories.columns}


# -- loaders ----------------------------------------------------------------------------------
def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def load_tifa_json(path: str | Path) -> HumanJudgments:
    """Load the TIFA v1.0 human-annotation JSON (format in the module docstring).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        Not JSON, not an object of records, a record missing a required key, ratings that are
        not a non-empty list of finite numbers, ``human_avg`` different from the mean of
        ``human_scores``, or a metric value that is not a number (message names the record).
    """
    p = Path(path)
    data = _read_tifa_records(p)
    metric_cols: dict[str, None] = {}  # ordered set, first-seen order
    rows: list[dict] = []
    ratings: list[list[float]] = []
    for key, rec in data.items():
        row, hs = _tifa_row(f"{p}, record {key!r}", key, rec, metric_cols)
        rows.append(row)
        ratings.append([float(x) for x in hs])
    _check_tifa_metric_types(p, data, metric_cols)
    items, rating_df, metrics = _tifa_frames(rows, ratings, metric_cols)
    labels = {m: TIFA_METRIC_LABELS[m] for m in metrics if m in TIFA_METRIC_LABELS}
    log.debug("loaded %d TIFA records, %d metrics from %s", len(items), len(metrics), p)
    return HumanJudgments(items, rating_df, metrics, str(p), labels)


def read_json(p: Path, what: str):
    """A human-judgment set's JSON file, parsed: one message per failure, naming the file.

    Raises
    ------
    FileNotFoundError
        No file at ``p`` (``what``: the set's file as its card names it, e.g. "GenAI-Bench's genai_image.json").
    ValueError
        Not UTF-8 or not JSON.
    """
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: could not parse as JSON: {e}") from e
    except FileNotFoundError as e:
        raise FileNotFoundError(f"expected {what} at {p}, found none") from e


def _read_tifa_records(p: Path) -> dict:
    """The file's top-level object of records, after the file/JSON/shape checks of :func:`load_tifa_json`."""
    if not p.is_file():
        raise FileNotFoundError(f"expected a TIFA v1.0 JSON file at {p}, found none")
    data = read_json(p, "a TIFA v1.0 JSON file")
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a JSON object mapping image keys to records, got {type(data).__name__}")
    if not data:
        raise ValueError(f"{p}: expected at least one record, got an empty object")
    return data


def _tifa_row(where: str, key: str, rec: object, metric_cols: dict[str, None]) -> tuple[dict, list]:
    """One TIFA record checked and turned into an item row; returns ``(row, human_scores)``.

    Numeric fields outside :data:`_TIFA_RESERVED` are metrics: each is added to ``metric_cols``
    (first-seen order), which later records are checked against.
    """
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected an object, got {type(rec).__name__}")
    missing = [k for k in TIFA_REQUIRED_KEYS if k not in rec]
    if missing:
        raise ValueError(f"{where}: expected keys {list(TIFA_REQUIRED_KEYS)}, missing {missing}")
    hs, mean = _tifa_human_scores(where, rec)
    row = {"item_id": str(key), "prompt_id": str(rec["text_id"]), "prompt": str(rec["text"]),
           "image": str(rec.get("image_path") or ""), "human": mean, "n_ratings": len(hs)}
    for k, v in rec.items():
        if k in _TIFA_RESERVED:
            continue
        score = _tifa_metric_score(where, k, v, metric_cols)
        if score is not None:
            row[k] = score
    return row, hs


def _tifa_human_scores(where: str, rec: dict) -> tuple[list, float]:
    """A record's ``human_scores`` (a non-empty list of finite numbers) and their mean, which a ``human_avg``
    given with them must equal."""
    hs = rec["human_scores"]
    if (not isinstance(hs, list) or not hs
            or not all(_is_number(x) and math.isfinite(x) for x in hs)):
        raise ValueError(f"{where}: expected 'human_scores' to be a non-empty list of finite numbers, got {hs!r}")
    mean = float(np.mean(hs))
    if "human_avg" in rec and rec["human_avg"] is not None:
        avg = rec["human_avg"]
        if not _is_number(avg) or not math.isclose(avg, mean, rel_tol=0, abs_tol=1e-6):
            raise ValueError(f"{where}: expected 'human_avg' = mean(human_scores) = {mean}, got {avg!r}")
    return hs, mean


def _tifa_metric_score(where: str, key: str, value: object, metric_cols: dict[str, None]) -> float | None:
    """A record's field ``key`` read as a metric's score: a number (registered in ``metric_cols``), NaN for
    null or a NaN written into the JSON ("no score" for this image); ``None`` for a descriptive field (string,
    list), unless ``key`` was numeric in earlier records."""
    if value is None:
        return math.nan
    if _is_number(value):
        metric_cols.setdefault(key)
        return float(value) if math.isfinite(value) else math.nan
    if key in metric_cols:
        raise ValueError(f"{where}: expected a number for metric {key!r} (numeric in earlier records), got {value!r}")
    return None


def _check_tifa_metric_types(p: Path, data: dict, metric_cols: dict[str, None]) -> None:
    """Second pass: a key numeric in a later record but a string in an earlier one slipped through the first."""
    for rec_key, rec in data.items():
        for m in metric_cols:
            v = rec.get(m)
            if v is not None and not _is_number(v):
                raise ValueError(f"{p}, record {rec_key!r}: expected a number for metric {m!r}, got {v!r}")


def _tifa_frames(rows: list[dict], ratings: list[list[float]],
                 metric_cols: dict[str, None]) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """The items and raters x slots rating tables and the metric order, from the checked TIFA rows."""
    # Known TIFA metrics in the row order of the paper's Table 2, then any others in file order.
    metrics = tuple([m for m in TIFA_METRIC_LABELS if m in metric_cols]
                    + [m for m in metric_cols if m not in TIFA_METRIC_LABELS])
    items = pd.DataFrame(rows).set_index("item_id")
    for m in metrics:
        if m not in items.columns:
            items[m] = math.nan
    items = items[list(_ITEM_BASE_COLUMNS) + list(metrics)]
    items[list(metrics)] = items[list(metrics)].astype(float)
    return items, slot_ratings(ratings, items.index), metrics


def slot_ratings(ratings: Sequence[Sequence[float]], index: pd.Index, prefix: str = "r",
                 start: int = 0) -> pd.DataFrame:
    """Per-image rating lists as an items x slots table (the i-th rating of every image is slot i).

    Releases that list each image's ratings without saying who gave them (TIFA v1.0, GenAI-Bench,
    EvalMuse, T2I-Eval-Bench) can only be read as annotation *slots*; an image with fewer ratings
    than the widest gets NaN in the slots it lacks.

    Examples
    --------
    >>> slot_ratings([[5, 4], [3]], pd.Index(["a", "b"], name="item_id"))
              r0   r1
    item_id
    a        5.0  4.0
    b        3.0  NaN
    """
    width = max((len(r) for r in ratings), default=0)
    mat = np.full((len(ratings), width), np.nan)
    for i, r in enumerate(ratings):
        mat[i, : len(r)] = r
    return pd.DataFrame(mat, index=index, columns=[f"{prefix}{j + start}" for j in range(width)])


def _parse_float(value: str, where: str, column: str, allow_missing: bool) -> float:
    s = value.strip()
    if s == "" or s.lower() in {"nan", "na", "null", "none"}:
        if allow_missing:
            return math.nan
        raise ValueError(f"{where}: expected a number in column {column!r}, got an empty value {value!r}")
    try:
        x = float(s)
    except ValueError as e:
        raise ValueError(f"{where}: expected a number in column {column!r}, got {value!r}") from e
    if not math.isfinite(x):
        if allow_missing and math.isnan(x):
            return math.nan
        raise ValueError(f"{where}: expected a finite number in column {column!r}, got {value!r}")
    return x


def load_human_csv(path: str | Path) -> HumanJudgments:
    """Load our long human-judgment CSV (format in the module docstring).

    Row numbers in errors are file line numbers (the header is line 1).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        Unparseable CSV, missing required columns, no rows, an empty item id/rater, a rating
        that is not a finite number, a metric cell that is not a number, a rater rating one item
        twice, or an item whose prompt/prompt_id/image/metric values differ between its rows.
    """
    p = Path(path)
    return _human_from_text(_read_human_csv_frame(p), str(p))  # read as text already: no second pass


def human_from_frame(df: pd.DataFrame, source: str = "<frame>") -> HumanJudgments:
    """Human judgments from a DataFrame in the long CSV format (one row per rating; see the
    module docstring). A CSV file's rows are numbered as file lines (the header is line 1), a
    frame's likewise. Cells may be of any type: missing ones (NaN, None) read as empty, the
    others as their text, as a CSV would give them. Raises ``ValueError`` as
    :func:`load_human_csv` does, naming ``source``."""
    return _human_from_text(df.astype(object).where(df.notna(), "").astype(str), source)


def _human_from_text(df: pd.DataFrame, source: str) -> HumanJudgments:
    """:func:`human_from_frame` on a frame whose cells are all text (``str``, none missing)."""
    p = source
    df.columns = [str(c).strip() for c in df.columns]
    _check_human_columns(df, p)
    metrics = tuple(c for c in df.columns if c not in _CSV_RESERVED)

    items: dict[str, dict] = {}
    first_line: dict[str, int] = {}
    rating_cells: dict[tuple[str, str], int] = {}
    ratings: dict[str, dict[str, float]] = {}
    raters: dict[str, None] = {}
    for i, rec in enumerate(df.to_dict(orient="records")):
        line = i + 2
        where = f"{p}, row {line}"
        r = _CsvRating.parse(rec, where, metrics)
        if r.item_id in items:
            _check_same_item_info(where, r.item_id, r.info, items[r.item_id], first_line[r.item_id])
        else:
            items[r.item_id] = r.info
            first_line[r.item_id] = line
        if (r.item_id, r.rater) in rating_cells:
            raise ValueError(f"{where}: rater {r.rater!r} rated item {r.item_id!r} again (first on row "
                             f"{rating_cells[(r.item_id, r.rater)]}); expected one rating per rater and item")
        rating_cells[(r.item_id, r.rater)] = line
        ratings.setdefault(r.item_id, {})[r.rater] = r.rating
        raters.setdefault(r.rater)

    ids = list(items)
    item_df = pd.DataFrame.from_dict(items, orient="index")
    item_df.index.name = "item_id"
    rating_df = pd.DataFrame([[ratings[i].get(r, math.nan) for r in raters] for i in ids],
                             index=item_df.index, columns=list(raters), dtype=float)
    item_df["human"] = rating_df.mean(axis=1, skipna=True)
    item_df["n_ratings"] = rating_df.notna().sum(axis=1).astype(int)
    item_df = item_df[list(_ITEM_BASE_COLUMNS) + list(metrics)]
    if metrics:
        item_df[list(metrics)] = item_df[list(metrics)].astype(float)
    log.debug("loaded %d items, %d raters, %d metrics from %s", len(item_df), len(raters), len(metrics), p)
    return HumanJudgments(item_df, rating_df, metrics, str(p), {})


@dataclass(frozen=True)
class _CsvRating:
    """One row of the long human-judgment CSV: a rater's rating of an item, with what the row says of the
    item (prompt id, prompt, image, metric scores), which every row of the item must repeat."""

    item_id: str
    rater: str
    rating: float
    info: dict

    @classmethod
    def parse(cls, rec: Mapping[str, str], where: str, metrics: Sequence[str]) -> _CsvRating:
        """The row ``rec`` (cells as text), checked: non-empty item id and rater, a finite rating, metric
        cells numbers or empty."""
        item_id = rec["item_id"].strip()
        rater = rec["rater"].strip()
        if not item_id:
            raise ValueError(f"{where}: expected a non-empty 'item_id', got {rec['item_id']!r}")
        if not rater:
            raise ValueError(f"{where}: expected a non-empty 'rater', got {rec['rater']!r}")
        rating = _parse_float(rec["rating"], where, "rating", allow_missing=False)
        prompt = rec["prompt"]
        info = {"prompt_id": (rec.get("prompt_id") or "").strip() or prompt, "prompt": prompt,
                "image": (rec.get("image") or "").strip()}
        for m in metrics:
            info[m] = _parse_float(rec[m], where, m, allow_missing=True)
        return cls(item_id, rater, rating, info)


def _read_human_csv_frame(p: Path) -> pd.DataFrame:
    """The CSV as strings (the file and parse checks of :func:`load_human_csv`)."""
    if not p.is_file():
        raise FileNotFoundError(f"expected a human-judgment CSV at {p}, found none")
    try:
        return pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: could not parse as CSV: {e}") from e


def _check_human_columns(df: pd.DataFrame, p: str) -> None:
    """The column checks of :func:`human_from_frame` (required, unique, at least one row)."""
    missing = [c for c in CSV_REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: expected columns {list(CSV_REQUIRED_COLUMNS)} (+ optional image, prompt_id, "
                         f"metric columns), missing {missing} (got {list(df.columns)})")
    if df.empty:
        raise ValueError(f"{p}: expected at least one rating row, got none")
    if len(set(df.columns)) != len(df.columns):
        raise ValueError(f"{p}: expected unique column names, got {list(df.columns)}")


def _check_same_item_info(where: str, item_id: str, info: dict, prev: dict, prev_line: int) -> None:
    """An item's prompt/prompt_id/image/metric values must match those on its first row (NaN equals NaN)."""
    for k, v in info.items():
        u = prev[k]
        if isinstance(v, float):
            same = (math.isnan(u) and math.isnan(v)) or u == v
        else:
            same = u == v
        if not same:
            raise ValueError(f"{where}: item {item_id!r} has {k} = {v!r}, expected {u!r} as on row "
                             f"{prev_line} (an item's {k} must be the same on all its rows)")


def save_human_csv(judgments: HumanJudgments, path: str | Path) -> Path:
    """Write ``judgments`` in our long CSV format (one row per rating); returns the path.

    ``load_human_csv(save_human_csv(j, p))`` gives back the same items, ratings and metrics
    (TIFA's annotation slots become raters ``r0``, ``r1``, ...).
    """
    p = Path(path)
    rows = []
    for item_id, item in judgments.items.iterrows():
        for rater, rating in judgments.ratings.loc[item_id].items():
            if pd.isna(rating):
                continue
            row = {"item_id": item_id, "prompt_id": item["prompt_id"], "prompt": item["prompt"],
                   "image": item["image"], "rater": rater, "rating": rating}
            row.update({m: item[m] for m in judgments.metrics})
            rows.append(row)
    p.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=["item_id", "prompt_id", "prompt", "image", "rater", "rating",
                                *judgments.metrics]).to_csv(p, index=False)
    return p


def make_synthetic_human(path: str | Path, n_prompts: int = 12, images_per_prompt: int = 4,
                         raters: Sequence[str] = ("r1", "r2", "r3"), seed: int = 0,
                         missing_rate: float = 0.1) -> Path:
    """Write a small synthetic human-judgment set in our CSV format (for tests and demos).

    Each image has a latent faithfulness ``q ~ N(0, 1)``; every rater gives
    ``clip(round(3 + 1.2 q + N(0, 0.6)), 1, 5)`` and skips an image with probability
    ``missing_rate`` (never all raters). Metric columns, from best to worst by construction:
    ``oracle`` (q + small noise), ``noisy`` (q + large noise, on a CLIPScore-like scale, with
    a few missing scores) and ``random`` (independent of q).

    Returns
    -------
    Path
        ``path``.
    """
    if n_prompts < 1 or images_per_prompt < 1 or len(raters) < 1:
        raise ValueError(f"expected n_prompts, images_per_prompt and raters >= 1, got "
                         f"{n_prompts}, {images_per_prompt}, {len(raters)}")
    rng = np.random.default_rng(seed)
    rows = []
    for pi in range(n_prompts):
        prompt = f"synthetic prompt {pi}: a red cube left of {pi % 5 + 1} blue spheres"
        for ii in range(images_per_prompt):
            q = rng.normal()
            item = f"s{pi:03d}-{ii}"
            oracle = round(q + rng.normal(scale=0.2), 4)
            noisy = round(30 + 2 * (q + rng.normal(scale=1.5)), 4) if rng.random() > 0.1 else math.nan
            rand = round(float(rng.random()), 4)
            rated = rng.random(len(raters)) >= missing_rate
            if not rated.any():
                rated[rng.integers(len(raters))] = True
            for r, ok in zip(raters, rated, strict=True):
                rating = int(np.clip(round(3 + 1.2 * q + rng.normal(scale=0.6)), 1, 5))
                if ok:
                    rows.append({"item_id": item, "prompt_id": f"P{pi:03d}", "prompt": prompt,
                                 "image": f"images/{item}.png", "rater": r, "rating": rating,
                                 "oracle": oracle, "noisy": noisy, "random": rand})
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(p, index=False)
    return p
