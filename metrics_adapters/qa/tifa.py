"""TIFA (Hu et al., 2023): multiple-choice and yes/no questions, fraction answered correctly.

.. math:: \\text{tifa}(p, i) = \\frac{1}{|Q|} \\sum_{(q, a) \\in Q} \\mathbb{1}[M_B(M_{VL}(i, q)) = a]

(TS2 eq. 7): a VQA model :math:`M_{VL}` answers each question freely, the matcher :math:`M_B`
maps the answer onto a choice (exact match, else SBERT ``all-mpnet-base-v2``).
"""

from __future__ import annotations

from typing import ClassVar

from .metric import QAMetric

__all__ = ["TIFAScore"]


class TIFAScore(QAMetric):
    """TIFA score in [0, 1], higher is better. See :class:`~.metric.QAMetric` for the parameters.

    Defaults: questions from ``tifa_questions.csv``; TIFA-style generation; TIFA accumulation
    (``accumulation="dsg"`` gates by the dependency graph, which TIFA question sets do not
    have, so it gives the same score); FLOPs with 40 generator and 20 VQA tokens per question.
    """

    paper = "Hu et al. 2023, TIFA (arXiv:2303.11897)"

    kind: ClassVar[str] = "tifa"
    default_accumulation: ClassVar[str] = "tifa"
    default_questions_file: ClassVar[str] = "tifa_questions.csv"
    default_question_tokens: ClassVar[float] = 40.0
    default_vqa_tokens: ClassVar[float] = 20.0
