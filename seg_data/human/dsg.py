"""TIFA160 with per-rater Likert ratings: the DSG release's ``dsg_tifa160_anns.csv``.

Davidsonian Scene Graph (Cho et al., 2024) re-rated TIFA v1.0's 800 images (160 prompts x 5
generators), 3-5 raters per image, 1-5 "How consistent is the image with the text description?".
t2v_metrics ships the file (``datasets/dsg_tifa160_anns.csv``) and evaluates metrics on the
per-image mean (its ``TIFA160_DSG`` in ``dataset.py``). One row per rating::

    data_type,model_type,item_id,source_id,worker_id,question,answer
    tifa160,sd2dot1,4,partiprompt_366,3,How consistent is the image with the text description?,5

An image is ``source_id`` + generator. ``model_type`` names the generator as DSG does
(``mini-dalle``, ``vq-diffusion``, ``sd1dot1``, ``sd1dot5``, ``sd2dot1``); the item id is the TIFA
v1.0 image key (``partiprompt_366_stable_diffusion_v2_1``), so the metric scores of a TIFA v1.0
JSON join by item (``human_scores=``). ``source_id`` is the prompt (the group). ``worker_id`` is
the rater: the raters are people, not annotation slots, so the rater ceiling is leave-one-person-out.

The file has no prompt text: it is taken from ``tifa160.json`` (image key -> ``text_id``,
``image_path``, ``text``) when that file lies beside the CSV, else left empty.
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
    name="tifa160_dsg", title="TIFA160, per-rater ratings (DSG)", kind="likert",
    file_format="dsg_tifa160_anns.csv: one row per rating (model_type, source_id, worker_id, answer 1-5)",
    size="800 images (160 prompts x 5 generators), 3,995 ratings by 5 raters (3-5 per image)",
    license="Apache-2.0 (linzhiqiu/t2v_metrics, which ships it in datasets/)",
    get="t2v_metrics repository, datasets/dsg_tifa160_anns.csv (+ tifa160.json for prompt texts); "
        "metric scores: human_scores= a TIFA v1.0 JSON or a score CSV by image key",
    raters="5 people (worker_id)",
)

COLUMNS = ("model_type", "source_id", "worker_id", "answer")

#: DSG's generator names -> TIFA v1.0's, as t2v_metrics maps them (``TIFA160_DSG.model_type_to_names``).
MODEL_NAMES = {
    "mini-dalle": "mini_dalle",
    "vq-diffusion": "vq_diffusion",
    "sd1dot1": "stable_diffusion_v1_1",
    "sd1dot5": "stable_diffusion_v1_5",
    "sd2dot1": "stable_diffusion_v2_1",
}


def detect(sniff: Sniff) -> bool:
    return sniff.suffix == ".csv" and all(c in sniff.columns for c in COLUMNS)


def _prompt_texts(path: Path) -> dict[str, dict]:
    side = path.parent / "tifa160.json"
    if not side.is_file():
        log.info("%s: no tifa160.json beside it, prompts are left without text", path)
        return {}
    data = read_json(side, "tifa160.json")
    if not isinstance(data, dict):
        raise ValueError(f"{side}: expected an object mapping image keys to records, got {type(data).__name__}")
    return data


def _rating(value: str, where: str) -> float:
    try:
        x = float(value)
    except ValueError as e:
        raise ValueError(f"{where}: expected a 1-5 rating in column 'answer', got {value!r}") from e
    if not math.isfinite(x) or not 1 <= x <= 5:
        raise ValueError(f"{where}: expected a 1-5 rating in column 'answer', got {value!r}")
    return x


def load(path: str | Path) -> HumanJudgments:
    """Read ``dsg_tifa160_anns.csv`` (module docstring) into one item per image, one rater per worker.

    Raises
    ------
    ValueError
        Missing columns, an unknown ``model_type``, an empty ``source_id``/``worker_id``, an
        answer that is not a 1-5 number, or a worker rating one image twice (the message names
        the file and row).
    """
    p = Path(path)
    df = _read_table(p)
    texts = _prompt_texts(p)
    cells, prompts = _ratings_by_image_and_worker(df, p)
    ids = list(prompts)
    ratings = _rating_table(cells, ids)
    items = pd.DataFrame({
        "prompt_id": [prompts[k] for k in ids],
        "prompt": [str(texts.get(k, {}).get("text", "")) for k in ids],
        "image": [str(texts.get(k, {}).get("image_path", f"{k}.jpg")) for k in ids],
        "human": ratings.mean(axis=1).to_numpy(),
        "n_ratings": ratings.notna().sum(axis=1).to_numpy(),
    }, index=ratings.index)
    log.debug("loaded %d DSG images, %d workers from %s", len(items), ratings.shape[1], p)
    return HumanJudgments(items, ratings, (), str(p), {}, kind="likert", name="tifa160_dsg")


def _read_table(p: Path) -> pd.DataFrame:
    """The CSV as text, with the DSG rating columns."""
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: could not parse as CSV: {e}") from e
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: expected DSG rating columns {list(COLUMNS)}, missing {missing} (got {list(df.columns)})")
    return df


def _image_and_worker(row, where: str) -> tuple[str, str, str]:
    """A row's image key (``source_id`` + TIFA v1.0's generator name), its prompt (``source_id``) and worker."""
    model, source, worker = row.model_type.strip(), row.source_id.strip(), row.worker_id.strip()
    if model not in MODEL_NAMES:
        raise ValueError(f"{where}: expected model_type in {list(MODEL_NAMES)}, got {row.model_type!r}")
    if not source or not worker:
        raise ValueError(f"{where}: expected a non-empty source_id and worker_id, got {row.source_id!r}, "
                         f"{row.worker_id!r}")
    return f"{source}_{MODEL_NAMES[model]}", source, worker


def _ratings_by_image_and_worker(df: pd.DataFrame, p: Path) -> tuple[dict[tuple[str, str], float], dict[str, str]]:
    """(image key, worker) -> rating, each pair once, and image key -> prompt (``source_id``), in file order."""
    cells: dict[tuple[str, str], float] = {}
    first: dict[tuple[str, str], int] = {}
    prompts: dict[str, str] = {}
    for i, row in enumerate(df.itertuples(index=False)):
        where = f"{p}, row {i + 2}"
        key, source, worker = _image_and_worker(row, where)
        if (key, worker) in cells:
            raise ValueError(f"{where}: worker {worker!r} rated image {key!r} again (first on row "
                             f"{first[(key, worker)]}); expected one rating per worker and image")
        cells[(key, worker)] = _rating(row.answer.strip(), where)
        first[(key, worker)] = i + 2
        prompts.setdefault(key, source)
    if not cells:
        raise ValueError(f"{p}: expected at least one rating row, got none")
    return cells, prompts


def _rating_table(cells: dict[tuple[str, str], float], ids: list[str]) -> pd.DataFrame:
    """Images (``ids``, in that order) x workers (``worker_<id>``, first-seen order), NaN where a worker did not
    rate an image."""
    workers = list(dict.fromkeys(w for _, w in cells))
    mat = np.full((len(ids), len(workers)), np.nan)
    row_of = {k: i for i, k in enumerate(ids)}
    col_of = {w: j for j, w in enumerate(workers)}
    for (key, worker), x in cells.items():
        mat[row_of[key], col_of[worker]] = x
    return pd.DataFrame(mat, index=pd.Index(ids, name="item_id"), columns=[f"worker_{w}" for w in workers])
