"""Construct-validity controls ("What makes a good metric?"): metrics that must fail if the
meta-evaluation is sound, reported beside the real ones.

Metric controls: :class:`RandomScore` (``random``), :class:`ShuffledImage`
(``shuffled_image``) and :class:`ShuffledText` (``shuffled_text``), the last two wrapping any
metric. VQA controls for TIFA/DSG (:mod:`.vqa`): ``always_yes``, ``blind_qa``, ``clip_as_vqa`` and
shuffled questions. Nothing here imports torch at import time.
"""

from .random import RandomScore, item_uniform
from .shuffle import MetricWrapper, ShuffledImage, ShuffledText, shuffle_words

__all__ = ["RandomScore", "item_uniform", "MetricWrapper", "ShuffledImage", "ShuffledText", "shuffle_words",
           "AlwaysYesVQA", "BlindQA", "ClipAsVQA", "ShuffledQuestionVQA"]


def __getattr__(name: str):
    # The VQA controls import the QA package; load it only when asked for.
    if name in ("AlwaysYesVQA", "BlindQA", "ClipAsVQA", "ShuffledQuestionVQA"):
        from . import vqa

        return getattr(vqa, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
