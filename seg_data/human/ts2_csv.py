"""ts2's own long human-judgment CSV as a registered family (the reader is :func:`seg_data.human.base.load_human_csv`)."""

from __future__ import annotations

from pathlib import Path

from .base import CSV_REQUIRED_COLUMNS, HumanJudgments, load_human_csv
from .registry import HumanSetFamily, Sniff

FAMILY = HumanSetFamily(
    name="ts2_csv", title="ts2 human CSV (your own ratings)", kind="likert",
    file_format="CSV, one row per rating: item_id, prompt, [prompt_id, image,] rater, rating, <metric columns>",
    size="any", license="yours",
    get="write it (seg_data.human.save_human_csv, make_synthetic_human for an example)",
    raters="your raters",
)


def detect(sniff: Sniff) -> bool:
    return sniff.suffix == ".csv" and all(c in sniff.columns for c in CSV_REQUIRED_COLUMNS)


def load(path: str | Path) -> HumanJudgments:
    return load_human_csv(path)
