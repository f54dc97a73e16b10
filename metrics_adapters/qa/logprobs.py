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

``answer_logits(images, questions, prefix)`` on the same backends is the teacher-forced form:
logits ``(n, len(prefix) + 1, vocab)`` at the first answer position and after each forced
``prefix`` token (encoder-decoder models: decoder steps fed ``[start, *prefix]``; decoder-only
models: ``prefix`` appended to every (left-padded) prompt, :func:`append_tokens`). VQAScore reads
the log-probability of a whole answer (``"Yes"`` plus the end-of-sequence token, :func:`answer_ids`)
from it, as t2v_metrics does (:mod:`.vqascore`); ``answer_logprobs`` is its first position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["answer_ids", "answer_logprobs", "append_tokens", "check_pairs", "eos_id", "first_token_ids",
           "logprobs_at"]


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


def eos_id(tokenizer: Any) -> int:
    """The end-of-sequence token id: ``eos_token_id``, else ``sep_token_id`` (BERT-style decoders,
    e.g. BLIP's, end an answer with ``[SEP]``).

    Raises
    ------
    ValueError
        A tokenizer with neither.
    """
    for attr in ("eos_token_id", "sep_token_id"):
        v = getattr(tokenizer, attr, None)
        if v is not None:
            return int(v)
    raise ValueError(f"expected {type(tokenizer).__name__} to have an eos_token_id or sep_token_id, got neither")


def answer_ids(tokenizer: Any, answer: str) -> list[int]:
    """The tokens of ``answer`` (no special tokens) followed by the end-of-sequence token.

    These are t2v_metrics' answer labels: for T5 ``t5_output_tokenizer("yes")`` gives ``[yes, </s>]``
    (t2v_metrics/models/vqascore_models/instructblip_model.py:115-127, clip_t5_model.py:245), for
    LLaVA the label positions of ``"Yes</s>"`` after the prompt (llava_model.py:32, 243-251).

    Raises
    ------
    ValueError
        An answer that tokenises to nothing, or no end-of-sequence token.

    Examples
    --------
    With a SentencePiece (T5/LLaMA) vocabulary ``answer_ids(tok, "Yes")`` is ``[▁Yes, </s>]``.
    """
    toks = [int(t) for t in tokenizer(str(answer), add_special_tokens=False)["input_ids"]]
    if not toks:
        raise ValueError(f"expected the answer {answer!r} to tokenise to at least one token, got none")
    return toks + [eos_id(tokenizer)]


# How each per-token input of a decoder-only model continues over appended answer tokens.
_APPEND_FILL = {"attention_mask": 1, "token_type_ids": 0, "image_patches_indices": -1}


def append_tokens(inputs: dict[str, Any], prefix: Sequence[int]) -> dict[str, Any]:
    """Decoder-only model inputs with ``prefix`` appended to every row (prompts are left-padded, so
    every row's answer starts at the same column).

    Raises
    ------
    ValueError
        An input of shape ``(n, prompt length)`` this function does not know how to continue.
    """
    import torch

    if not prefix:
        return inputs
    ids = inputs["input_ids"]
    n, length = ids.shape
    out = dict(inputs)
    out["input_ids"] = torch.cat([ids, torch.tensor([list(prefix)] * n, dtype=ids.dtype, device=ids.device)], 1)
    for k, v in inputs.items():
        if k == "input_ids" or not isinstance(v, torch.Tensor) or v.dim() != 2 or tuple(v.shape) != (n, length):
            continue
        if k not in _APPEND_FILL:
            raise ValueError(f"expected per-token inputs among {sorted(_APPEND_FILL)}, got {k!r}: cannot append "
                             f"answer tokens to it")
        out[k] = torch.cat([v, torch.full((n, len(prefix)), _APPEND_FILL[k], dtype=v.dtype, device=v.device)], 1)
    return out


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
