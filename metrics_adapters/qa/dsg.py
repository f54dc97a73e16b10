"""Davidsonian Scene Graph score (Cho et al., 2024): yes/no questions on a dependency DAG.

A question counts as satisfied only if it and all its ancestors were answered "yes"
(transitive parent gating, as in the released TS2 scores); the score is the satisfied fraction.
``accumulation="tifa"`` ignores the graph (the paper's Table 3 ablation).
"""

from __future__ import annotations

from typing import ClassVar

from .metric import QAMetric

__all__ = ["DSGScore"]


class DSGScore(QAMetric):
    """DSG score in [0, 1], higher is better. See :class:`~.metric.QAMetric` for the parameters.

    Defaults: questions from ``dsg_questions.csv``; DSG-style generation; DSG accumulation;
    FLOPs with 40 generator and 15 VQA tokens per question (TS2 A.3).
    """

    paper = "Cho et al. 2024, Davidsonian Scene Graph (arXiv:2310.18235)"

    kind: ClassVar[str] = "dsg"
    default_accumulation: ClassVar[str] = "dsg"
    default_questions_file: ClassVar[str] = "dsg_questions.csv"
    default_question_tokens: ClassVar[float] = 40.0
    default_vqa_tokens: ClassVar[float] = 15.0
