"""Metric scores joined to a human-judgment set by item (``human_scores=FILE``).

Sets whose release carries no metric scores (TIFA160's per-rater DSG ratings, SeeTRUE, the hub
sets) get them from a score file:

TIFA v1.0 JSON (``.json``)
    Its metric columns (:func:`seg_data.human.base.load_tifa_json`), keyed by image key: the
    TIFA160 items of the DSG ratings have the same keys.
Score CSV (``.csv``), wide
    ``item_id`` (or ``image``: the item's image path or file name), then one numeric column per
    metric (empty or ``nan`` = no score)::

        item_id,clipscore,vqascore
        coco_669925_mini_dalle,0.31,0.82

Score CSV, long
    ``item_id`` (or ``image``), ``metric``, ``score``: one row per score.

Rows whose key is not an item of the set are ignored (the log says how many); items without a
score are NaN for that metric (its statistics leave them out, with a warning).
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["read_scores", "attach_scores", "SCORE_KEYS"]

log = logging.getLogger(__name__)

#: Columns a score CSV may key items by, in order of preference.
SCORE_KEYS = ("item_id", "image")


def _parse_scores(df: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Cell-checked float frame of a score CSV's value columns (the key column kept as text)."""
    key = next(k for k in SCORE_KEYS if k in df.columns)
    out = pd.DataFrame({key: df[key].astype(str).str.strip()})
    for col in df.columns:
        if col == key or col in SCORE_KEYS:
            continue
        vals = []
        for i, v in enumerate(df[col]):
            s = str(v).strip()
            if s == "" or s.lower() in {"nan", "na", "null", "none"}:
                vals.append(math.nan)
                continue
            try:
                vals.append(float(s))
            except ValueError as e:
                raise ValueError(f"{path}, row {i + 2}: expected a number in column {col!r}, got {v!r}") from e
        out[col] = vals
    return out


def read_scores(path: str | Path) -> tuple[str, pd.DataFrame]:
    """The metric scores of a score file: ``(key, frame)``, ``frame`` indexed by ``key`` values
    (``item_id`` or ``image``), one float column per metric (module docstring).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        Not a .json / .csv file, no key column, a repeated key, a cell that is not a number, no
        metric column.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"expected a score file (TIFA v1.0 .json or score .csv) at {p}, found none")
    if p.suffix.lower() == ".json":
        from .base import load_tifa_json

        hj = load_tifa_json(p)
        return "item_id", hj.items[list(hj.metrics)].astype(float)
    if p.suffix.lower() != ".csv":
        raise ValueError(f"{p}: expected a score file .json (TIFA v1.0) or .csv (item_id or image, metric columns), "
                         f"got {p.suffix!r}")
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: could not parse as CSV: {e}") from e
    df.columns = [str(c).strip() for c in df.columns]
    if not any(k in df.columns for k in SCORE_KEYS):
        raise ValueError(f"{p}: expected a key column {' or '.join(SCORE_KEYS)}, got {list(df.columns)}")
    frame = _parse_scores(df, p)
    key = frame.columns[0]
    if {"metric", "score"} <= set(df.columns) and len(df.columns) == 3:
        frame = _long_to_wide(df, key, p)
    else:
        frame = frame.set_index(key)
    dup = frame.index[frame.index.duplicated()]
    if len(dup):
        raise ValueError(f"{p}: expected one row per {key}, got {dup[0]!r} more than once")
    if frame.shape[1] == 0:
        raise ValueError(f"{p}: expected at least one metric column besides {key!r}, got none")
    return key, frame


def _long_to_wide(df: pd.DataFrame, key: str, p: Path) -> pd.DataFrame:
    scores = _parse_scores(df[[key, "score"]], p)["score"]
    long = pd.DataFrame({key: df[key].str.strip(), "metric": df["metric"].str.strip(), "score": scores})
    dup = long.duplicated([key, "metric"])
    if dup.any():
        r = long[dup].iloc[0]
        raise ValueError(f"{p}, row {int(np.flatnonzero(dup.to_numpy())[0]) + 2}: {key} {r[key]!r} has a second "
                         f"score for metric {r['metric']!r}; expected one")
    wide = long.pivot(index=key, columns="metric", values="score")
    wide.columns.name = None
    return wide[list(dict.fromkeys(long["metric"]))]


def attach_scores(hj, path: str | Path):
    """``hj`` with the metric columns of the score file ``path`` joined by item (module docstring).

    Items are matched on ``item_id``; a file keyed by ``image`` matches the item's ``image`` or
    its file name.

    Raises
    ------
    ValueError
        No item of the set has a row in the file (the message shows a key of each side), or a
        metric that the set already has.
    """
    key, frame = read_scores(path)
    if key == "item_id":
        keys = hj.items.index.astype(str)
    else:
        image = hj.items["image"].astype(str)
        by_name = image.map(lambda s: Path(s).name)
        keys = image.where(image.isin(frame.index), by_name)
    matched = keys.isin(frame.index)
    if not matched.any():
        raise ValueError(f"{path}: expected scores keyed by the {key} of {hj.source}'s items (e.g. {keys[0]!r}), "
                         f"got keys like {frame.index[0]!r}: no item matched")
    clash = [m for m in frame.columns if m in hj.metrics or m in hj.items.columns]
    if clash:
        raise ValueError(f"{path}: metric(s) {clash} are already columns of {hj.source}; rename them")
    extra = int((~frame.index.isin(keys)).sum())
    if extra:
        log.info("%s: %d score rows match no item of %s and are ignored", path, extra, hj.name)
    log.info("%s: scores for %d of %d items of %s", path, int(matched.sum()), len(keys), hj.name)
    joined = frame.reindex(keys.to_numpy())
    joined.index = hj.items.index
    items = pd.concat([hj.items, joined.astype(float)], axis=1)
    from .base import TIFA_METRIC_LABELS

    labels = {**hj.metric_labels, **{m: TIFA_METRIC_LABELS[m] for m in frame.columns if m in TIFA_METRIC_LABELS}}
    return replace(hj, items=items, metrics=tuple(hj.metrics) + tuple(str(c) for c in frame.columns),
                   metric_labels=labels)
