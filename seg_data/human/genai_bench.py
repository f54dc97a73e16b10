"""GenAI-Bench (Li et al., 2024): 1,600 prompts x 6 generators, three 1-5 alignment ratings per image, skill tags.

The hub release ``BaiqiL/GenAI-Bench-1600`` holds the ratings and tags as two JSON files, read as
t2v_metrics reads them (``GenAIBench_Image`` in its ``dataset.py``; the VQAScore paper's 527-prompt
subset ``zhiqiulin/GenAI-Bench-527`` has the same files):

``genai_image.json``
    prompt index (``"00001"``) -> record::

        {"00001": {"id": "00001", "prompt": "A baker pulling freshly baked bread out of an oven ...",
                   "models": {"DALLE_3": [5, 4, 5], "SDXL_Turbo": [3, 3, 4], ...}}, ...}

    ``models`` maps each generator to its image's ratings (one per annotator; the release does
    not say which person gave which, so the raters are the slots ``r0``, ``r1``, ``r2``).
``genai_skills.json`` (optional)
    skill tag -> list of prompt indices (integers)::

        {"attribute": [1, 5, ...], "counting": [2, ...], "basic": [...], "advanced": [...], ...}

    A prompt has several tags. They become the categories ``skill=<tag>`` (``basic`` and
    ``advanced`` are tags of their own, as t2v_metrics' tag groups use them).

An item is one generated image, id ``<model>/<prompt index>`` (the image is
``<model>/<prompt index>.jpeg`` under the release folder); the prompt index is the group.
``load`` takes the folder holding the files or ``genai_image.json`` itself.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .base import HumanJudgments, read_json, slot_ratings
from .registry import HumanSetFamily, Sniff

log = logging.getLogger(__name__)

FAMILY = HumanSetFamily(
    name="genai_bench", title="GenAI-Bench (1600)", kind="likert",
    file_format="genai_image.json: prompt index -> {prompt, models: {generator: [3 ratings 1-5]}}; "
                "genai_skills.json: skill -> [prompt indices]",
    size="1,600 prompts x 6 generators = 9,600 images, 3 ratings each; basic/advanced skill tags",
    license="Apache-2.0 (BaiqiL/GenAI-Bench card)",
    get="hub BaiqiL/GenAI-Bench-1600 (genai_image.json, genai_skills.json)",
    hub_repo="BaiqiL/GenAI-Bench-1600", hub_files=("genai_image.json", "genai_skills.json"),
    raters="3 annotation slots",
)

RATINGS = "genai_image.json"
SKILLS = "genai_skills.json"


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return RATINGS in sniff.names
    rec = sniff.first_record()
    return isinstance(sniff.data, dict) and isinstance(rec, dict) and "models" in rec and "prompt" in rec


def _read_json(p: Path):
    return read_json(p, f"GenAI-Bench's {p.name}")


def _image_ratings(where: str, model: str, values) -> list[float]:
    if (not isinstance(values, list) or not values
            or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 1 <= v <= 5
                       for v in values)):
        raise ValueError(f"{where}: expected the ratings of model {model!r} to be a non-empty list of 1-5 numbers, "
                         f"got {values!r}")
    return [float(v) for v in values]


def _records(p: Path, data) -> tuple[list[dict], list[list[float]]]:
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{p}: expected a non-empty JSON object mapping prompt indices to records, "
                         f"got {type(data).__name__}")
    rows, ratings = [], []
    for key, rec in data.items():
        where = f"{p}, record {key!r}"
        if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) or not isinstance(rec.get("models"), dict):
            raise ValueError(f"{where}: expected an object with a 'prompt' string and a 'models' object, got "
                             f"{rec if not isinstance(rec, dict) else sorted(rec)!r}")
        if not rec["models"]:
            raise ValueError(f"{where}: expected ratings of at least one model in 'models', got none")
        for model, values in rec["models"].items():
            r = _image_ratings(where, model, values)
            rows.append({"item_id": f"{model}/{key}", "prompt_id": str(key), "prompt": rec["prompt"],
                         "image": f"{model}/{key}.jpeg", "human": float(np.mean(r)), "n_ratings": len(r)})
            ratings.append(r)
    return rows, ratings


def _skills(p: Path, prompt_ids: pd.Series) -> pd.DataFrame:
    cats = pd.DataFrame(index=prompt_ids.index)
    if not p.is_file():
        log.info("%s: not found, GenAI-Bench is read without skill tags", p)
        return cats
    data = _read_json(p)
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected an object mapping skill tags to prompt indices, got {type(data).__name__}")
    as_int = prompt_ids.map(lambda s: int(s) if str(s).isdigit() else -1)
    for tag, idx in data.items():
        if not isinstance(idx, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in idx):
            raise ValueError(f"{p}, record {tag!r}: expected a list of integer prompt indices, got {idx!r}")
        cats[f"skill={tag}"] = as_int.isin(set(idx)).to_numpy()
    return cats


def load(path: str | Path) -> HumanJudgments:
    """Read GenAI-Bench's ``genai_image.json`` (+ ``genai_skills.json`` beside it), module docstring.

    Raises
    ------
    FileNotFoundError
        No ``genai_image.json``.
    ValueError
        Not JSON, a record without ``prompt``/``models``, ratings that are not a list of 1-5
        numbers, a skill list that is not integers (the message names the file and record).
    """
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    ratings_file = p / RATINGS if p.is_dir() else p
    rows, ratings = _records(ratings_file, _read_json(ratings_file))
    index = pd.Index([r.pop("item_id") for r in rows], name="item_id")
    if not index.is_unique:
        raise ValueError(f"{ratings_file}: expected each model once per prompt, got {index[index.duplicated()][0]!r} twice")
    items = pd.DataFrame(rows, index=index)
    rating_df = slot_ratings(ratings, index)
    cats = _skills(folder / SKILLS, items["prompt_id"])
    log.debug("loaded %d GenAI-Bench images, %d prompts, %d skills from %s", len(items),
              items["prompt_id"].nunique(), cats.shape[1], ratings_file)
    return HumanJudgments(items, rating_df, (), str(ratings_file), {}, kind="likert", categories=cats,
                          name="genai_bench")
