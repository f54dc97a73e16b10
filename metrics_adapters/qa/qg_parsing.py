"""Strict parsers of generated question sets: TIFA-style (About / Q / Choices / A) and DSG-style
(``id | tuple | question | parents``). Anything outside the format raises :class:`ParseError`."""

from __future__ import annotations

import re
from collections.abc import Callable

from .questions import Question, QuestionError, build_dependency_graph

__all__ = ["ParseError", "parse_tifa", "parse_dsg", "PARSERS", "PARSER_VERSION"]

PARSER_VERSION = "1"  # bump when a parser changes what it accepts: it invalidates cached questions


class ParseError(QuestionError):
    """Language-model output that does not follow the expected question format."""


# -- parsing -------------------------------------------------------------------------------------------
_ABOUT = re.compile(r"^About\s+(?P<element>.+?)\s*\((?P<category>[^()]+)\)\s*:\s*$", re.IGNORECASE)
_Q = re.compile(r"^Q\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_CHOICES = re.compile(r"^Choices\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_A = re.compile(r"^A\s*:\s*(?P<text>.+?)\s*$", re.IGNORECASE)
_DESCRIPTION = re.compile(r"^Description\s*:", re.IGNORECASE)
_FENCE = re.compile(r"^```")


def _lines(text: str) -> list[tuple[int, str]]:
    return [(i, ln.strip()) for i, ln in enumerate(str(text).splitlines(), start=1)]


def parse_tifa(text: str, max_questions: int = 30) -> list[Question]:
    """Parse TIFA-style output (see :mod:`.templates`) into questions with choices and answers.

    Rules: text before the first ``About`` line is ignored (chat models' preambles), parsing
    stops at the next ``Description:`` line (a base model continuing the few-shot pattern);
    in between every non-empty line must be an ``About``, ``Q:``, ``Choices:`` or ``A:`` line, in
    the order About, then (Q, Choices, A) one or more times. Choices are comma-separated, at least
    two, distinct; the answer must be one of them (case-insensitive; the choice's spelling is
    kept). A question repeated word for word is dropped.

    Raises
    ------
    ParseError
        With the line number and what was expected.

    Examples
    --------
    >>> qs = parse_tifa("About dog (animal):\\nQ: is there a dog?\\nChoices: yes, no\\nA: Yes")
    >>> qs[0].question, qs[0].choices, qs[0].answer, qs[0].category
    ('is there a dog?', ('yes', 'no'), 'yes', 'animal')
    """
    reader = _TifaReader(max_questions)
    for n, line in _lines(text):
        if _DESCRIPTION.match(line):
            break
        if line and not _FENCE.match(line):
            reader.read(n, line)
    _check_tifa_end(reader.state, reader.q_text, reader.questions)
    return reader.questions


class _TifaReader:
    """Reading TIFA-style output line by line: a small grammar whose ``state`` is what was read
    last (start -> about -> q -> choices -> answered -> (q | about)); each kind of line has one
    step (:data:`_TIFA_GRAMMAR`) that checks it may come now and records it."""

    def __init__(self, max_questions: int) -> None:
        self.max_questions = max_questions
        self.questions: list[Question] = []
        self.seen: set[str] = set()
        self.element: str | None = None
        self.category: str | None = None
        self.state = "start"
        self.q_text: str | None = None
        self.choices: tuple[str, ...] = ()

    def read(self, n: int, line: str) -> None:
        """Take line ``n``; before the first ``About`` line everything is preamble and skipped."""
        for pattern, step in _TIFA_GRAMMAR:
            m = pattern.match(line)
            if m is not None:
                if self.state != "start" or pattern is _ABOUT:
                    step(self, n, line, m)
                return
        if self.state != "start":
            raise ParseError(f"line {n}: expected an 'About <element> (<category>):', 'Q:', 'Choices:' or 'A:' "
                             f"line, got {line[:120]!r}")

    def about(self, n: int, line: str, m: re.Match[str]) -> None:
        _check_about_allowed(n, line, self.state, self.q_text, self.element)
        self.element, self.category = m.group("element").strip(), m.group("category").strip().lower()
        self.state = "about"

    def question(self, n: int, line: str, m: re.Match[str]) -> None:
        if self.state in ("q", "choices"):
            raise ParseError(f"line {n}: expected {'Choices:' if self.state == 'q' else 'A:'}, got a new question "
                             f"{line!r}")
        self.q_text, self.state = m.group("text"), "q"

    def choice_list(self, n: int, line: str, m: re.Match[str]) -> None:
        if self.state != "q":
            raise ParseError(f"line {n}: expected Choices: right after a question (Q:), got {line!r}")
        self.choices = _tifa_choices(n, line, m.group("text"))
        self.state = "choices"

    def answer(self, n: int, line: str, m: re.Match[str]) -> None:
        """An answer ends a question; a question repeated word for word is dropped."""
        if self.state != "choices":
            raise ParseError(f"line {n}: expected A: right after Choices:, got {line!r}")
        ans = _tifa_answer(n, m.group("text"), self.choices)
        if self.q_text not in self.seen:
            self.seen.add(self.q_text)
            self.questions.append(Question(str(len(self.questions)), self.q_text, self.choices, ans,
                                           element=self.element, category=self.category))
            if len(self.questions) > self.max_questions:
                raise ParseError(f"expected at most {self.max_questions} questions, got more (runaway output?)")
        self.state = "answered"


#: The TIFA line kinds, in the order they are tried, and the reader's step for each.
_TIFA_GRAMMAR: tuple[tuple[re.Pattern[str], Callable[[_TifaReader, int, str, re.Match[str]], None]], ...] = (
    (_ABOUT, _TifaReader.about), (_Q, _TifaReader.question), (_CHOICES, _TifaReader.choice_list),
    (_A, _TifaReader.answer))


def _check_about_allowed(n: int, line: str, state: str, q_text: str | None, element: str | None) -> None:
    """An ``About`` line may not interrupt an unfinished question nor follow another ``About`` directly."""
    if state in ("q", "choices"):
        raise ParseError(f"line {n}: expected {'Choices:' if state == 'q' else 'A:'} to finish the question "
                         f"{q_text!r}, got {line!r}")
    if state == "about":
        raise ParseError(f"line {n}: expected a question (Q:) about {element!r}, got another About line")


def _check_tifa_end(state: str, q_text: str | None, out: list[Question]) -> None:
    """At the end of the output the last question must be finished and at least one must have been read."""
    if state in ("q", "choices"):
        raise ParseError(f"expected the question {q_text!r} to end with {'Choices: and A:' if state == 'q' else 'A:'}, "
                         "got the end of the output")
    if not out:
        raise ParseError("expected at least one 'About ...:' block with a question, got none")


def _tifa_choices(n: int, line: str, text: str) -> tuple[str, ...]:
    """The comma-separated choices of a ``Choices:`` line: at least two, non-empty, distinct (case-insensitive)."""
    choices = tuple(c.strip() for c in text.split(","))
    if len(choices) < 2 or any(not c for c in choices):
        raise ParseError(f"line {n}: expected at least two comma-separated choices, got {line!r}")
    if len({c.lower() for c in choices}) != len(choices):
        raise ParseError(f"line {n}: expected distinct choices, got {list(choices)}")
    return choices


def _tifa_answer(n: int, text: str, choices: tuple[str, ...]) -> str:
    """The answer of an ``A:`` line matched case-insensitively to a choice, in the choice's spelling."""
    ans = text.strip().rstrip(".")
    lower = [c.lower() for c in choices]
    if ans.lower() not in lower:
        raise ParseError(f"line {n}: expected the answer to be one of the choices {list(choices)}, got {ans!r}")
    return choices[lower.index(ans.lower())]


_DSG_LINE = re.compile(r"^(?P<id>\d+)\s*\|\s*(?P<tuple>[^|]+?)\s*\|\s*(?P<question>[^|]+?)\s*\|\s*(?P<parents>[\d,\s]+?)\s*$")


def parse_dsg(text: str, max_questions: int = 30) -> list[Question]:
    """Parse DSG-style output (``id | tuple | question | parents``) into a question DAG.

    Rules: lines before the first requirement line are ignored; parsing stops at a blank line
    after the first requirement or at a ``Description:`` line. Ids are 1, 2, 3, ... in order;
    parents are ``0`` (none) or comma-separated earlier ids; questions end with ``?``. Output ids
    are 0-based (``question_id = id - 1``) as in the released files; every question is yes/no with
    answer ``yes``; ``element`` holds the tuple, ``category`` its part before `` - ``.

    Raises
    ------
    ParseError
        A malformed line, an id out of sequence, a parent that is not an earlier id, ``0`` mixed
        with other parents, a question without ``?``, no requirement at all.

    Examples
    --------
    >>> qs = parse_dsg("1 | entity - whole (boy) | Is there a boy? | 0\\n2 | attribute - color (shirt, green) | Is the shirt green? | 1")
    >>> [(q.question_id, q.parents) for q in qs]
    [('0', ()), ('1', ('0',))]
    """
    out: list[Question] = []
    for n, line in _lines(text):
        if _DESCRIPTION.match(line):
            break
        if _FENCE.match(line):
            continue
        if not line:
            if out:
                break
            continue
        m = _DSG_LINE.match(line)
        if m is None:
            if not out:
                continue  # preamble
            raise ParseError(f"line {n}: expected '<id> | <tuple> | <question> | <parent ids or 0>', got {line[:120]!r}")
        rid = int(m.group("id"))
        if rid != len(out) + 1:
            raise ParseError(f"line {n}: expected requirement id {len(out) + 1}, got {rid}")
        question = m.group("question").strip()
        if not question.endswith("?"):
            raise ParseError(f"line {n}: expected a yes/no question ending with '?', got {question!r}")
        ids = _dsg_parent_ids(n, m.group("parents"), rid)
        tup = m.group("tuple").strip()
        out.append(Question(str(rid - 1), question, ("yes", "no"), "yes", parents=tuple(str(i - 1) for i in ids),
                            element=tup, category=tup.split(" - ")[0].strip().lower()))
        if len(out) > max_questions:
            raise ParseError(f"expected at most {max_questions} requirements, got more (runaway output?)")
    if not out:
        raise ParseError("expected at least one requirement line '<id> | <tuple> | <question> | <parents>', got none")
    build_dependency_graph(out, where="generated DSG questions")  # cannot fail by construction; kept as a guard
    return out


def _dsg_parent_ids(n: int, parents: str, rid: int) -> list[int]:
    """The 1-based parent ids of requirement ``rid`` (``0`` alone = none): distinct and all earlier than ``rid``."""
    raw = [p.strip() for p in parents.split(",")]
    if any(not p for p in raw):
        raise ParseError(f"line {n}: expected parent ids like '0', '2' or '1,3', got {parents!r}")
    ids = [int(p) for p in raw]
    if 0 in ids and len(ids) > 1:
        raise ParseError(f"line {n}: expected '0' alone (no parent) or parent ids, got {parents!r}")
    ids = [i for i in ids if i != 0]
    bad = [i for i in ids if not 1 <= i < rid]
    if bad:
        raise ParseError(f"line {n}: expected parents among the earlier ids 1..{rid - 1}, got {bad}")
    if len(set(ids)) != len(ids):
        raise ParseError(f"line {n}: expected distinct parent ids, got {ids}")
    return ids


PARSERS: dict[str, Callable[..., list[Question]]] = {"tifa": parse_tifa, "dsg": parse_dsg}
