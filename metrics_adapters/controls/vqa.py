"""Control VQA backends for the QG/A metrics (TIFA, DSG), from "What makes a good metric?".

Plug any of them into a QA metric as ``metric.vqa``:

- :class:`AlwaysYesVQA`: answers "yes" to yes/no questions and the first choice otherwise,
  without looking at the image or reading the question (section 3.4: question generators put
  the expected answer first / make it "yes", so this "program of a few lines" scores high);
- :class:`BlindQA`: a text-only language model answers from the question and choices alone
  (ablation 4, ``"Question: {question} Choices: {choices} Answer:"``);
- :class:`ClipAsVQA`: each choice is scored as the caption ``"{question}? {choice}"`` against
  the image by an embedding metric (CLIPScore, ...), the best caption's choice is the answer
  (ablation 3);
- :class:`ShuffledQuestionVQA`: wraps any backend and shuffles the words of each question
  before it is asked (ablation 2 for QA metrics).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..base import Metric, ScoreItem
from ..hub import under
from ..qa.vqa import VQABackend, VQAError, VQARequest, format_prompt
from .shuffle import _instantiate, shuffle_words

__all__ = ["AlwaysYesVQA", "BlindQA", "ClipAsVQA", "ShuffledQuestionVQA"]

log = logging.getLogger(__name__)


def _yes_no(choices: Sequence[str] | None) -> bool:
    return choices is None or {c.strip().lower() for c in choices} == {"yes", "no"}


class AlwaysYesVQA(VQABackend):
    """Answers ``"yes"`` (yes/no or open questions) or the first listed choice; never looks.

    Its scores are a function of the question set alone, hence constant within a SEG (one
    prompt, one question set): a sound meta-evaluation must give it rank_m 0.
    """

    role = "control"  # a QA metric answering through it is a control (QAMetric reads this)

    needs_images = False
    cacheable = False  # nothing to save: answering is free

    def __init__(self, batch_size: int = 1 << 16) -> None:
        super().__init__(template="{question}", batch_size=batch_size)

    def settings(self) -> dict[str, Any]:
        return {"control": "always_yes/1"}

    def n_params(self) -> float | None:
        return 0.0

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        return ["yes" if _yes_no(r.choices) else r.choices[0] for r in requests]


class BlindQA(VQABackend):
    """A text-only LM answers each question from its text and choices, without the image.

    Parameters
    ----------
    lm : LMBackend or config
        Any question-generation LM backend of :mod:`metrics_adapters.qa.generation`
        (``HFCausalLM``, ``OpenAIChatLM``, ``CallableLM``): its ``complete`` gets the filled
        template.
    template : str
        ``{question}`` and ``{choices}`` (comma-joined); default the paper's Flan-T5 format.
    batch_size : int
    """

    role = "control"  # a QA metric answering through it is a control (QAMetric reads this)

    needs_images = False

    def __init__(self, lm: Any = None, template: str = "Question: {question} Choices: {choices} Answer:",
                 batch_size: int = 16) -> None:
        super().__init__(template=template, batch_size=batch_size)
        if lm is None:
            raise ValueError("BlindQA: expected a text LM backend (vqa.lm=...), got none")
        if not hasattr(lm, "complete"):
            from hydra.utils import instantiate

            lm = instantiate(lm)
        self.lm = lm

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "lm": self.lm.fingerprint(), "control": "blind_qa/1"}

    def model_ids(self) -> dict[str, Any]:
        return {f"blind_{k}": v for k, v in self.lm.model_ids().items()}

    def hub_models(self) -> tuple[Any, ...]:
        return under("lm", self.lm.hub_models())

    def n_params(self) -> float | None:
        return self.lm.n_params()

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.lm.load(device, dtype)
        self.device = device

    def unload(self) -> None:
        self.lm.unload()

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        prompts = [format_prompt(self.template, r.question, r.choices) for r in requests]
        outs = self.lm.complete(prompts, attempt=0)
        res: list[str | VQAError] = []
        for r, o in zip(requests, outs, strict=True):
            if isinstance(o, Exception):
                res.append(VQAError(f"blind QA model failed on {r.question!r}: {type(o).__name__}: {o}"))
            else:
                # Completion models run on past the answer: keep its first line.
                lines = [ln.strip() for ln in str(o).strip().splitlines() if ln.strip()]
                res.append(lines[0] if lines else "")
        return res


class ClipAsVQA(VQABackend):
    """Answers by embedding similarity: the choice whose caption ``"{question}? {choice}"``
    scores highest with the image under ``embedding`` (ties: the earlier choice).

    Parameters
    ----------
    embedding : Metric or config
        An image-text embedding metric (``clipscore``, ``clipscore_hf``, ``siglip``, ...).
    template : str
        Caption per choice, with ``{question}`` (its trailing ``?`` removed) and ``{choice}``.
    batch_size : int
        Questions per call (each expands to one caption per choice).
    """

    role = "control"  # a QA metric answering through it is a control (QAMetric reads this)

    def __init__(self, embedding: Metric | Any = None, template: str = "{question}? {choice}",
                 batch_size: int = 16) -> None:
        super().__init__(template=template, batch_size=batch_size)
        self.embedding = _instantiate(embedding, "embedding")
        if self.embedding is None:
            raise ValueError("ClipAsVQA: expected an embedding metric (vqa.embedding=...), got none")
        if len(self.embedding.output_columns()) != 1:
            raise ValueError(f"ClipAsVQA: expected a one-column embedding metric, got {self.embedding.output_columns()}")

    @property
    def uses_choices(self) -> bool:
        return True  # the answer is always one of the choices: they key the answer cache

    def settings(self) -> dict[str, Any]:
        return {"template": self.template, "embedding": self.embedding.fingerprint(), "control": "clip_as_vqa/1"}

    def model_ids(self) -> dict[str, Any]:
        return {f"clip_as_vqa_{k}": v for k, v in self.embedding.model_ids().items()}

    def hub_models(self) -> tuple[Any, ...]:
        return under("embedding", self.embedding.hub_models())

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.embedding.load(device, dtype)
        self.device = device

    def unload(self) -> None:
        self.embedding.unload()

    def caption(self, question: str, choice: str) -> str:
        return self.template.replace("{question}", question.strip().rstrip("?").strip()).replace("{choice}", choice)

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        items, imgs, spans = [], [], []
        for k, r in enumerate(requests):
            if r.image is None:
                raise VQAError(f"ClipAsVQA: expected an image for question {r.question!r} (image {r.image_id}), got none")
            choices = tuple(r.choices) if r.choices else ("yes", "no")
            start = len(items)
            for c in choices:
                items.append(ScoreItem(str(r.seg_id), "", str(r.image_id or k), self.caption(r.question, c)))
                imgs.append(r.image)
            spans.append((start, choices))
        sims = list(self.embedding.score_batch(items, imgs))
        out: list[str | VQAError] = []
        for start, choices in spans:
            vals = [float(sims[start + j]) for j in range(len(choices))]
            out.append(choices[max(range(len(choices)), key=lambda j: (vals[j], -j))])
        return out


class ShuffledQuestionVQA(VQABackend):
    """Asks ``inner`` each question with its words shuffled (seeded per question text)."""

    role = "control"  # a QA metric answering through it is a control (QAMetric reads this)

    def __init__(self, inner: Any = None, seed: int = 0) -> None:
        if inner is None:
            raise ValueError("ShuffledQuestionVQA: expected an inner VQA backend (vqa.inner=...), got none")
        if not isinstance(inner, VQABackend):
            from hydra.utils import instantiate

            inner = instantiate(inner)
        super().__init__(template=inner.template, batch_size=inner.batch_size)
        self.inner = inner
        self.seed = int(seed)
        self.needs_images = inner.needs_images
        self.cacheable = inner.cacheable

    @property
    def uses_choices(self) -> bool:
        return self.inner.uses_choices

    def settings(self) -> dict[str, Any]:
        return {"inner": self.inner.fingerprint(), "seed": self.seed, "control": "shuffled_question/1"}

    def model_ids(self) -> dict[str, Any]:
        return self.inner.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        return under("inner", self.inner.hub_models())

    def n_params(self) -> float | None:
        return self.inner.n_params()

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.inner.load(device, dtype)
        self.device = device

    def unload(self) -> None:
        self.inner.unload()

    def _answer_batch(self, requests: list[VQARequest]) -> list[str | VQAError]:
        from dataclasses import replace

        return self.inner.answer([replace(r, question=shuffle_words(r.question, self.seed)) for r in requests])
