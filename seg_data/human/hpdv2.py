"""HPDv2 test (Wu et al., 2023, Human Preference Score v2): images of one prompt ranked by annotators.

``test.json`` of the hub release ``ymhao/HPDv2``, as the HPSv2 repository documents and reads it
(README "Data Structure"; ``RankingDataset`` and ``evaluate_rank`` of github.com/tgxs002/HPSv2)::

    [{"prompt": "a cat wearing a hat",
      "image_path": ["00000.jpg", "00001.jpg", ...],
      "rank": [3, 1, 2, ...],                      # averaged ranking, 1 = best, by image_path index
      "raw_annotations": [{"rank": [2, 1, 3, ...], "user_hash": "a1b2..."}, ...]},   # per annotator
     ...]

Ranks mean something only within a prompt, so the set is ``ranked``: ``human`` is the negated
averaged rank (higher = better) and its statistics are computed within prompts (HPSv2's
"ranking accuracy" is pairwise agreement within a prompt). Each annotator (``user_hash``) is a
rater with the negated ranks they gave, so the rater ceiling is leave-one-annotator-out;
``raw_annotations`` is optional (older releases lack it: one rater, ``rank``). An item is one
image, id = its ``image_path`` entry; the group is the record's index.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd

from .base import HumanJudgments, read_json
from .registry import HumanSetFamily, Sniff

log = logging.getLogger(__name__)

FAMILY = HumanSetFamily(
    name="hpdv2", title="HPDv2 test", kind="ranked",
    file_format="test.json: [{prompt, image_path: [...], rank: [...], raw_annotations: [{rank, user_hash}]}]",
    size="test split: 153k pairwise choices from rankings of each prompt's images (HPSv2 README)",
    license="Apache-2.0 (hub card)",
    get="hub ymhao/HPDv2 (test.json)",
    hub_repo="ymhao/HPDv2", hub_files=("test.json",),
    raters="annotators (user_hash)",
)

FILE = "test.json"


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return FILE in sniff.names
    rec = sniff.first_record()
    return (isinstance(sniff.data, list) and isinstance(rec, dict) and isinstance(rec.get("image_path"), list)
            and "rank" in rec)


def _ranks(where: str, values, n: int, what: str) -> list[float]:
    if (not isinstance(values, list) or len(values) != n
            or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                       for v in values)):
        raise ValueError(f"{where}: expected {what} to be a list of {n} non-negative ranks (one per image_path), "
                         f"got {values!r}")
    return [float(v) for v in values]


def _record(where: str, rec) -> tuple[str, list[str], list[float], dict[str, list[float]]]:
    if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) or not isinstance(rec.get("image_path"), list):
        raise ValueError(f"{where}: expected an object with a 'prompt' string and an 'image_path' list, got "
                         f"{sorted(rec) if isinstance(rec, dict) else rec!r}")
    paths = [str(x) for x in rec["image_path"]]
    if len(paths) < 2:
        raise ValueError(f"{where}: expected at least 2 images to rank, got {len(paths)}")
    rank = _ranks(where, rec.get("rank"), len(paths), "'rank'")
    users: dict[str, list[float]] = {}
    for j, ann in enumerate(rec.get("raw_annotations") or []):
        if not isinstance(ann, dict) or not isinstance(ann.get("user_hash"), str):
            raise ValueError(f"{where}, raw_annotations[{j}]: expected an object with 'rank' and 'user_hash', "
                             f"got {ann!r}")
        users[ann["user_hash"]] = _ranks(f"{where}, raw_annotations[{j}]", ann.get("rank"), len(paths), "'rank'")
    return rec["prompt"], paths, rank, users


def load(path: str | Path) -> HumanJudgments:
    """Read HPDv2's ``test.json`` (or the folder holding it), module docstring.

    Raises
    ------
    FileNotFoundError
        No ``test.json``.
    ValueError
        Not JSON, not a list, a record without ``prompt``/``image_path``, ranks that do not match
        the images, an image path twice (the message names the file and record).
    """
    p = Path(path)
    if p.is_dir():
        p = p / FILE
    data = read_json(p, f"HPDv2's {FILE}")
    if not isinstance(data, list) or not data:
        raise ValueError(f"{p}: expected a non-empty list of ranked prompts, got {type(data).__name__}")
    rows, per_user = [], []
    for i, rec in enumerate(data):
        prompt, paths, rank, users = _record(f"{p}, record {i}", rec)
        for k, path_k in enumerate(paths):
            rows.append({"item_id": path_k, "prompt_id": str(i), "prompt": prompt, "image": path_k,
                         "human": -rank[k], "rank": rank[k]})
            per_user.append({u: -r[k] for u, r in users.items()})
    index = pd.Index([r.pop("item_id") for r in rows], name="item_id")
    if not index.is_unique:
        raise ValueError(f"{p}: expected every image_path once, got {index[index.duplicated()][0]!r} twice")
    users_all = list(dict.fromkeys(u for d in per_user for u in d))
    if users_all:
        ratings = pd.DataFrame(per_user, index=index, columns=users_all, dtype=float)
    else:
        ratings = pd.DataFrame({"rank": [-r["rank"] for r in rows]}, index=index)
    items = pd.DataFrame(rows, index=index).drop(columns="rank")
    items["n_ratings"] = ratings.notna().sum(axis=1).to_numpy()
    items = items[["prompt_id", "prompt", "image", "human", "n_ratings"]]
    if (items["n_ratings"] == 0).any():
        raise ValueError(f"{p}: expected every image ranked by an annotator, "
                         f"{items.index[(items['n_ratings'] == 0).to_numpy()][0]!r} has no raw annotation")
    log.debug("loaded %d HPDv2 images, %d prompts, %d annotators from %s", len(items), len(data), len(users_all), p)
    return HumanJudgments(items, ratings, (), str(p), {}, kind="ranked", name="hpdv2")
