"""Multi-choice answers: the choice the answer states wins before the embedding (issue 29).

``tests/data/stated_choice_answers.csv`` holds 200 multiple-choice sentence answers, each with the
choice a person reading it says it states (``expected``; empty when it states none, several, a
negated one, or hedges -- those go to the embedding) and why (``why``):

* ``source=llava_tifa``: 140 of the 4414 distinct (answer, choices) pairs of two or more words in
  LLaVA's released answers to TIFA's multi-choice questions, drawn with ``random_state=29``;
* ``source=hand``: 60 written for the cases the rule has to get right: negations (with and
  without the apostrophe, "without", after the choice), plurals (regular, -es, -ies, irregular,
  a plural choice met in the singular), hyphens, numbers as words and digits (``3.5``, ``4:3``,
  ``10`` against ``1``), longest match first, hedges, echoed questions, words inside words, and
  issue 29's two examples.

Labels were set by reading the answer and the choices, and checked against the policy's wording
in docs/qa.md; the answers whose premise is denied in an earlier sentence ("There is no kitten in
the image. The image shows a bed with a white comforter") are labelled with what they state, as
the policy says (the premise is asked by its own question).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metrics_adapters.qa.matching import RULES, AnswerMatcher, is_yes_no_question, stated_choice

FIXTURE = Path(__file__).parent / "data" / "stated_choice_answers.csv"
BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "stated_choice.py"


class RecordingEncoder:
    """Any text -> a fixed vector (the first choice wins every tie); records what it is asked."""

    def __init__(self):
        self.texts: set[str] = set()

    def __call__(self, texts):
        self.texts.update(texts)
        return np.ones((len(texts), 2))


@pytest.fixture(scope="module")
def labelled():
    df = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    df["choice_list"] = df.choices.str.split("|")
    return df


def test_fixture_is_what_the_docstring_says(labelled):
    assert len(labelled) == 200
    assert labelled.source.value_counts().to_dict() == {"llava_tifa": 140, "hand": 60}
    assert not labelled.choice_list.map(is_yes_no_question).any()
    assert not labelled.duplicated(["answer", "choices"]).any()
    # Every expected choice is one of the row's choices; an empty one has a reason.
    assert all(e in cs for e, cs in zip(labelled.expected, labelled.choice_list, strict=True) if e)
    assert ((labelled.expected != "") == (labelled.why == "stated")).all()
    # Counts of the hand labels, so that an edit of the file is noticed.
    assert labelled.groupby("source").why.value_counts().to_dict() == {
        ("hand", "stated"): 37, ("hand", "several"): 9, ("hand", "negated"): 7, ("hand", "none"): 5,
        ("hand", "hedge"): 2, ("llava_tifa", "none"): 71, ("llava_tifa", "stated"): 57,
        ("llava_tifa", "several"): 8, ("llava_tifa", "negated"): 3, ("llava_tifa", "hedge"): 1}


def test_stated_choice_gets_every_labelled_answer_right(labelled):
    wrong = []
    for a, cs, e, why in zip(labelled.answer, labelled.choice_list, labelled.expected, labelled.why, strict=True):
        j, reason = stated_choice(a, cs)
        got = cs[j] if j is not None else ""
        if (got, reason) != (e, why):
            wrong.append((a[:70], cs, e, why, got, reason))
    assert not wrong, f"{len(wrong)} of {len(labelled)} wrong: {wrong[:5]}"


def test_matcher_records_the_stated_choice_and_embeds_only_the_rest(labelled):
    enc = RecordingEncoder()
    m = AnswerMatcher(model="fake", encoder=enc)
    res = m.match(list(labelled.answer), list(labelled.choice_list))
    errors = []
    for r, a, cs, e in zip(res, labelled.answer, labelled.choice_list, labelled.expected, strict=True):
        assert r.rule in RULES
        if e:
            ok = r.choice == e and (r.method, r.rule, r.similarity) == ("stated", "stated_choice", 1.0)
        else:  # left to the embedding: the constant encoder gives the first choice
            ok = r.choice == cs[0] and (r.method, r.rule) == ("embedding", "embedding")
        if not ok:
            errors.append((a[:70], e, r))
    assert not errors, f"{len(errors)} errors: {errors[:3]}"
    stated = set(labelled.answer[labelled.expected != ""].str.replace("</s>", "").str.strip())
    assert not (enc.texts & stated)  # an answer decided by the rule is never embedded


def test_issue_29_examples():
    m = AnswerMatcher(model="fake", encoder=RecordingEncoder())
    r = m.match_one("This is an aerial photo of a small island in the middle of the ocean.</s>",
                    ["aerial", "ground-level", "underwater", "underground"])
    assert (r.choice, r.rule) == ("aerial", "stated_choice")
    # "black shirt" is no choice as a whole phrase: the embedding decides, as before.
    r = m.match_one("The skateboarder is wearing a black shirt.",
                    ["blue jacket", "red shirt", "black hoodie", "green sweater"])
    assert r.rule == "embedding"


def test_exact_and_yes_no_come_first_and_paper_mode_never_uses_the_rule():
    m = AnswerMatcher(model="fake", encoder=RecordingEncoder())
    assert m.match_one("Aerial.", ["aerial", "ground-level"]).rule == "exact"
    # A yes/no question keeps its own rules: "The cat is black" decides nothing there.
    assert m.match_one("The cat is black", ["yes", "no"]).rule == "embedding_fallback"
    assert m.match_one("yes it is a cat", ["no", "yes"]).rule == "yes_no_token"
    paper = AnswerMatcher(model="fake", yes_no="paper", encoder=RecordingEncoder())
    r = paper.match(["It is an aerial photo</s>", "The woman is young"],
                    [["ground-level", "aerial", "underwater"], ["old", "young"]], ["aerial", "young"])
    assert [(x.choice, x.rule) for x in r] == [("ground-level", "embedding"), ("old", "paper_substring")]
    off = AnswerMatcher(model="fake", stated_choices=False, encoder=RecordingEncoder())
    assert off.match_one("It is an aerial photo", ["ground-level", "aerial"]).rule == "embedding"
    assert off.settings() != m.settings() and off.settings()["stated_choices"] is False
    assert "stated_choices" not in paper.settings()


@pytest.mark.parametrize("answer, choices, expected", [
    ("The bears in the image are small.</s>", ["big", "small", "medium-sized", "large"], ("small", "stated")),
    ("It is a medium sized bear", ["very big", "small", "medium-sized", "large"], ("medium-sized", "stated")),
    ("Two women and a man", ["1", "2", "3"], ("2", "stated")),
    ("There are two women, three men", ["1", "2", "3"], (None, "several")),
    ("The woman is not young", ["young", "old"], (None, "negated")),
    ("", ["a", "b"], (None, "none")),
    ("...", ["a", "b"], (None, "none")),
])
def test_stated_choice_cases(answer, choices, expected):
    j, why = stated_choice(answer, choices)
    assert (choices[j] if j is not None else None, why) == expected


def _benchmark():
    spec = importlib.util.spec_from_file_location("stated_choice_benchmark", BENCHMARK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.shared
@pytest.mark.parametrize("model", ["blip1", "llava"])
def test_released_answers_that_state_one_choice_get_it(ts2_dir, model):
    """Issue 29 on the released TIFA answers, by its plain definition (the benchmark's
    ``issue_stated``: the choice as a whole phrase, no negation in its clause; no plurals, no number
    words): the rule never records a different choice, and records that one for >= 99% of them;
    the rest it leaves to the embedding, for a reason a reader agrees with (an echoed question,
    a hedge, a second choice the plain definition misses: "fruits and vegetables"). With the
    embedding the matcher records the stated choice for >= 99.5% (benchmarks/stated_choice.py,
    docs/qa.md). Measured: BLIP1 4144 of 4145 decided, LLaVA 4412 of 4438, 0 different."""
    bench = _benchmark()
    df = bench.load(ts2_dir, model, "tifa")
    mc = df[~df.choice_list.map(is_yes_no_question)]
    n = same = 0
    different = []
    for a, cs in zip(mc.vqa_answer, mc.choice_list, strict=True):
        t = bench.issue_stated(a, cs)
        if t is None:
            continue
        n += 1
        j, _ = stated_choice(a, cs)
        same += j == t
        if j is not None and j != t:
            different.append((a[:80], cs, t, j))
    assert not different, different[:5]
    assert n >= 4000 and same / n >= 0.99, f"{model}: {same} of {n}"

