"""Question sets of the QG/A metrics (TIFA, DSG): data classes, CSV files, dependency graphs.

The released TS2 files hold one row per question::

    tifa_questions.csv : id, prompt, question_id, question, choices, answer
    dsg_questions.csv  : id, prompt, question_id, parent_question_id, question, choices, answer

``id`` is the SEG, ``choices`` is ``|``-separated, ``parent_question_id`` is ``-1`` for a root and
several parents are joined with ``-`` (``0-1``). Generated questions are written in the same
format (:func:`save_question_csv`), so every file is interchangeable.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from seg_data.model import seg_id_sort_key

__all__ = [
    "Question", "QuestionSet", "QuestionError", "DependencyError",
    "parse_parents", "format_parents", "parse_choices", "build_dependency_graph",
    "load_question_csv", "save_question_csv", "TIFA_COLUMNS", "DSG_COLUMNS",
]

log = logging.getLogger(__name__)

TIFA_COLUMNS = ("id", "prompt", "question_id", "question", "choices", "answer")
DSG_COLUMNS = ("id", "prompt", "question_id", "parent_question_id", "question", "choices", "answer")
CHOICE_SEP = "|"
PARENT_SEP = "-"
ROOT = "-1"


class QuestionError(ValueError):
    """A question file or question set is malformed (missing column, empty choices, ...)."""


class DependencyError(QuestionError):
    """A DSG dependency graph is not a DAG over known questions (cycle, unknown parent)."""


@dataclass(frozen=True)
class Question:
    """One requirement question.

    Attributes
    ----------
    question_id : str
        Id unique within its set (the released files use ``0, 1, ...``).
    question : str
        The question text given to the VQA model.
    choices : tuple[str, ...]
        The answer options (``("yes", "no")`` for binary questions).
    answer : str
        The expected answer for a faithful image.
    parents : tuple[str, ...]
        Ids of the questions this one depends on (DSG); empty for a root.
    element, category : str or None
        What the question is about (TIFA element and its category), when known.
    """

    question_id: str
    question: str
    choices: tuple[str, ...]
    answer: str
    parents: tuple[str, ...] = ()
    element: str | None = None
    category: str | None = None

    @property
    def is_yes_no(self) -> bool:
        return {c.strip().lower() for c in self.choices} == {"yes", "no"}


@dataclass(frozen=True)
class QuestionSet:
    """The questions for one prompt (one SEG), in order.

    ``key`` is the SEG id for released files and the prompt itself for generated questions.
    """

    key: str
    prompt: str
    questions: tuple[Question, ...]
    kind: str = "tifa"  # "tifa" or "dsg": decides the CSV columns and the default accumulation
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self):
        return iter(self.questions)

    @property
    def ids(self) -> list[str]:
        return [q.question_id for q in self.questions]

    def graph(self) -> nx.DiGraph:
        """The dependency DAG (edge parent -> child); see :func:`build_dependency_graph`."""
        return build_dependency_graph(self.questions, where=f"question set {self.key!r}")


def parse_parents(value: object, where: str = "") -> tuple[str, ...]:
    """Parse a ``parent_question_id`` cell: ``-1`` -> (), ``3`` -> ("3",), ``0-1`` -> ("0", "1").

    Raises
    ------
    QuestionError
        Empty parts (``0--1``, ``-``) or non-integer ids, naming ``where``.

    Examples
    --------
    >>> parse_parents("0-1")
    ('0', '1')
    >>> parse_parents("-1")
    ()
    """
    s = str(value).strip()
    if s in ("", ROOT):
        return ()
    parts = s.split(PARENT_SEP)
    if any(not p.strip().isdigit() for p in parts):
        raise QuestionError(f"{where}: expected parent ids like '-1', '3' or '0-1', got {value!r}")
    out = tuple(str(int(p)) for p in parts)
    if len(set(out)) != len(out):
        raise QuestionError(f"{where}: expected distinct parent ids, got {value!r}")
    return out


def format_parents(parents: Sequence[str]) -> str:
    """Inverse of :func:`parse_parents`."""
    return PARENT_SEP.join(parents) if parents else ROOT


def parse_choices(value: object, where: str = "") -> tuple[str, ...]:
    """Split a ``|``-separated choices cell, stripping spaces; at least two non-empty choices."""
    parts = tuple(p.strip() for p in str(value).split(CHOICE_SEP))
    if len(parts) < 2 or any(not p for p in parts):
        raise QuestionError(f"{where}: expected at least two non-empty '|'-separated choices, got {value!r}")
    return parts


def build_dependency_graph(questions: Iterable[Question], where: str = "questions") -> nx.DiGraph:
    """Dependency DAG of a question set: one node per question, an edge parent -> child.

    Raises
    ------
    DependencyError
        Duplicate question ids, a parent id that is not a question of the set, a question that
        is its own parent, or a cycle (the message lists the cycle).

    Examples
    --------
    >>> qs = [Question("0", "Is there a boy?", ("yes", "no"), "yes"),
    ...       Question("1", "Is the shirt green?", ("yes", "no"), "yes", parents=("0",))]
    >>> sorted(build_dependency_graph(qs).edges)
    [('0', '1')]
    """
    g = nx.DiGraph()
    qs = list(questions)
    for q in qs:
        if q.question_id in g:
            raise DependencyError(f"{where}: expected unique question ids, got {q.question_id!r} twice")
        g.add_node(q.question_id)
    for q in qs:
        for p in q.parents:
            if p == q.question_id:
                raise DependencyError(f"{where}, question {q.question_id}: expected parents other than itself, got {p!r}")
            if p not in g:
                raise DependencyError(f"{where}, question {q.question_id}: parent {p!r} is not a question of the set "
                                      f"(expected one of {sorted(g.nodes, key=seg_id_sort_key)})")
            g.add_edge(p, q.question_id)
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return g
    path = " -> ".join([u for u, _ in cycle] + [cycle[-1][1]])
    raise DependencyError(f"{where}: expected an acyclic dependency graph, got the cycle {path}")


def load_question_csv(path: str | Path, kind: str | None = None) -> dict[str, QuestionSet]:
    """Load a released/generated question file, one :class:`QuestionSet` per SEG id.

    Parameters
    ----------
    path : path-like
        A CSV with :data:`TIFA_COLUMNS` (plus ``parent_question_id`` for DSG).
    kind : {"tifa", "dsg"}, optional
        Default: ``"dsg"`` when the file has ``parent_question_id``, else ``"tifa"``.

    Returns
    -------
    dict
        SEG id (str) -> question set, in file order. Dependency graphs are validated.

    Raises
    ------
    FileNotFoundError, QuestionError, DependencyError
        Missing file or column, bad choices/parents (message names file, row and SEG), a SEG with
        two different prompts, or an invalid dependency graph.

    Notes
    -----
    An expected answer that is not among its choices (4 of the released TIFA questions) can never
    be matched; it is kept (the released scores count it as wrong) and a warning is recorded in
    :attr:`QuestionSet.warnings` and logged.
    """
    path = Path(path)
    df = _read_question_table(path)
    has_parents = "parent_question_id" in df.columns
    kind = kind or ("dsg" if has_parents else "tifa")
    if kind not in ("tifa", "dsg"):
        raise QuestionError(f"expected kind 'tifa' or 'dsg', got {kind!r}")
    missing = [c for c in TIFA_COLUMNS if c not in df.columns]
    if missing:
        raise QuestionError(f"{path}: expected columns {list(DSG_COLUMNS if has_parents else TIFA_COLUMNS)}, "
                            f"missing {missing} (got {list(df.columns)})")
    rows: dict[str, list[tuple[int, Question, str]]] = {}
    for i, r in enumerate(df.itertuples(index=False)):
        seg = str(r.id).strip()
        where = f"{path}, row {i + 2} (SEG {seg}, question {r.question_id})"
        if not seg:
            raise QuestionError(f"{where}: expected a SEG id in column 'id', got an empty cell")
        rows.setdefault(seg, []).append((i + 2, _question_of_row(r, where, has_parents), str(r.prompt)))
    return {seg: _question_set(path, seg, items, kind) for seg, items in rows.items()}


def _read_question_table(path: Path) -> Any:
    """A question CSV as a table of strings (empty cells stay ``""``, never NaN)."""
    import pandas as pd

    if not path.is_file():
        raise FileNotFoundError(f"expected a question CSV at {path}, found none")
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise QuestionError(f"{path}: could not parse as CSV: {e}") from e


def _question_of_row(r: Any, where: str, has_parents: bool) -> Question:
    """One row of a question CSV as a :class:`Question`: ids and text non-empty, an integer id
    written without leading zeros or sign noise ("007" -> "7"), choices and parents parsed."""
    qid = str(r.question_id).strip()
    if not qid:
        raise QuestionError(f"{where}: expected a question_id, got an empty cell")
    if qid.lstrip("-").isdigit():
        qid = str(int(qid))
    text = str(r.question).strip()
    if not text:
        raise QuestionError(f"{where}: expected a question text, got an empty cell")
    choices = parse_choices(r.choices, where)
    parents = parse_parents(r.parent_question_id, where) if has_parents else ()
    return Question(qid, text, choices, str(r.answer).strip(), parents)


def _question_set(path: Path, seg: str, items: list[tuple[int, Question, str]], kind: str) -> QuestionSet:
    """One SEG's question set from its ``(file line, question, prompt)`` rows: one prompt, a valid
    dependency graph; an expected answer outside its choices is kept with a logged warning."""
    prompts = {p for _, _, p in items}
    if len(prompts) > 1:
        raise QuestionError(f"{path}, SEG {seg}: expected one prompt per SEG, got {sorted(prompts)}")
    warnings = []
    for line, q, _ in items:
        if q.answer not in q.choices:
            warnings.append(f"{path}, row {line} (SEG {seg}, question {q.question_id}): expected answer "
                            f"{q.answer!r} is not among the choices {list(q.choices)}; it can never be matched")
    for w in warnings:
        log.warning(w)
    qs = QuestionSet(seg, items[0][2], tuple(q for _, q, _ in items), kind=kind, warnings=tuple(warnings))
    build_dependency_graph(qs.questions, where=f"{path}, SEG {seg}")
    return qs


def save_question_csv(sets: Mapping[str, QuestionSet] | Sequence[QuestionSet], path: str | Path,
                      kind: str | None = None) -> Path:
    """Write question sets in the released format (DSG columns when ``kind='dsg'``).

    ``sets`` maps the value of the ``id`` column to its set (or is a sequence, using each set's
    ``key``). The file is written to a temporary name and renamed, so it is never half-written.
    """
    import pandas as pd

    items = list(sets.items()) if isinstance(sets, Mapping) else [(s.key, s) for s in sets]
    kinds = {s.kind for _, s in items}
    kind = kind or (kinds.pop() if len(kinds) == 1 else "dsg" if "dsg" in kinds else "tifa")
    cols = DSG_COLUMNS if kind == "dsg" else TIFA_COLUMNS
    records = []
    for seg, s in items:
        for q in s.questions:
            rec = {"id": seg, "prompt": s.prompt, "question_id": q.question_id, "question": q.question,
                   "choices": CHOICE_SEP.join(q.choices), "answer": q.answer}
            if kind == "dsg":
                rec["parent_question_id"] = format_parents(q.parents)
            records.append(rec)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from seg_data.result_sets import atomic_write_text

    return atomic_write_text(path, pd.DataFrame(records, columns=list(cols)).to_csv(index=False))
