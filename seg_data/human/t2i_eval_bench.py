"""T2I-Eval-Bench (Tu et al., 2024, "Automatic Evaluation for Text-to-image Generation: Task-decomposed
Framework, Distilled Training, and Meta-evaluation Benchmark"): three annotators' scores per image.

The hub release ``DataHammer/T2I-Eval-Bench`` holds ``scores.json``, ``t2i-eval-bench.json`` and the
images. They are read as the authors' evaluation code reads them (``src/utils/calc_correlation.py``
and ``src/inference/inference_engine.py`` of github.com/maziao/T2I-Eval):

``scores.json``
    a list of records, one per image::

        [{"id": "0", "overall": {"appearance": {"score": 4.0, "manual_score": [4, 3, 4, 3.67]},
                                 "intrinsic": {...}, "relationship": {...},
                                 "overall": {"score": 3.5, "manual_score": [3, 4, 4, 3.67]}}}, ...]

    ``manual_score`` holds the three annotators' scores and their mean (the fourth entry, the
    paper's "Manual-Avg."); ``score`` is the GPT-4o score of the authors' pipeline, a released
    metric (column ``t2i_eval_gpt4o``). The human judgment read is the ``overall`` aspect.
``t2i-eval-bench.json`` (optional)
    a list of samples ``{"id", "gt_image", "image_caption", ...}``: the image path and the text
    the image was generated from (the prompt, and the group of within-prompt statistics). Without
    it every image is its own group.

``load`` takes the folder holding the files or ``scores.json`` itself.
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
    name="t2i_eval_bench", title="T2I-Eval-Bench", kind="likert",
    file_format="scores.json: [{id, overall: {<aspect>: {score, manual_score: [a1, a2, a3, mean]}}}]; "
                "t2i-eval-bench.json: [{id, gt_image, image_caption, ...}]",
    size="as released (scores.json 1.0 MB): every image scored by 3 annotators on 4 aspects",
    license="MIT (hub card)",
    get="hub DataHammer/T2I-Eval-Bench (scores.json, t2i-eval-bench.json)",
    hub_repo="DataHammer/T2I-Eval-Bench", hub_files=("scores.json", "t2i-eval-bench.json"),
    raters="3 annotators",
)

SCORES = "scores.json"
SAMPLES = "t2i-eval-bench.json"
ASPECT = "overall"


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return SCORES in sniff.names and SAMPLES in sniff.names
    rec = sniff.first_record()
    return isinstance(sniff.data, list) and isinstance(rec, dict) and isinstance(rec.get("overall"), dict)


def _read_json(p: Path):
    return read_json(p, f"T2I-Eval-Bench's {p.name}")


def _is_score(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _record(where: str, rec) -> tuple[str, list[float], float]:
    """``(id, the annotators' scores, the released pipeline score)`` of one scores.json record."""
    if not isinstance(rec, dict) or "id" not in rec or not isinstance(rec.get("overall"), dict):
        raise ValueError(f"{where}: expected an object with 'id' and an 'overall' object of aspects, got "
                         f"{sorted(rec) if isinstance(rec, dict) else rec!r}")
    aspect = rec["overall"].get(ASPECT)
    manual = aspect.get("manual_score") if isinstance(aspect, dict) else None
    if not isinstance(manual, list) or len(manual) < 2 or not all(_is_score(v) for v in manual):
        raise ValueError(f"{where}: expected overall.{ASPECT}.manual_score to be a list of annotator scores and "
                         f"their mean, got {manual!r}")
    annot = [float(v) for v in manual[:-1]]
    if not math.isclose(float(np.mean(annot)), float(manual[-1]), abs_tol=0.01):
        # The release's own mean is not used (the annotators' scores are); say so rather than stop.
        log.warning("%s: the last manual_score entry %r is not the annotators' mean %.4f", where, manual[-1],
                    float(np.mean(annot)))
    score = aspect.get("score")
    return str(rec["id"]), annot, float(score) if _is_score(score) else math.nan


def _samples(p: Path) -> dict[str, dict]:
    if not p.is_file():
        log.info("%s: not found, T2I-Eval-Bench is read without prompts (each image its own group)", p)
        return {}
    data = _read_json(p)
    if not isinstance(data, list):
        raise ValueError(f"{p}: expected a list of samples, got {type(data).__name__}")
    out = {}
    for i, rec in enumerate(data):
        if not isinstance(rec, dict) or "id" not in rec:
            raise ValueError(f"{p}, record {i}: expected an object with an 'id', got {rec!r:.80}")
        out[str(rec["id"])] = rec
    return out


def load(path: str | Path) -> HumanJudgments:
    """Read T2I-Eval-Bench's ``scores.json`` (+ ``t2i-eval-bench.json`` beside it), module docstring.

    Raises
    ------
    FileNotFoundError
        No ``scores.json``.
    ValueError
        Not JSON, not a list, a record without ``id`` or the ``overall`` aspect's manual scores,
        an id twice (message names the file and record).
    """
    p = Path(path)
    scores_file = p / SCORES if p.is_dir() else p
    data = _read_json(scores_file)
    if not isinstance(data, list) or not data:
        raise ValueError(f"{scores_file}: expected a non-empty list of scored images, got {type(data).__name__}")
    samples = _samples(scores_file.parent / SAMPLES)
    ids, annots, gpt = [], [], []
    for i, rec in enumerate(data):
        rid, annot, score = _record(f"{scores_file}, record {i}", rec)
        ids.append(rid)
        annots.append(annot)
        gpt.append(score)
    index = pd.Index(ids, name="item_id")
    if not index.is_unique:
        raise ValueError(f"{scores_file}: expected unique ids, got {index[index.duplicated()][0]!r} twice")
    ratings = slot_ratings(annots, index, prefix="annotator_", start=1)
    caption = [str(samples.get(k, {}).get("image_caption", "")) for k in ids]
    items = pd.DataFrame({
        "prompt_id": [c if c else f"image:{k}" for k, c in zip(ids, caption, strict=True)],
        "prompt": caption,
        "image": [str(samples.get(k, {}).get("gt_image", "")) for k in ids],
        "human": ratings.mean(axis=1).to_numpy(),
        "n_ratings": ratings.notna().sum(axis=1).to_numpy(),
        "t2i_eval_gpt4o": gpt,
    }, index=index)
    metrics = ("t2i_eval_gpt4o",) if np.isfinite(items["t2i_eval_gpt4o"]).any() else ()
    if not metrics:
        items = items.drop(columns="t2i_eval_gpt4o")
    return HumanJudgments(items, ratings, metrics, str(scores_file), {"t2i_eval_gpt4o": "T2I-Eval (GPT-4o)"},
                          kind="likert", name="t2i_eval_bench")
