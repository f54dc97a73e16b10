"""VIEScore-style VLM judge: a vision chat model rates prompt following on 0-10 with a rubric."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..base import Metric, MetricError, ScoreItem
from ..hub import under
from .backends import DEFAULT_VLM, ChatBackend, ChatRequest, TransformersChatBackend
from .common import Outcome, PairBatch, ask_and_parse
from .parsing import parse_rating
from .records import AnswerLog, write_usage
from .templates import REMINDER_RATING, VIESCORE_SC, load_template, render

__all__ = ["VLMJudge"]

log = logging.getLogger(__name__)


class VLMJudge(Metric):
    """Semantic-consistency rating of (prompt, image) by a vision chat model (VIEScore SC).

    The rubric (:data:`~metrics_adapters.judges.templates.VIESCORE_SC` by default) asks for
    ``{"score": 0-10, "reason": ...}``. Replies are parsed strictly
    (:func:`~metrics_adapters.judges.parsing.parse_rating`: JSON, else a bare number); an
    unreadable reply is asked again with a reminder of the format, up to ``max_attempts``; an
    image whose judge never gives a readable score fails with the reason (recorded by the
    engine as a failure, never scored 0). Score, reason and raw reply of every image go to
    ``answers.csv`` in ``answers_dir``.

    Parameters
    ----------
    name : str
        Score column.
    backend : ChatBackend, optional
        A vision chat model (:class:`~metrics_adapters.judges.backends.HTTPChatBackend` or
        :class:`~metrics_adapters.judges.backends.TransformersChatBackend` with ``kind: vlm``).
        Default: LLaVA-1.5-7B through transformers (VIEScore's backbone in the TS2 paper).
    template : str, optional
        Rubric with a ``{prompt}`` placeholder (or ``file:PATH``); default VIESCORE_SC.
    scale : (float, float)
        The rubric's range (scores outside it are unreadable replies).
    max_attempts : int
        Requests per image at most (first ask + re-asks).
    allow_bare_number : bool
        Accept a reply that is only a number (``"7"``, ``"7/10"``).
    answers_dir : str, optional
        Where ``answers.csv`` and ``usage_<name>.json`` go (the run's output folder).
    tokens_per_image : float
        Tokens per call for the FLOPs estimate (prompt + image tokens + reply); LLaVA-1.5 spends
        576 tokens on an image.
    """

    paper = "Ku et al. 2024, VIEScore (arXiv:2312.14867)"

    higher_is_better = True
    score_range = (0.0, 10.0)
    needs_images = True

    def __init__(self, name: str = "vlm_judge", backend: ChatBackend | None = None, template: str | None = None,
                 scale: Sequence[float] = (0.0, 10.0), max_attempts: int = 3, allow_bare_number: bool = True,
                 answers_dir: str | None = None, tokens_per_image: float = 800.0) -> None:
        super().__init__(name)
        if backend is None:
            backend = TransformersChatBackend(DEFAULT_VLM, kind="vlm")
        if not getattr(backend, "vision", False):
            raise ValueError(f"{name}: expected a vision chat backend for the VLM judge, got a text-only one")
        self.backend = backend
        self.template = load_template(template, VIESCORE_SC)
        render(self.template, prompt="x")  # fail now if the template lost its {prompt}
        self.scale = (float(scale[0]), float(scale[1]))
        if not self.scale[0] < self.scale[1]:
            raise ValueError(f"{name}: expected scale (lo, hi) with lo < hi, got {tuple(scale)}")
        self.score_range = self.scale
        self.max_attempts = int(max_attempts)
        if self.max_attempts < 1:
            raise ValueError(f"{name}: expected max_attempts >= 1, got {max_attempts}")
        self.allow_bare_number = bool(allow_bare_number)
        self.answers_dir = answers_dir
        self.tokens_per_image = float(tokens_per_image)
        self._memo: dict[tuple[str, str], Outcome] = {}
        self._log: AnswerLog | None = None

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend.settings(), "template": self.template, "scale": list(self.scale),
                "allow_bare_number": self.allow_bare_number, "parser": "rating-v1"}

    def model_ids(self) -> dict[str, Any]:
        return self.backend.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        return under("backend", self.backend.hub_models())

    def flops_per_image(self) -> float | None:
        p = self.backend.n_params()
        return None if p is None else 2.0 * p * self.tokens_per_image

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.backend.load(device, dtype)
        self._log = AnswerLog(self.answers_dir, self.name, ["score", "reason", "reply", "error", "attempts"])

    def unload(self) -> None:
        self.backend.unload()

    def run_info(self) -> dict[str, Any]:
        """Token usage and estimated cost so far (for ``run.json``)."""
        return {"usage": self.backend.usage()}

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if self._log is None:
            self._log = AnswerLog(self.answers_dir, self.name, ["score", "reason", "reply", "error", "attempts"])
        batch = PairBatch.of(items)
        todo = batch.unanswered(self._memo)
        if todo:
            reqs = [ChatRequest(render(self.template, prompt=k[1]), (images[batch.first[k]],)) for k in todo]
            outcomes = ask_and_parse(self.backend, reqs,
                                     lambda t: parse_rating(t, *self.scale, allow_bare_number=self.allow_bare_number),
                                     REMINDER_RATING, self.max_attempts)
            rows = []
            for k, o in zip(todo, outcomes, strict=True):
                self._memo[k] = o
                rows.append(batch.log_row(items, k, score=o.logged("score"), reason=o.logged("reason"),
                                          reply=o.reply or "", error=o.error or "", attempts=o.attempts))
            self._log.write(rows)
            write_usage(self.answers_dir, self.name, self.backend.usage())
        failed = [(k, self._memo[k]) for k in batch.distinct() if not self._memo[k].ok]
        if failed:
            # The engine then scores item by item: the memo answers the good ones without a new
            # call and each bad one fails alone, with its reason.
            raise MetricError.for_items([(k[0], f"{o.error} (after {o.attempts} attempt(s))") for k, o in failed])
        return [float(self._memo[k].value.score) for k in batch.keys]
