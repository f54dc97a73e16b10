"""VQAScore (Lin et al. 2024): the probability a generative VQA model gives to "Yes".

``score = P("Yes" | image, template(prompt))`` with the default question of t2v_metrics,
``Does this figure show "{prompt}"? Please answer yes or no.`` One forward pass per image, no
generation, no answer matching.

Which probability, exactly
--------------------------
At the FIRST answer position (decoder-only models: the last real input position, after the
chat template's generation prompt; encoder-decoder models: the first decoder step, fed the
decoder start token), the logits over the FULL vocabulary go through a softmax, and the
probabilities of the "Yes" token ids are summed. The "Yes" token ids are found from
``yes_words`` (default ``["Yes"]``): for each word ``w``, the first token of the tokenizer's
encoding of ``w`` and of ``" " + w`` (without special tokens), each kept only if that one token
decodes, stripped and case-folded, to ``w`` case-folded. The two spellings cover tokenizers that
mark a preceding space in the token (SentencePiece ``▁Yes``, byte-level BPE ``ĠYes``) and those
that do not; the decode check drops a bare space piece (``▁``). ``yes_words: [Yes, yes]`` counts
both cases. t2v_metrics instead scores the whole answer sequence ("Yes" plus, for T5, the
end-of-sequence token); where "Yes" is one token this differs from ours only by that final
``P(</s> | Yes)`` factor.

Backends: any with ``answer_logprobs(images, questions, candidates)`` (:mod:`.logprobs`: BLIP,
InstructBLIP, LLaVA-style chat models, Fuyu), which computes exactly this position and softmax for
the first token of each candidate; the candidates passed are the "Yes" spellings found here.
Models are loaded by the backends' own ``load``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..base import Metric, MetricError, ScoreItem, check_prompt_template
from ..embedding.base import local_signature
from ..hub import under
from .vqa import InstructBlipVQA, VQABackend, VQARequest, format_prompt

__all__ = ["DEFAULT_TEMPLATE", "VQAScore", "yes_spellings", "yes_token_ids"]

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = 'Does this figure show "{prompt}"? Please answer yes or no.'
# Backend settings that change generated answers but not a forward pass's logits.
_DECODING_KEYS = ("max_new_tokens", "num_beams", "decoding")


def yes_spellings(tokenizer, words: Sequence[str]) -> dict[str, int]:
    """Spelling -> token id of the tokens counted as "Yes" (see the module docstring for the rule).

    One spelling per distinct id (an uncased vocabulary maps "Yes" and " Yes" to one ``yes``), so
    no probability is counted twice.

    Raises
    ------
    ValueError
        If no spelling of any word is a single token of ``tokenizer``.

    Examples
    --------
    With an uncased WordPiece vocabulary "Yes" and " Yes" both give the token ``yes``;
    with a SentencePiece one, ``▁Yes``.
    """
    found: dict[str, int] = {}
    for w in words:
        for spelling in (w, " " + w):
            enc = tokenizer(spelling, add_special_tokens=False)["input_ids"]
            if not enc:
                continue
            first = int(enc[0])
            if tokenizer.decode([first]).strip().casefold() == w.strip().casefold() and first not in found.values():
                found[spelling] = first
    if not found:
        raise ValueError(f"expected at least one of {list(words)} to be a single token of "
                         f"{type(tokenizer).__name__}, got none")
    return found


def yes_token_ids(tokenizer, words: Sequence[str]) -> list[int]:
    """The token ids counted as "Yes" (:func:`yes_spellings`' values)."""
    return list(yes_spellings(tokenizer, words).values())


def _tokenizer_of(backend: VQABackend):
    chat = getattr(backend, "chat", None)  # backends on the shared chat-model layer
    tok = getattr(chat, "tokenizer", None) if chat is not None else None
    if tok is None:
        proc = getattr(backend, "_proc", None)
        tok = getattr(proc, "tokenizer", proc)
    if tok is None:
        raise TypeError(f"VQAScore: cannot find the tokenizer of {type(backend).__name__}")
    return tok


def _is_generative(backend: VQABackend) -> bool:
    return callable(getattr(backend, "answer_logprobs", None))


class VQAScore(Metric):
    """P("Yes") of a generative VQA backend to ``template.format(prompt=...)``.

    Parameters
    ----------
    name : str
        Column name.
    vqa : VQABackend or None
        A generative backend, one with ``answer_logprobs`` (``conf/metric.vqa``: ``blip``,
        ``instructblip``, ``llava``, ``llava_alt``, ``fuyu``);
        ``None``: InstructBLIP flan-t5-xl.
    template : str
        The question; must contain ``{prompt}``. The backend's own ``template`` then wraps it in
        its VQA prompt format (InstructBLIP: ``"Question: {question} Short answer:"``).
    yes_words : list of str
        Words whose first tokens count as "Yes" (module docstring).
    input_tokens : float or None
        Tokens per forward pass for the FLOPs estimate; ``None``: the mean number of text tokens
        of the backend-formatted questions asked (image tokens not counted, as TS2 A.3 prices
        VQA calls by their text; set this to include them).
    """

    higher_is_better: ClassVar[bool] = True
    score_range: ClassVar[tuple[float, float] | None] = (0.0, 1.0)
    family: ClassVar[str] = "vqascore"
    paper: ClassVar[str] = "Lin et al. 2024, Evaluating Text-to-Visual Generation with Image-to-Text Generation " \
                           "(VQAScore, arXiv:2404.01291)"

    def __init__(self, name: str = "vqascore", vqa: VQABackend | None = None, template: str = DEFAULT_TEMPLATE,
                 yes_words: Sequence[str] = ("Yes",), input_tokens: float | None = None) -> None:
        super().__init__(name)
        check_prompt_template(name, template)
        self.template = str(template)
        self.vqa = vqa if vqa is not None else InstructBlipVQA()
        if not _is_generative(self.vqa):
            raise TypeError(f"{name}: expected a generative VQA backend (one with answer_logprobs: BlipVQA, "
                            f"InstructBlipVQA, ChatVQA, FuyuVQA), got {type(self.vqa).__name__}")
        if isinstance(yes_words, str) or not yes_words or not all(isinstance(w, str) and w.strip() for w in yes_words):
            raise ValueError(f"{name}: expected yes_words as a non-empty list of words, got {yes_words!r}")
        self.yes_words = [str(w) for w in yes_words]
        self.input_tokens = None if input_tokens is None else float(input_tokens)
        self.yes_ids: list[int] | None = None
        self._spellings: dict[str, int] = {}
        self._text_tokens = 0  # tokens of the (backend-formatted) questions asked so far
        self._forwards = 0

    def settings(self) -> dict[str, Any]:
        vqa = {k: v for k, v in self.vqa.fingerprint().items() if k not in _DECODING_KEYS}
        return {"template": self.template, "yes_words": self.yes_words, "yes_rule": "first-token/full-softmax/v1",
                "vqa": vqa, "vqa_weights": local_signature(getattr(self.vqa, "model", None))}

    def model_ids(self) -> dict[str, Any]:
        return self.vqa.model_ids()

    def hub_models(self) -> tuple[Any, ...]:
        return under("vqa", self.vqa.hub_models())

    def load(self, device: str = "cpu", dtype: str | None = None) -> None:
        self.vqa.load(device, dtype)
        tok = _tokenizer_of(self.vqa)
        self._spellings = yes_spellings(tok, self.yes_words)
        self.yes_ids = list(self._spellings.values())
        log.info("%s: counting token ids %s (%s) as 'Yes'", self.name, self.yes_ids,
                 [tok.decode([i]) for i in self.yes_ids])

    def unload(self) -> None:
        self.vqa.unload()

    def flops_per_image(self) -> float | None:
        """One forward pass: ``2 x N_vqa x tokens`` (TS2 A.3); ``None`` before the model or the
        questions are known (the engine asks again after scoring)."""
        n = self.vqa.n_params()
        tokens = self.input_tokens if self.input_tokens is not None else (
            self._text_tokens / self._forwards if self._forwards else None)
        if n is None or tokens is None:
            return None
        return 2.0 * float(n) * float(tokens)

    def yes_probabilities(self, requests: list[VQARequest]) -> list[float]:
        """P("Yes") of each request, in batches of the backend's ``batch_size``."""
        if self.yes_ids is None:
            raise MetricError(f"{self.name}: call load(device) before scoring")
        out: list[float] = []
        bs = self.vqa.batch_size
        tok = _tokenizer_of(self.vqa)
        for i in range(0, len(requests), bs):
            chunk = requests[i:i + bs]
            questions = [r.question for r in chunk]
            # first-answer-token log-probabilities over the full vocabulary (float64), one per spelling
            lp = self.vqa.answer_logprobs([r.image for r in chunk], questions, list(self._spellings))
            out.extend(float(p) for p in np.exp(np.asarray(lp, dtype=np.float64)).sum(axis=1))
            self._text_tokens += sum(len(ids) for ids in tok([format_prompt(self.vqa.template, q, None)
                                                                for q in questions])["input_ids"])
            self._forwards += len(chunk)
            self.vqa.n_model_calls += len(chunk)
        return out

    def score_batch(self, items: Sequence[ScoreItem], images: Sequence[Any]) -> list[float]:
        if images is None or len(images) != len(items):
            raise MetricError(f"{self.name}: expected one image per item ({len(items)}), "
                              f"got {None if images is None else len(images)}")
        reqs = [VQARequest(question=self.template.format(prompt=it.prompt), image=im, image_id=it.file_name,
                           seg_id=it.seg_id) for it, im in zip(items, images, strict=True)]
        return self.yes_probabilities(reqs)

    def run_info(self) -> dict[str, Any]:
        return {"vqa_forwards": self._forwards, "yes_token_ids": self.yes_ids}
