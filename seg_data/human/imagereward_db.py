"""ImageRewardDB test split (Xu et al., 2023, ImageReward): each prompt's images ranked by an expert annotator.

The hub release ``THUDM/ImageRewardDB`` describes every image by one record (its dataset card,
"Data Instances" and "Dataset Metadata"), in ``metadata-test.parquet`` and in the JSON file of each
image folder (a list of such records)::

    image_path                 images/test/test_1/1b4b2d61-89c2-4091-a1c0-f547ad5065cb.webp
    prompt_id                  001324-0093
    prompt                     a magical forest that separates the good world from the dark world, ...
    classification             Outdoor Scenes
    image_amount_in_total      9
    rank                       3          # within the prompt's images, 1 = best
    overall_rating             6          # 1-7
    image_text_alignment_rating 6
    fidelity_rating            6

Ranks mean something only within a prompt, so the set is ``ranked``: ``human`` is the negated
rank (statistics within prompts: pairwise accuracy within prompt, as ImageReward reports its
preference accuracy). The release gives one ranking per prompt, so there is one rater and no
rater ceiling. An item is one image (id ``image_path``), the group ``prompt_id``; categories
``classification=...``.

``load`` takes ``metadata-test.parquet`` (needs pyarrow: ``pip install 'ts2[human]'``), a JSON
list of records, or a folder holding ``metadata-test.parquet``.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .base import HumanJudgments, read_json
from .registry import HumanSetFamily, Sniff

log = logging.getLogger(__name__)

FAMILY = HumanSetFamily(
    name="imagereward_db", title="ImageRewardDB test", kind="ranked",
    file_format="metadata-test.parquet (or an image folder's JSON): one row per image: image_path, prompt_id, "
                "prompt, classification, rank, overall_rating, ...",
    size="test split: 466 prompts, 2.7K images (7.23K pairs), hub card",
    license="Apache-2.0 (hub card)",
    get="hub THUDM/ImageRewardDB (metadata-test.parquet)",
    hub_repo="THUDM/ImageRewardDB", hub_files=("metadata-test.parquet",),
    raters="one ranking per prompt",
)

FILE = "metadata-test.parquet"
COLUMNS = ("image_path", "prompt_id", "prompt", "rank")


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return FILE in sniff.names
    if sniff.suffix == ".parquet":
        return all(c in sniff.columns for c in COLUMNS)
    rec = sniff.first_record()
    return (isinstance(sniff.data, list) and isinstance(rec, dict) and all(c in rec for c in COLUMNS)
            and not isinstance(rec.get("rank"), list))


def _frame(p: Path) -> tuple[pd.DataFrame, str]:
    """The records as a frame and what a record is called in errors (``row`` or ``record``)."""
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401  (pandas reads parquet through it)
        except ImportError as e:
            raise ImportError(f"{p}: reading parquet needs pyarrow: pip install 'ts2[human]' (or pyarrow)") from e
        try:
            return pd.read_parquet(p), "row"
        except Exception as e:  # noqa: BLE001 - pyarrow raises many classes for a bad file
            raise ValueError(f"{p}: could not read as parquet ({type(e).__name__}: {e})") from e
    data = read_json(p, "ImageRewardDB's metadata JSON")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ValueError(f"{p}: expected a list of image records, got {type(data).__name__}")
    return pd.DataFrame(data), "record"


def _check_row(where: str, row: dict) -> float:
    path, rank, total = row.get("image_path"), row.get("rank"), row.get("image_amount_in_total")
    if not isinstance(path, str) or not path or not isinstance(row.get("prompt_id"), str):
        raise ValueError(f"{where}: expected image_path and prompt_id strings, got {path!r}, {row.get('prompt_id')!r}")
    ok = isinstance(rank, int | float | np.integer | np.floating) and not isinstance(rank, bool) and math.isfinite(rank)
    if not ok or rank < 1 or (total is not None and not pd.isna(total) and rank > total):
        raise ValueError(f"{where}: expected a rank from 1 to image_amount_in_total ({total}), got {rank!r}")
    return float(rank)


def load(path: str | Path) -> HumanJudgments:
    """Read ImageRewardDB's test metadata (module docstring).

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ImportError
        A parquet file without pyarrow installed.
    ValueError
        Not parquet/JSON, missing columns, a record without ``image_path``/``prompt_id`` or with
        a rank outside 1..``image_amount_in_total``, an image twice (the message names the file
        and row/record).
    """
    p = Path(path)
    if p.is_dir():
        p = p / FILE
    if not p.is_file():
        raise FileNotFoundError(f"expected ImageRewardDB's {FILE} (or a JSON list of records) at {p}, found none")
    df, unit = _frame(p)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: expected ImageRewardDB columns {list(COLUMNS)}, missing {missing} (got {list(df.columns)})")
    records = df.to_dict(orient="records")
    ranks = np.array([_check_row(f"{p}, {unit} {i}", r) for i, r in enumerate(records)])
    index = pd.Index(df["image_path"].astype(str).tolist(), name="item_id")
    if not index.is_unique:
        raise ValueError(f"{p}: expected every image_path once, got {index[index.duplicated()][0]!r} twice")
    items = pd.DataFrame({"prompt_id": df["prompt_id"].astype(str).to_numpy(), "prompt": df["prompt"].astype(str).to_numpy(),
                          "image": index.to_numpy(), "human": -ranks, "n_ratings": 1}, index=index)
    ratings = pd.DataFrame({"rank": -ranks}, index=index)
    cats = pd.DataFrame(index=index)
    if "classification" in df.columns:
        cls = df["classification"].astype(str).str.strip().to_numpy()
        for c in sorted(set(cls)):
            cats[f"classification={c}"] = cls == c
    log.debug("loaded %d ImageRewardDB images, %d prompts from %s", len(items), items["prompt_id"].nunique(), p)
    return HumanJudgments(items, ratings, (), str(p), {}, kind="ranked", categories=cats, name="imagereward_db")
