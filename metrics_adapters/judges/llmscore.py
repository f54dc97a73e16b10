"""LLMScore-style judge: a VLM describes the image, a text LLM compares it with the prompt."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..base import Metric, MetricError, ScoreItem
from ..hub import under
from .backends import (
    DEFAULT_API_URL,
    DEFAULT_LLM,
    DEFAULT_VLM,
    ChatBackend,
    ChatRequest,
    HTTPChatBackend,
    TransformersChatBackend,
)
from .common import Outcome, PairBatch, ask_and_parse
from .parsing import ParseError, parse_judgement
from .records import AnswerLog, write_usage
from .templates import LLMSCORE_EVAL, LLMSCORE_GLOBAL, LLMSCORE_LOCAL, REMINDER_JUDGEMENT, load_template, render

__all__ = ["LLMJudge"]

log = logging.getLogger(__name__)


def _caption(text: str | None) -> str:
    if text is None or not text.strip():
        raise ParseError("expected a description, got an empty reply")
    return text.strip()


class LLMJudge(Metric):
    """Caption-then-compare judge (LLMScore): two columns, ``error_count`` and ``rating``.

    1. The ``captioner`` (a vision chat model) writes a global description and local
       descriptions (objects with attributes and positions) of the image; both are memoised per
       image, since they do not depend on the prompt.
    2. The ``evaluator`` (a text LLM) reads the descriptions and the prompt and answers
       ``{"error_count": int, "rating": 0-100, "rationale": ...}``
       (:func:`~metrics_adapters.judges.parsing.parse_judgement`), re-asked with a reminder when
       unreadable, up to ``max_attempts``; a final failure fails the image (never scored 0).

    Columns ``<name>_error_count`` (lower is better) and ``<name>_rating`` (higher is better).
    Descriptions, counts, rating and rationale go to ``answers.csv``.

    Parameters
    ----------
    name : str
    captioner : ChatBackend, optional
        Vision chat model; default LLaVA-1.5-7B through transformers.
    evaluator : ChatBackend, optional
        Text chat model (may be the same endpoint as the captioner); default ``gpt-4o-mini``
        behind the OpenAI API (LLMScore's evaluator was a GPT model), key in ``OPENAI_API_KEY``.
    global_template, local_template, eval_template : str, optional
        Prompts (``file:PATH`` allowed); the evaluation template needs ``{prompt}``,
        ``{global_description}`` and ``{local_description}``.
    rating_range : (float, float)
    max_attempts : int
    answers_dir : str, optional
    tokens_per_image : float
        Captioner + evaluator tokens per image, for the FLOPs estimate.
    """

    paper = "Lu et al. 2023, LLMScore (arXiv:2305.11116)"

    higher_is_better = True
    score_range = None
    needs_images = True
    columns = ("error_count", "rating")

    def __init__(self, name: str = "llm_judge", captioner: ChatBackend | None = None,
                 evaluator: ChatBackend | None = None, global_template: str | None = None,
                 local_template: str | None = None, eval_template: str | None = None,
                 rating_range: Sequence[float] = (0.0, 100.0), max_attempts: int = 3,
                 answers_dir: str | None = None, tokens_per_image: float = 2000.0) -> None:
        super().__init__(name)
        if captioner is None:
            captioner = TransformersChatBackend(DEFAULT_VLM, kind="vlm")
        if evaluator is None:
            evaluator = HTTPChatBackend(DEFAULT_API_URL, DEFAULT_LLM, api_key_env="OPENAI_API_KEY", vision=False)
        if not getattr(captioner, "vision", False):
            raise ValueError(f"{name}: expected a vision chat backend as captioner, got a text-only one")
        self.captioner, self.evaluator = captioner, evaluator
        self.global_template = load_template(global_template, LLMSCORE_GLOBAL)
        self.local_template = load_template(local_template, LLMSCORE_LOCAL)
        self.eval_template = load_template(eval_template, LLMSCORE_EVAL)
        render(self.eval_template, prompt="x", global_description="x", local_description="x")
        self.rating_range = (float(rating_range[0]), float(rating_range[1]))
        self.max_attempts = int(max_attempts)
        if self.max_attempts < 1:
            raise ValueError(f"{name}: expected max_attempts >= 1, got {max_attempts}")
        self.answers_dir = answers_dir
        self.tokens_per_image = float(tokens_per_image)
        self._captions: dict[str, tuple[Outcome, Outcome]] = {}
        self._memo: dict[tuple[str, str], tuple[Outcome, Outcome, Outcome]] = {}
        self._log: AnswerLog | None = None

    _FIELDS = ["error_count", "rating", "rationale", "global_description", "local_description", "reply", "error",
               "attempts"]

    def directions(self) -> dict[str, bool]:
        ec, rt = self.output_columns()
        return {ec: False, rt: True}

    def settings(self) -> dict[str, Any]:
        return {"captioner": self.captioner.settings(), "evaluator": self.evaluator.settings(),
                "global_template": self.global_template, "local_template": self.local_template,
                "eval_template": self.eval_template, "rating_range": list(self.rating_range), "parser": "judgement-v1"}

    def model_ids(self) -> dict[str, Any]:
        return {"captioner": self.captioner.model_ids(), "evaluator": self.evaluator.model_ids()}

    def hub_models(self) -> tuple[Any, ...]:
        return (*under("captioner", self.captioner.hub_models()), *under("evaluator", self.evaluator.hub_models()))

    def flops_per_image(self) -> float | None:
        p1, p2 = self.captioner.n_params(), self.evaluator.n_params()
        if p1 is None or p2 is None:
            return None
        # About two thirds of the tokens go through the captioner (two calls with the image).
        return 2.0 * self.tokens_per_image * (p1 * 2 / 3 + p2 / 3)

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.captioner.load(device, dtype)
        if self.evaluator is not self.captioner:
            self.evaluator.load(device, dtype)
        self._log = AnswerLog(self.answers_dir, self.name, self._FIELDS)

    def unload(self) -> None:
        self.captioner.unload()
        if self.evaluator is not self.captioner:
            self.evaluator.unload()

    def run_info(self) -> dict[str, Any]:
        return {"usage": {"captioner": self.captioner.usage(), "evaluator": self.evaluator.usage()}}

    def _usage(self) -> dict[str, Any]:
        return self.run_info()["usage"]

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[tuple[float, float]]:
        if self._log is None:
            self._log = AnswerLog(self.answers_dir, self.name, self._FIELDS)
        batch = PairBatch.of(items)
        todo = batch.unanswered(self._memo)
        if todo:
            self._describe(todo, batch, images)
            verdict = self._evaluate([k for k in todo if all(o.ok for o in self._captions[k[0]])])
            rows = []
            for k in todo:
                g, loc = self._captions[k[0]]
                v = verdict[k] if k in verdict else self._captioner_failure(g, loc)
                self._memo[k] = (g, loc, v)
                rows.append(batch.log_row(items, k, **self._answer_fields(g, loc, v)))
            self._log.write(rows)
            write_usage(self.answers_dir, self.name, self._usage())
        failed = [(k, self._memo[k][2]) for k in batch.distinct() if not self._memo[k][2].ok]
        if failed:
            raise MetricError.for_items([(k[0], str(o.error)) for k, o in failed])
        return [(float(self._memo[k][2].value.error_count), float(self._memo[k][2].value.rating))
                for k in batch.keys]

    def _describe(self, todo: Sequence[tuple[str, str]], batch: PairBatch, images: Sequence[Any]) -> None:
        """Caption (global and local) each image of ``todo`` not described yet; memoised per image,
        since the descriptions do not depend on the prompt."""
        need = [f for f in dict.fromkeys(k[0] for k in todo) if f not in self._captions]
        if not need:
            return
        img_of = {k[0]: images[batch.first[k]] for k in todo}
        reqs = [ChatRequest(t, (img_of[f],)) for f in need for t in (self.global_template, self.local_template)]
        outs = ask_and_parse(self.captioner, reqs, _caption, "", self.max_attempts)
        for j, f in enumerate(need):
            self._captions[f] = (outs[2 * j], outs[2 * j + 1])

    def _evaluate(self, ready: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Outcome]:
        """The evaluator's judgement of each described (image, prompt) pair."""
        if not ready:
            return {}
        reqs = [ChatRequest(render(self.eval_template, prompt=k[1],
                                   global_description=self._captions[k[0]][0].value,
                                   local_description=self._captions[k[0]][1].value)) for k in ready]
        outs = ask_and_parse(self.evaluator, reqs, lambda t: parse_judgement(t, self.rating_range),
                             REMINDER_JUDGEMENT, self.max_attempts)
        return dict(zip(ready, outs, strict=True))

    @staticmethod
    def _answer_fields(g: Outcome, loc: Outcome, v: Outcome) -> dict[str, Any]:
        """What ``answers.csv`` records for a pair: verdict, both descriptions, last reply, error."""
        return {"error_count": v.logged("error_count"), "rating": v.logged("rating"),
                "rationale": v.logged("reason"), "global_description": g.value or "",
                "local_description": loc.value or "", "reply": v.reply or "", "error": v.error or "",
                "attempts": v.attempts}

    @staticmethod
    def _captioner_failure(g: Outcome, loc: Outcome) -> Outcome:
        """The verdict of a pair whose image could not be described: the first failed caption's error."""
        bad = g if not g.ok else loc
        return Outcome(None, None, f"captioner failed: {bad.error}", bad.attempts)
