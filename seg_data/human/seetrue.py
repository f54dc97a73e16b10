"""SeeTRUE (Yarom et al., 2023, "What You See is What You Read?"): binary image-text entailment labels.

``SeeTRUE.csv`` as released on the hub (``yonatanbitton/SeeTRUE``, also in t2v_metrics'
``datasets/``), one row per image-text pair::

    image,text,label,original_dataset_id,dataset_source
    id_105_coco_val_0.png,A group of people standing next to bags of luggage.,1,text_105_image_1377,coco_t2i

``label`` is 1 when the image entails the text, else 0. A metric is judged by ROC AUC, pooled and
per ``dataset_source`` (t2v_metrics reports the latter: its ``SeeTrue.evaluate_scores``). The item
id is the image file name (unique in the release); the text is the prompt and the group of the
cluster bootstrap (texts shared by several images are resampled together). Categories:
``dataset_source=...``. The release has no metric scores: give them with ``human_scores=`` (a
score CSV keyed by ``image``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from .base import HumanJudgments
from .registry import HumanSetFamily, Sniff

log = logging.getLogger(__name__)

FAMILY = HumanSetFamily(
    name="seetrue", title="SeeTRUE", kind="binary",
    file_format="SeeTRUE.csv: image, text, label (0/1), original_dataset_id, dataset_source",
    size="6,930 image-text pairs (editbench 3,827, coco_t2i 1,791, drawbench 1,312)",
    license="CC-BY-4.0 (hub card; gated: test set only, research use)",
    get="hub yonatanbitton/SeeTRUE (gated: accept the terms, then hf download); also t2v_metrics datasets/",
    hub_repo="yonatanbitton/SeeTRUE", hub_files=("SeeTRUE.csv",),
    raters="one label per pair",
)

COLUMNS = ("image", "text", "label", "dataset_source")


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return "SeeTRUE.csv" in sniff.names
    return sniff.suffix == ".csv" and all(c in sniff.columns for c in COLUMNS)


def load(path: str | Path) -> HumanJudgments:
    """Read ``SeeTRUE.csv`` (or the folder holding it), module docstring.

    Raises
    ------
    ValueError
        Missing columns, an empty image name, an image listed twice, or a label that is not 0/1
        (the message names the file and row).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "SeeTRUE.csv"
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, FileNotFoundError) as e:
        raise ValueError(f"{p}: could not read as CSV: {e}") from e
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: expected SeeTRUE columns {list(COLUMNS)}, missing {missing} (got {list(df.columns)})")
    if df.empty:
        raise ValueError(f"{p}: expected at least one row, got none")
    labels = np.empty(len(df))
    seen: dict[str, int] = {}
    for i, (image, label) in enumerate(zip(df["image"], df["label"], strict=True)):
        where = f"{p}, row {i + 2}"
        if not image.strip():
            raise ValueError(f"{where}: expected an image file name, got an empty one")
        if image in seen:
            raise ValueError(f"{where}: image {image!r} is listed again (first on row {seen[image]}); expected "
                             "one row per image")
        seen[image] = i + 2
        if label.strip() not in ("0", "1"):
            raise ValueError(f"{where}: expected label 0 or 1, got {label!r}")
        labels[i] = float(label)
    index = pd.Index(df["image"].tolist(), name="item_id")
    items = pd.DataFrame({"prompt_id": df["text"].to_numpy(), "prompt": df["text"].to_numpy(),
                          "image": df["image"].to_numpy(), "human": labels, "n_ratings": 1}, index=index)
    ratings = pd.DataFrame({"label": labels}, index=index)
    sources = df["dataset_source"].str.strip()
    cats = pd.DataFrame({f"dataset_source={s}": (sources == s).to_numpy() for s in sorted(set(sources))}, index=index)
    log.debug("loaded %d SeeTRUE pairs (%d positive) from %s", len(items), int(labels.sum()), p)
    return HumanJudgments(items, ratings, (), str(p), {}, kind="binary", categories=cats, name="seetrue")
