"""``parent_overrides``: replaying a run made with an older DSG dependency file (SEG 65's)."""

from __future__ import annotations

import pytest

from metrics_adapters.base import ScoreItem
from metrics_adapters.qa.dsg import DSGScore
from metrics_adapters.qa.matching import AnswerMatcher
from metrics_adapters.qa.metric import PARENT_OVERRIDES
from metrics_adapters.qa.questions import DependencyError, QuestionError
from metrics_adapters.qa.vqa import ReplayVQA

# SEG 65 of the release: question 3 depends on 0 in dsg_questions.csv, was a root in the old file.
DSG_CSV = """id,prompt,question_id,parent_question_id,question,choices,answer
65,Stuffed animals in bed,0,-1,Is there a group of stuffed animals?,yes|no,yes
65,Stuffed animals in bed,1,0,Are the stuffed animals sitting?,yes|no,yes
65,Stuffed animals in bed,2,0,Are the stuffed animals next to the bed?,yes|no,yes
65,Stuffed animals in bed,3,0,Is there a bed?,yes|no,yes
"""
# Image a: no animals, but a bed: gated to 0/4 with the released file, 1/4 with the old one.
ANSWERS = "65,a.png,0,no\n65,a.png,1,no\n65,a.png,2,no\n65,a.png,3,yes\n"


class NoEmbedding:
    def __call__(self, texts):
        raise AssertionError(f"no embedding expected, got {texts}")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "dsg_questions.csv").write_text(DSG_CSV)
    (tmp_path / "answers.csv").write_text(ANSWERS)
    return tmp_path


def _metric(root, **kw):
    return DSGScore(name="dsg", vqa=ReplayVQA(str(root / "answers.csv")), questions_file=str(root),
                    matcher=AnswerMatcher(model="none", encoder=NoEmbedding()), cache=False, **kw)


def _score(m):
    m.load("cpu")
    return m.score_batch([ScoreItem("65", "1", "a.png", "Stuffed animals in bed")], None)[0]


def test_seg65_old_makes_question_3_a_root(files):
    assert _score(_metric(files)) == 0.0
    assert _score(_metric(files, parent_overrides="seg65_old")) == 0.25
    assert _score(_metric(files, parent_overrides={65: {3: []}})) == 0.25  # same edit as a mapping
    assert PARENT_OVERRIDES["seg65_old"] == {"65": {"3": ()}}


def test_overrides_enter_the_fingerprint(files):
    a, b = _metric(files).settings(), _metric(files, parent_overrides="seg65_old").settings()
    assert "parent_overrides" not in a and b["parent_overrides"] == {"65": {"3": ()}}


def test_bad_overrides_are_named(files):
    with pytest.raises(ValueError, match=r"expected parent_overrides one of \['seg65_old'\] or a mapping, got 'old'"):
        _metric(files, parent_overrides="old")
    with pytest.raises(QuestionError, match=r"SEG 65, question\(s\) \['9'\]"):
        _metric(files, parent_overrides={"65": {"9": []}}).load("cpu")
    with pytest.raises(QuestionError, match=r"SEG 7, question\(s\) \['0'\]"):
        _metric(files, parent_overrides={"7": {"0": []}}).load("cpu")
    with pytest.raises(DependencyError):
        _metric(files, parent_overrides={"65": {"0": ["3"]}}).load("cpu")  # a cycle 0 -> 3 -> 0
