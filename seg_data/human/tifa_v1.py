"""TIFA v1.0's human-judgment JSON as a registered family (the reader is :func:`seg_data.human.base.load_tifa_json`)."""

from __future__ import annotations

from pathlib import Path

from .base import TIFA_REQUIRED_KEYS, HumanJudgments, load_tifa_json
from .registry import HumanSetFamily, Sniff

FAMILY = HumanSetFamily(
    name="tifa_v1", title="TIFA v1.0 (TIFA160)", kind="likert",
    file_format="tifa_v1_human_annotations_with_scores.json: image key -> {text_id, text, human_scores, "
                "<metric>: score}",
    size="800 images (160 prompts x 5 generators), 2 ratings each, 10 released metric scores",
    license="Apache License 2.0 (setup.py of github.com/Yushi-Hu/tifa)",
    get="github.com/Yushi-Hu/tifa (human_annotations/); ../shared/human/ for developers",
    raters="2 annotation slots (not persons)",
)


def detect(sniff: Sniff) -> bool:
    rec = sniff.first_record()
    return isinstance(sniff.data, dict) and isinstance(rec, dict) and all(k in rec for k in TIFA_REQUIRED_KEYS)


def load(path: str | Path) -> HumanJudgments:
    return load_tifa_json(path)
