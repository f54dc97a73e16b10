"""Yes/no answer matching: the default rules on real sentences, and the release's ``paper`` rule.

``tests/data/yes_no_answers.csv`` holds LLaVA's released answers to yes/no questions (TIFA and
DSG), drawn with a seed: stratum ``random`` is 200 of the 3462 distinct answers of two words or
more; stratum ``no_leading_yes_no`` is 60 of the 88 distinct answers that do not start with
yes/no (echoed questions, numbers, descriptions). Each ``expected`` was set by a person reading
the answer (with the question beside it), not by the rule under test: ``yes``/``no`` when the
text says so by a yes/no word or a negation of the asked fact, ``undecided`` when it does not
(numbers, echoed questions, hedges, and affirmative descriptions without a "yes" -- those go to
the embedding by policy).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from metrics_adapters.qa.matching import (
    RULES,
    AnswerMatcher,
    decide_yes_no,
    normalize_answer,
    strip_markup,
)

FIXTURE = Path(__file__).parent / "data" / "yes_no_answers.csv"


class FailEncoder:
    """An embedding model that must not be asked: every call is recorded and answers 'yes'-ish."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.array([[1.0, 0.0] if t.lower() == "yes" else [0.6, 0.8] if t.lower() == "no" else [0.8, 0.6]
                         for t in texts])


@pytest.fixture(scope="module")
def labelled():
    df = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    assert list(df.columns[:2]) == ["answer", "expected"]
    return df


def test_fixture_is_what_the_docstring_says(labelled):
    assert labelled.stratum.value_counts().to_dict() == {"random": 200, "no_leading_yes_no": 60}
    assert set(labelled.expected) == {"yes", "no", "undecided"}
    assert labelled.answer.is_unique
    # Counts of the hand labels (so that an edit of the file is noticed).
    assert labelled.groupby("stratum").expected.value_counts().to_dict() == {
        ("no_leading_yes_no", "undecided"): 39, ("no_leading_yes_no", "no"): 11, ("no_leading_yes_no", "yes"): 10,
        ("random", "no"): 132, ("random", "yes"): 62, ("random", "undecided"): 6}


def test_default_rule_gets_every_hand_labelled_answer_right(labelled):
    wrong = []
    for a, e in zip(labelled.answer, labelled.expected, strict=True):
        v, rule = decide_yes_no(a)
        if (v or "undecided") != e:
            wrong.append((a[:80], e, v, rule))
    assert not wrong, f"{len(wrong)} of {len(labelled)} wrong: {wrong[:5]}"


def test_matcher_records_rule_and_embeds_only_the_undecided(labelled):
    enc = FailEncoder()
    m = AnswerMatcher(model="fake", encoder=enc)
    res = m.match(list(labelled.answer), [("yes", "no")] * len(labelled))
    for r, e in zip(res, labelled.expected, strict=True):
        assert r.rule in RULES
        if e == "undecided":
            assert (r.method, r.rule) == ("embedding", "embedding_fallback")
        else:
            assert r.choice == e and r.method == "yes_no" and r.rule in ("yes_no_token", "negation", "yes_no_word")
    embedded = {t for c in enc.calls for t in c} - {"yes", "no"}
    undecided = {strip_markup(a) for a, e in zip(labelled.answer, labelled.expected, strict=True) if e == "undecided"}
    assert embedded == undecided


@pytest.mark.parametrize("answer, expected, rule", [
    ("No there is no ramp in the image.</s>", "no", "yes_no_token"),   # the example
    ("Not really.", "no", "negation"),
    ("There is no dog", "no", "negation"),
    ("Yes, there is", "yes", "yes_no_token"),
    ("I don't see any cat", "no", "negation"),
    ("I dont see any cat", "no", "negation"),                 # apostrophe stripped, as in the release
    ("The image does not contain a kitten.", "no", "negation"),
    ("Nope", "no", "yes_no_word"),
    ("yep", "yes", "yes_no_word"),
    ("not at all", "no", "yes_no_word"),
    ("<s> [INST] Yes<|im_end|>", "yes", "yes_no_word"),
    ("ASSISTANT: No.<|eot_id|>", "no", "yes_no_word"),
    ("YES!!", "yes", "yes_no_word"),
    ("4Yes</s>", "yes", "yes_no_token"),
    ("100%No the plate is not on the woman's lap.</s>", "no", "yes_no_token"),
    ("2Is there a sidewalk? Yes</s>", "yes", "yes_no_token"),
    ("Is there no cat?", None, "undecided"),                  # an echoed question decides nothing
    ("The eyes are blue", None, "undecided"),                 # "eyes" holds no "yes"
    ("Eyes", None, "undecided"),
    ("It is not clear if it is a teddy bear store or not.", None, "undecided"),
    ("It is difficult to tell whether there is no cat.", None, "undecided"),
    ("The men are next to the car but they are not in the same picture.", None, "undecided"),
    ("The painting is not in the style of Hokusai but it does feature a wave.", "no", "negation"),
    ("There is nobody on the beach", "no", "negation"),
    ("100%", None, "undecided"),
    ("", None, "undecided"),
])
def test_rules_on_sentences(answer, expected, rule):
    assert decide_yes_no(answer) == (expected, rule)


def test_markup_is_stripped_before_exact_match_and_embedding():
    assert normalize_answer("A Christmas tree</s>") == "a christmas tree"
    assert normalize_answer("Christmas tree<|im_end|>") == "christmas tree"
    enc = FailEncoder()
    m = AnswerMatcher(model="fake", encoder=enc)
    r = m.match_one("Christmas tree</s>", ("Christmas tree", "pine tree"))
    assert (r.choice, r.rule) == ("Christmas tree", "exact") and enc.calls == []
    r = m.match_one("Pine</s>", ("Christmas tree", "pine tree", "oak"))
    assert r.rule == "embedding" and "Pine" in enc.calls[0] and not any("</s>" in t for t in enc.calls[0])


def test_yes_no_rules_only_for_yes_no_questions():
    enc = FailEncoder()
    m = AnswerMatcher(model="fake", encoder=enc)
    r = m.match_one("No it is young", ("young", "old"))  # two choices, not yes/no: embedding
    assert r.rule == "embedding"


def test_paper_rule_is_the_release_substring_rule():
    m = AnswerMatcher(model="fake", encoder=FailEncoder(), yes_no="paper")
    answers = ["No there is no ramp</s>", "The eyes are blue", "Yes</s>", "Yes the bed is white", "No",
               "young", "Yes she is young", "Not really"]
    choices = [("yes", "no")] * 5 + [("young", "old")] * 2 + [("yes", "no")]
    expected = ["yes", "yes", "yes", "no", "no", "young", "young", "yes"]
    res = m.match(answers, choices, expected)
    correct = [r.choice == e for r, e in zip(res, expected, strict=True)]
    # 'yes' in answer.lower(), whatever the expected answer (SEG 18's "is the bed white?" expects no).
    assert correct == [False, True, True, True, False, False, True, False]
    assert {r.rule for r in res} == {"paper_substring"} and {r.method for r in res} == {"paper"}


def test_paper_rule_leaves_multi_choice_to_exact_and_embedding():
    enc = FailEncoder()
    m = AnswerMatcher(model="fake", encoder=enc, yes_no="paper")
    res = m.match(["Christmas tree</s>", "oak"], [("Christmas tree", "pine"), ("pine", "oak", "palm")],
                  ["Christmas tree", "pine"])
    assert [r.rule for r in res] == ["paper_substring", "exact"]
    assert res[0].choice == "pine"  # two choices: "yes" not in the answer -> wrong, even though it is exact
    r = m.match_one("a tall oak tree", ("pine", "oak", "palm"), "oak")
    assert r.rule == "embedding"


def test_paper_mode_needs_expected_and_bad_mode_is_rejected():
    m = AnswerMatcher(model="fake", encoder=FailEncoder(), yes_no="paper")
    with pytest.raises(ValueError, match="one expected answer per answer, got none"):
        m.match(["yes"], [("yes", "no")])
    with pytest.raises(ValueError, match=r"expected yes_no one of \['rules', 'paper'\], got 'substring'"):
        AnswerMatcher(yes_no="substring")


def test_mode_is_in_the_fingerprint():
    a, b = AnswerMatcher(model="m").settings(), AnswerMatcher(model="m", yes_no="paper").settings()
    assert a["yes_no"] == "rules" and b["yes_no"] == "paper" and a != b
