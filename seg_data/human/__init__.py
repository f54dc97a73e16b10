"""Human-judgment sets: images of prompts judged by people, with automatic metric scores, in one record.

Every family of sets (TIFA v1.0, TIFA160 with per-rater ratings, SeeTRUE, GenAI-Bench,
T2I-Eval-Bench, HPDv2 test, ImageRewardDB, ts2's own CSV) is read by one module of this package
into the same :class:`HumanJudgments` (items, per-rater ratings, prompt groups, metric scores,
categories); :mod:`.registry` finds the family of a path or a name and loads sets from the hub.

Modules: :mod:`.base` the record and ts2's two formats (TIFA v1.0 JSON, our CSV); :mod:`.registry`
the families; :mod:`.scores` metric scores joined by item; one module per family.

This package imports neither torch nor any other package of the project but :mod:`seg_data`.
"""

from .base import (
    CSV_REQUIRED_COLUMNS,
    KINDS,
    TIFA_METRIC_LABELS,
    TIFA_REQUIRED_KEYS,
    HumanJudgments,
    human_from_frame,
    load_human_csv,
    load_tifa_json,
    make_synthetic_human,
    save_human_csv,
)
from .registry import (
    HUMAN_SETS,
    HumanSetFamily,
    families,
    family,
    fetch_human_set,
    load_human,
    load_human_set,
    resolve_human,
)
from .scores import attach_scores, read_scores

__all__ = [
    "HumanJudgments", "KINDS", "load_human", "load_human_set", "load_tifa_json", "load_human_csv", "human_from_frame",
    "save_human_csv", "make_synthetic_human", "TIFA_METRIC_LABELS", "TIFA_REQUIRED_KEYS", "CSV_REQUIRED_COLUMNS",
    "HUMAN_SETS", "HumanSetFamily", "family", "families", "resolve_human", "fetch_human_set",
    "attach_scores", "read_scores",
]
