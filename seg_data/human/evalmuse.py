"""EvalMuse-40K (Han et al., 2024): generated images with each rater's overall 1-5 alignment score and element labels.

The label file ``train_list.json`` of the hub dataset ``DY-Evalab/EvalMuse`` is one JSON list with
one object per image; :func:`seg_data.labels.evalmuse.read_evalmuse` reads and checks it (the
format and its quirks are documented there) and this module turns the same records into the human
view. The element labels build SEGs instead (``ts2 data from-labels format=evalmuse``, see
docs/labels.md); here they give each image its *categories*.

An item is one image, id = its ``img_path``; the prompt is the group (its id is the prompt's index
in order of first appearance, the same index ``from-labels`` gives the prompt's SEG); ``human`` is
the mean of ``total_score``, one rating per annotation slot (the release does not say which person
gave which, so the raters are the slots ``r0``, ``r1``, ...). Categories: ``element=<category>``
for each element category the image's prompt holds (``element=counting``, ``element=color``, ...),
the EvalMuse paper's per-category breakdown, and ``generator=<model>`` where a record names its
model. The release carries no metric scores: pass them with ``human_scores=`` (a score CSV keyed by
``image``, i.e. the ``img_path``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..labels.evalmuse import HF_REPO_ID, LABEL_FILE, read_evalmuse
from .base import HumanJudgments, slot_ratings
from .registry import HumanSetFamily, Sniff

log = logging.getLogger(__name__)

FAMILY = HumanSetFamily(
    name="evalmuse", title="EvalMuse-40K", kind="likert",
    file_format="train_list.json: [{prompt, img_path, total_score: [1-5 per rater], "
                "element_score: \"{'words (category)': [0/1 per rater]}\", ...}]",
    size="about 40K images of 4K prompts, overall 1-5 scores per rater, 1M+ element labels (paper)",
    license="BSD-3-Clause (DY-Evalab/EvalMuse card)",
    get=f"hub {HF_REPO_ID} ({LABEL_FILE}); metric scores: human_scores= a score CSV keyed by image (img_path)",
    hub_repo=HF_REPO_ID, hub_files=(LABEL_FILE,),
    raters="annotation slots (one overall score per rater)",
)


def detect(sniff: Sniff) -> bool:
    if sniff.is_dir:
        return LABEL_FILE in sniff.names
    rec = sniff.first_record()
    return isinstance(sniff.data, list) and isinstance(rec, dict) and "element_score" in rec and "img_path" in rec


def load(path: str | Path) -> HumanJudgments:
    """Read EvalMuse's ``train_list.json`` (or the folder holding it) into the human view, module docstring.

    Raises
    ------
    FileNotFoundError
        No ``train_list.json``.
    seg_data.labels.LabelFormatError
        (a ValueError) Any record :func:`~seg_data.labels.evalmuse.read_evalmuse` refuses, or one
        without ``total_score`` (the human view needs the overall scores), or with a score outside
        1-5; the message names the file, record and image.
    """
    from ..labels.records import LabelFormatError

    p = Path(path)
    label_file = p / LABEL_FILE if p.is_dir() else p
    records = read_evalmuse(label_file)
    if not records:
        raise LabelFormatError(f"{label_file}: expected at least one image record, got an empty list")
    prompt_index: dict[str, int] = {}
    ratings, rows, cats = [], [], []
    for r in records:
        if not r.overall:
            raise LabelFormatError(f"{r.where}: expected 'total_score' (each rater's overall 1-5 score) for the "
                                   f"human view, got none")
        bad = [v for v in r.overall if not 1 <= v <= 5]
        if bad:
            raise LabelFormatError(f"{r.where}: expected 'total_score' values from 1 to 5, got {bad[0]!r}")
        pid = prompt_index.setdefault(r.prompt, len(prompt_index))
        ratings.append(r.overall)
        rows.append({"prompt_id": str(pid), "prompt": r.prompt, "image": r.image,
                     "human": float(np.mean(r.overall)), "n_ratings": len(r.overall)})
        cats.append({f"element={c}" for c in r.categories.values() if c}
                    | ({f"generator={r.generator}"} if r.generator else set()))
    index = pd.Index([r.image for r in records], name="item_id")
    items = pd.DataFrame(rows, index=index)
    names = sorted(set().union(*cats))
    categories = pd.DataFrame({n: [n in c for c in cats] for n in names}, index=index, dtype=bool)
    log.debug("loaded %d EvalMuse images, %d prompts, %d categories from %s", len(items), len(prompt_index),
              len(names), label_file)
    return HumanJudgments(items, slot_ratings(ratings, index), (), str(label_file), {}, kind="likert",
                          categories=categories, name="evalmuse")
