"""Next-token log-probabilities of answer candidates from a generative VQA backend.

``answer_logprobs(images, questions, candidates)`` on :class:`~.vqa.BlipVQA`, :class:`~.vqa.ChatVQA`,
:class:`~.vqa.InstructBlipVQA` and :class:`~.vqa_generative.FuyuVQA` returns an array of shape
``(len(questions), len(candidates))``: entry ``[i, j]`` is

    log softmax(logits_i)[t_j]

where ``logits_i`` are the model's logits (over its whole vocabulary, float64 log-softmax) for
the **first answer token** of question ``i`` about image ``i`` -- the token that greedy decoding
would pick first -- and ``t_j`` is the **first token id of candidate j**, tokenised with
``add_special_tokens=False`` (so "Yes" is ``▁Yes`` for SentencePiece vocabularies). The prompt is
exactly the one :meth:`answer` sends (same template, system prompt, image placement), so
``exp`` of an entry is the probability that the backend's answer starts with that candidate.

VQAScore (P("Yes")) is ``exp(answer_logprobs(images, [q], ["Yes"]))`` with its question
template; normalising over ``["Yes", "No"]`` is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["answer_logprobs", "first_token_ids", "logprobs_at", "check_pairs"]


def check_pairs(images: Sequence[Any], questions: Sequence[str], candidates: Sequence[str]) -> None:
    if len(images) != len(questions):
        raise ValueError(f"expected one image per question, got {len(images)} images and {len(questions)} questions")
    if not candidates:
        raise ValueError("expected at least one candidate answer, got none")
    if any(im is None for im in images):
        raise ValueError("expected an image for every question, got None")


def first_token_ids(tokenizer: Any, candidates: Sequence[str]) -> list[int]:
    """The first token id of each candidate (no special tokens).

    Raises
    ------
    ValueError
        A candidate that tokenises to nothing.
    """
    ids = []
    for c in candidates:
        toks = tokenizer(str(c), add_special_tokens=False)["input_ids"]
        if not toks:
            raise ValueError(f"expected candidate {c!r} to tokenise to at least one token, got none")
        ids.append(int(toks[0]))
    return ids


def logprobs_at(logits: Any, token_ids: Sequence[int]) -> np.ndarray:
    """``log_softmax(logits)[:, token_ids]`` as float64 (``logits``: a ``(n, vocab)`` tensor)."""
    import torch

    lp = torch.log_softmax(logits.detach().to(torch.float64), dim=-1)
    return lp[:, list(token_ids)].cpu().numpy()


def answer_logprobs(backend: Any, images: Sequence[Any], questions: Sequence[str], candidates: Sequence[str],
                    next_logits: Any) -> np.ndarray:
    """The ``(len(questions), len(candidates))`` array described above, for a transformers VQA backend.

    ``next_logits(images, questions)`` returns the first-answer-token logits ``(n, vocab)`` of one
    batch (at most ``backend.batch_size`` pairs); it runs under ``torch.inference_mode``.

    Raises
    ------
    ValueError
        Unequal numbers of images and questions, a missing image, no candidates, or a candidate
        that tokenises to nothing.
    """
    import torch

    check_pairs(images, questions, candidates)
    if backend._net is None:
        backend.load(backend.device)
    ids = first_token_ids(getattr(backend._proc, "tokenizer", backend._proc), candidates)
    rows = []
    for i in range(0, len(questions), backend.batch_size):
        with torch.inference_mode():
            logits = next_logits(list(images[i:i + backend.batch_size]), list(questions[i:i + backend.batch_size]))
        rows.append(logprobs_at(logits, ids))
    return np.concatenate(rows, axis=0)
